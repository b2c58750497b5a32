#include "backend/algorithms/ring.h"

#include <algorithm>

#include "backend/reduce/copy.h"

namespace ringx::algorithms {
namespace {
int mod(int a, int n) { return ((a % n) + n) % n; }
}  // namespace

void splitEvenly(char* data, size_t count, size_t elementSize, int n, std::vector<char*>* chunks,
                 std::vector<size_t>* bytes) {
  chunks->assign(n, nullptr);
  bytes->assign(n, 0);
  size_t base = count / n, extra = count % n, at = 0;
  for (int i = 0; i < n; ++i) {
    size_t elements = base + (static_cast<size_t>(i) < extra ? 1 : 0);
    (*chunks)[i] = data + at * elementSize;
    (*bytes)[i] = elements * elementSize;
    at += elements;
  }
}

void runRingFlow(Collective& c, const RingFlow& flow) {
  c.setAlgorithm("ring");
  const int n = c.size();
  const int r = c.rank();
  if (n == 1 || flow.steps == 0) return;
  const int next = mod(r + 1, n);
  const int prev = mod(r - 1, n);

  // Handshake with both neighbours: the byte count every rank must agree on is
  // the whole buffer.
  uint64_t total = 0;
  for (size_t b : flow.chunkBytes) total += b;
  c.announce(next, total);
  c.expect(prev, total);
  if (prev != next) {
    c.announce(prev, total);
    c.expect(next, total);
  }

  // K segments per chunk; segment j of chunk c covers elements [len*j/K, len*(j+1)/K).
  const size_t largestChunk = *std::max_element(flow.chunkBytes.begin(), flow.chunkBytes.end());
  const size_t segmentBytes = std::max(flow.segmentBytes, flow.elementSize);
  const int K =
      static_cast<int>(std::max<size_t>(1, (largestChunk + segmentBytes - 1) / segmentBytes));
  auto segment = [&](int chunk, int j, char** at, size_t* bytes) {
    size_t elements = flow.chunkBytes[chunk] / flow.elementSize;
    size_t begin = elements * j / K, end = elements * (j + 1) / K;
    *at = flow.chunkData[chunk] + begin * flow.elementSize;
    *bytes = (end - begin) * flow.elementSize;
  };
  auto sendChunk = [&](int u) { return mod(r - u - flow.shift, n); };
  auto recvChunk = [&](int u) { return mod(r - u - 1 - flow.shift, n); };

  // Every receive goes straight to its place in the buffer: reducing steps
  // combine the incoming segment into it (shared memory reduces right out of
  // the neighbour's ring), copying steps overwrite it.
  const int units = flow.steps * K;  // unit = (step u, segment j) = u*K + j
  // Segments of the last step are final and not forwarded: when the buffer is
  // larger than the cache, write them around it (reduce/copy.h).
  const bool streamLastStep = total >= reduce::streamingMinBytes();
  uint64_t recvEnd[2] = {0, 0};
  auto postRecv = [&](int unit) {
    int u = unit / K, j = unit % K;
    char* at;
    size_t bytes;
    segment(recvChunk(u), j, &at, &bytes);
    if (u >= flow.reduceSteps) {
      recvEnd[unit % 2] = c.recv(prev, at, bytes, streamLastStep && u + 1 == flow.steps);
      return;
    }
    const int chunk = recvChunk(u);
    const char* accumulate =
        flow.chunkInput.empty() ? nullptr : flow.chunkInput[chunk] + (at - flow.chunkData[chunk]);
    // The last reducing step completes the chunk: AVG divides it there, in the cache.
    const double divideBy = u + 1 == flow.reduceSteps ? flow.divideBy : 0;
    recvEnd[unit % 2] =
        c.recvReduce(prev, at, bytes / flow.elementSize, flow.dtype, flow.op, accumulate, divideBy);
  };

  // Step 0: the whole first chunk goes out at once; the stream cuts it up.
  int first = sendChunk(0);
  c.send(next, flow.chunkInput.empty() ? flow.chunkData[first] : flow.chunkInput[first],
         flow.chunkBytes[first]);
  for (int unit = 0; unit < std::min(units, 2); ++unit) postRecv(unit);

  for (int unit = 0; unit < units; ++unit) {
    const int u = unit / K, j = unit % K;
    c.waitRecv(prev, recvEnd[unit % 2]);
    // Keep two receives in flight.
    if (unit + 2 < units) postRecv(unit + 2);
    // This segment is final for step u: forward it at step u+1.
    if (u + 1 < flow.steps) {
      char* at;
      size_t bytes;
      segment(recvChunk(u), j, &at, &bytes);
      c.send(next, at, bytes);
    }
  }
  c.finish();
}

}  // namespace ringx::algorithms
