// Chain broadcast, pipelined in segments.
//
// Ranks are lined up starting at the root: root, root+1, ..., root-1. The root
// streams its buffer to the second rank; every other rank receives a segment
// into place and immediately forwards it to the rank after it, while the next
// segment is already arriving. For large buffers every link carries the data
// once and all links are busy at the same time, so the time approaches
// bytes / link bandwidth (a binomial tree would send it log2(n) times in a row).
#include <algorithm>

#include "backend/algorithms/algorithms.h"
#include "backend/reduce/copy.h"

namespace ringx::algorithms {

void chainBroadcast(Collective& c, void* data, size_t bytes, int root, size_t segmentBytes) {
  c.setAlgorithm("chain");
  const int n = c.size();
  if (n == 1) return;
  const int position = (c.rank() - root + n) % n;
  const int prev = (c.rank() - 1 + n) % n;
  const int next = (c.rank() + 1) % n;
  const bool first = position == 0;
  const bool last = position == n - 1;
  char* buffer = static_cast<char*>(data);

  if (!first) c.expect(prev, bytes);
  if (!last) c.announce(next, bytes);
  if (first) {
    c.send(next, buffer, bytes);
    c.finish();
    return;
  }
  if (last) {
    // The end of the chain forwards nothing: large buffers bypass the cache.
    c.waitRecv(prev, c.recv(prev, buffer, bytes, bytes >= reduce::streamingMinBytes()));
    c.finish();
    return;
  }
  const size_t segment = std::max<size_t>(1, segmentBytes);
  const size_t segments = std::max<size_t>(1, (bytes + segment - 1) / segment);
  auto range = [&](size_t j, size_t* offset, size_t* length) {
    *offset = j * segment;
    *length = std::min(bytes, (j + 1) * segment) - *offset;
  };
  uint64_t recvEnd[2] = {0, 0};
  auto postRecv = [&](size_t j) {
    size_t offset, length;
    range(j, &offset, &length);
    recvEnd[j % 2] = c.recv(prev, buffer + offset, length);
  };
  for (size_t j = 0; j < std::min<size_t>(segments, 2); ++j) postRecv(j);
  for (size_t j = 0; j < segments; ++j) {
    c.waitRecv(prev, recvEnd[j % 2]);
    if (j + 2 < segments) postRecv(j + 2);
    size_t offset, length;
    range(j, &offset, &length);
    c.send(next, buffer + offset, length);
  }
  c.finish();
}

}  // namespace ringx::algorithms
