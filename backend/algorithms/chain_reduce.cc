// Chain reduce to a root, pipelined in segments (chain broadcast run backwards).
//
// Ranks are lined up so that the root comes last: root+1, root+2, ..., root.
// The first rank streams its buffer to the second; each following rank
// receives a segment, combines it with its own segment and forwards the partial
// result, and the root combines the last partial result into its buffer. Every
// link carries the data once and all links work at the same time. Non-root
// buffers are not modified (partial results go through a scratch buffer).
#include <algorithm>
#include <vector>

#include "backend/algorithms/algorithms.h"
#include "backend/reduce/reduce.h"

namespace ringx::algorithms {

void chainReduce(Collective& c, void* data, size_t count, DataType dtype, ReduceOp op, int root,
                 size_t segmentBytes) {
  c.setAlgorithm("chain");
  const int n = c.size();
  if (n == 1) return;
  const size_t elementBytes = elementSize(dtype);
  const size_t bytes = count * elementBytes;
  const int position = (c.rank() - root - 1 + 2 * n) % n;  // root is last
  const int prev = (c.rank() - 1 + n) % n;
  const int next = (c.rank() + 1) % n;
  const bool first = position == 0;
  const bool isRoot = position == n - 1;
  char* buffer = static_cast<char*>(data);

  if (!first) c.expect(prev, bytes);
  if (!isRoot) c.announce(next, bytes);
  if (first) {
    c.send(next, buffer, bytes);
    c.finish();
    return;
  }
  const size_t segmentElements = std::max<size_t>(1, segmentBytes / elementBytes);
  const size_t segments = std::max<size_t>(1, (count + segmentElements - 1) / segmentElements);
  const size_t slotBytes = segmentElements * elementBytes;
  const size_t slotStride = std::min(slotBytes, bytes);
  char* slots = c.scratch(2 * slotStride, 0);
  // Partial results that are still being sent must stay intact: a whole-size buffer.
  char* partial = isRoot ? nullptr : c.scratch(bytes, 1);
  auto range = [&](size_t j, size_t* offset, size_t* length) {
    *offset = j * slotBytes;
    *length = std::min(bytes, (j + 1) * slotBytes) - *offset;
  };
  uint64_t recvEnd[2] = {0, 0};
  auto postRecv = [&](size_t j) {
    size_t offset, length;
    range(j, &offset, &length);
    recvEnd[j % 2] = c.recv(prev, slots + (j % 2) * slotStride, length);
  };
  for (size_t j = 0; j < std::min<size_t>(segments, 2); ++j) postRecv(j);
  for (size_t j = 0; j < segments; ++j) {
    c.waitRecv(prev, recvEnd[j % 2]);
    size_t offset, length;
    range(j, &offset, &length);
    const char* incoming = slots + (j % 2) * slotStride;
    // Operand order (incoming partial first) is the same on every rank.
    char* out = isRoot ? buffer + offset : partial + offset;
    reduce::reduce(op, dtype, out, incoming, buffer + offset, length / elementBytes);
    if (j + 2 < segments) postRecv(j + 2);
    if (!isRoot) c.send(next, out, length);
  }
  c.finish();
}

}  // namespace ringx::algorithms
