// Barrier: collective headers, all at once for a few ranks, in log2(n) rounds for many.
//
// Few ranks (up to Tuning::directMaxRanks): every rank exchanges a header with every other
// rank. A rank leaves only after it has heard from all others, and nobody sends before
// entering, so nobody leaves before everyone has entered. One round of n-1 tiny messages.
//
// More ranks: the recursive-doubling exchange (recursive_doubling_allreduce.cc) of an empty
// buffer. After round k a rank has heard, directly or through its partners, from its whole
// block of 2^(k+1) ranks, so nobody leaves before everyone has entered, after log2(n) rounds
// (two more when n is not a power of two). Each rank talks to about log2(n) peers, the same
// ones small allreduces and binomial broadcasts from rank 0 use, so a job running all three
// holds few connections per rank (a dissemination barrier would add another log2(n)).
//
// The headers carry the sequence number, so a rank that skipped a collective is caught here too.
#include "backend/algorithms/algorithms.h"

namespace ringx::algorithms {

void barrier(Collective& c, const Tuning& tuning) {
  const int n = c.size();
  if (n > tuning.directMaxRanks) {
    recursiveDoublingAllreduce(c, nullptr, 0, DataType::kUInt8, ReduceOp::kSum);
    return;
  }
  c.setAlgorithm("headers");
  for (int peer = 0; peer < n; ++peer) {
    if (peer == c.rank()) continue;
    c.announce(peer, 0);
    c.expect(peer, 0);
  }
  c.finish();
}

}  // namespace ringx::algorithms
