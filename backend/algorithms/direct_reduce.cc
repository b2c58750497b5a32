// Direct reduce: the latency algorithm for small buffers to a root.
//
// Every other rank sends its whole buffer to the root in one round; the root reduces the n
// buffers in rank order 0, 1, ..., n-1 into its own. One message latency, against n-1 hops in
// a row for the chain, at the price of the root's link carrying (n-1) x the buffer; reduce()
// hands larger buffers, or more ranks than Tuning::directMaxRanks, to chainReduce. Non-root
// buffers are read, never written.
#include <vector>

#include "backend/algorithms/algorithms.h"
#include "backend/reduce/reduce.h"
#include "base/bytes.h"

namespace ringx::algorithms {

void directReduce(Collective& c, void* data, size_t count, DataType dtype, ReduceOp op, int root) {
  c.setAlgorithm("direct");
  const int n = c.size();
  if (n == 1) return;
  const size_t bytes = count * elementSize(dtype);
  if (c.rank() != root) {
    c.announce(root, bytes);
    c.send(root, data, bytes);
    c.finish();
    return;
  }
  char* all = c.scratch(bytes * n);
  std::vector<uint64_t> recvEnd(n, 0);
  for (int peer = 0; peer < n; ++peer) {
    if (peer == root) continue;
    c.expect(peer, bytes);
    recvEnd[peer] = c.recv(peer, all + peer * bytes, bytes);
  }
  for (int peer = 0; peer < n; ++peer) {
    if (peer != root) c.waitRecv(peer, recvEnd[peer]);
  }
  c.finish();
  copyBytes(all + root * bytes, data, bytes);
  char* out = static_cast<char*>(data);
  copyBytes(out, all, bytes);
  for (int peer = 1; peer < n; ++peer) {
    reduce::reduceInPlace(op, dtype, out, all + peer * bytes, count);
  }
}

void reduce(Collective& c, void* data, size_t count, DataType dtype, ReduceOp op, int root,
            const Tuning& tuning) {
  if (count * elementSize(dtype) <= tuning.directAllreduceMaxBytes &&
      c.size() <= tuning.directMaxRanks) {
    directReduce(c, data, count, dtype, op, root);
  } else {
    chainReduce(c, data, count, dtype, op, root, tuning.segmentBytes);
  }
}

}  // namespace ringx::algorithms
