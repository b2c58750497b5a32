// Barrier: every rank exchanges a collective header with every other rank.
//
// A rank leaves only after it has heard from all others, and nobody sends
// before entering, so nobody leaves before everyone has entered. The headers
// carry the sequence number, so a rank that skipped a collective is caught here
// too. One round of n-1 tiny messages per rank.
#include "backend/algorithms/algorithms.h"

namespace ringx::algorithms {

void barrier(Collective& c) {
  c.setAlgorithm("headers");
  for (int peer = 0; peer < c.size(); ++peer) {
    if (peer == c.rank()) continue;
    c.announce(peer, 0);
    c.expect(peer, 0);
  }
  c.finish();
}

}  // namespace ringx::algorithms
