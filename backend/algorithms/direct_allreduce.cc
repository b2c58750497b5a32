// Direct allreduce: the latency algorithm for small buffers.
//
// Every rank sends its whole buffer to every other rank in one round and then
// reduces the n buffers locally, always in rank order 0, 1, ..., n-1, so every
// rank computes the bit-identical result. It costs (n-1) x the buffer in traffic
// per rank but only one network latency, against 2(n-1) latencies for the ring;
// ringAllreduce takes over above Tuning::directAllreduceMaxBytes.
#include <cstring>
#include <vector>

#include "backend/algorithms/algorithms.h"
#include "backend/reduce/reduce.h"
#include "base/bytes.h"

namespace ringx::algorithms {

void directAllreduce(Collective& c, void* data, size_t count, DataType dtype, ReduceOp op) {
  c.setAlgorithm("direct");
  const int n = c.size();
  const int r = c.rank();
  const size_t bytes = count * elementSize(dtype);
  char* all = c.scratch(bytes * n);
  copyBytes(all + r * bytes, data, bytes);

  std::vector<uint64_t> recvEnd(n, 0);
  for (int i = 1; i < n; ++i) {
    int peer = (r + i) % n;
    c.announce(peer, bytes);
    c.expect(peer, bytes);
    c.send(peer, data, bytes);
    recvEnd[peer] = c.recv(peer, all + peer * bytes, bytes);
  }
  for (int peer = 0; peer < n; ++peer) {
    if (peer != r) c.waitRecv(peer, recvEnd[peer]);
  }
  // Sends read `data`: they must be out before the result overwrites it.
  c.finish();
  char* out = static_cast<char*>(data);
  copyBytes(out, all, bytes);
  for (int peer = 1; peer < n; ++peer) {
    reduce::reduceInPlace(op, dtype, out, all + peer * bytes, count);
  }
}

}  // namespace ringx::algorithms
