// Direct broadcast: the latency algorithm for small buffers.
//
// The root sends its whole buffer to every other rank in one round, and each
// rank receives it straight into place. The root's link carries (n-1) x the
// buffer, but every rank has it after one message latency, against n-1 hops in
// a row for the chain (with more ranks than cores each hop can also be a trip
// through the scheduler). flatBroadcast() hands buffers above
// Tuning::directBroadcastMaxBytes to chainBroadcast, which pipelines them.
#include "backend/algorithms/algorithms.h"

namespace ringx::algorithms {

void directBroadcast(Collective& c, void* data, size_t bytes, int root) {
  c.setAlgorithm("direct");
  const int n = c.size();
  if (n == 1) return;
  if (c.rank() == root) {
    for (int i = 1; i < n; ++i) {
      const int peer = (root + i) % n;
      c.announce(peer, bytes);
      c.send(peer, data, bytes);
    }
  } else {
    c.expect(root, bytes);
    c.waitRecv(root, c.recv(root, data, bytes));
  }
  c.finish();
}

void flatBroadcast(Collective& c, void* data, size_t bytes, int root, const Tuning& tuning) {
  if (bytes <= tuning.directBroadcastMaxBytes) {
    if (c.size() <= tuning.directMaxRanks) {
      directBroadcast(c, data, bytes, root);
    } else {
      binomialBroadcast(c, data, bytes, root);
    }
  } else {
    chainBroadcast(c, data, bytes, root, tuning.segmentBytes);
  }
}

}  // namespace ringx::algorithms
