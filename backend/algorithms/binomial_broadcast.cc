// Binomial-tree broadcast: the latency algorithm for small buffers at large n.
//
// Ranks are numbered relative to the root (v = (rank - root) mod n). In round k every rank that
// has the data (v < 2^k) sends it to v + 2^k, so after ceil(log2 n) rounds everyone has it. A
// rank receives once, from v minus its lowest set bit, and sends to v + 2^j for the bits j
// below that one, largest subtree first. Each rank talks to at most log2(n) + 1 peers, against
// the root's n-1 in the direct broadcast and the n-1 hops of the chain; chainBroadcast still
// takes large buffers, where pipelining along the chain wins.
#include "backend/algorithms/algorithms.h"

namespace ringx::algorithms {

void binomialBroadcast(Collective& c, void* data, size_t bytes, int root) {
  c.setAlgorithm("binomial_tree");
  const int n = c.size();
  if (n == 1) return;
  const int v = (c.rank() - root + n) % n;
  auto rankOf = [&](int relative) { return (relative + root) % n; };

  // Receive from the parent: v without its lowest set bit.
  int mask = 1;
  while (mask < n) {
    if (v & mask) {
      const int parent = rankOf(v - mask);
      c.expect(parent, bytes);
      c.waitRecv(parent, c.recv(parent, data, bytes));
      break;
    }
    mask *= 2;
  }
  // Send to the children, the largest subtree first.
  for (mask /= 2; mask > 0; mask /= 2) {
    if (v + mask < n) {
      const int child = rankOf(v + mask);
      c.announce(child, bytes);
      c.send(child, data, bytes);
    }
  }
  c.finish();
}

}  // namespace ringx::algorithms
