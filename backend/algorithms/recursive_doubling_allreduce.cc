// Recursive-doubling allreduce: the latency algorithm for small buffers at large n.
//
// With p ranks, p a power of two, rank r exchanges its whole buffer with rank r ^ 1, then
// r ^ 2, r ^ 4, ...: after round k every rank holds the reduction over its block of 2^(k+1)
// ranks, so log2(p) rounds reduce everything. Each rank talks to log2(p) peers and sends the
// buffer log2(p) times, against the direct exchange's n-1 peers (one round, but n-1
// connections per rank) and the ring's 2(n-1) steps.
//
// Any other n is folded onto p = the largest power of two below it: rank p + i first sends
// its buffer to rank i, which reduces it in; ranks 0..p-1 run the doubling; rank i finally
// sends the result back to rank p + i.
//
// Both partners of an exchange combine the same two partial results in the same order (the
// lower rank's block first), and every rank of a block holds the same bits, so all ranks end
// with bit-identical results. Names: n ranks, p the power of two, partner, mask = 2^k.
#include "backend/algorithms/algorithms.h"
#include "backend/reduce/reduce.h"

namespace ringx::algorithms {

void recursiveDoublingAllreduce(Collective& c, void* data, size_t count, DataType dtype,
                                ReduceOp op) {
  c.setAlgorithm("recursive_doubling");
  const int n = c.size();
  const int r = c.rank();
  if (n == 1) return;
  const size_t bytes = count * elementSize(dtype);
  char* mine = static_cast<char*>(data);
  char* theirs = c.scratch(bytes);
  int p = 1;
  while (p * 2 <= n) p *= 2;

  // Step 0: fold the ranks above p onto the ones below.
  if (r >= p) {
    const int partner = r - p;
    c.announce(partner, bytes);
    c.send(partner, mine, bytes);
    c.expect(partner, bytes);
    c.waitRecv(partner, c.recv(partner, mine, bytes));  // the result comes back in place
    c.finish();
    return;
  }
  // Combines the partner's block into ours, the lower rank's block as the left operand.
  auto combine = [&](int partner) {
    if (partner < r) {
      reduce::reduce(op, dtype, mine, theirs, mine, count);
    } else {
      reduce::reduceInPlace(op, dtype, mine, theirs, count);
    }
  };
  if (r + p < n) {
    const int folded = r + p;
    c.expect(folded, bytes);
    c.waitRecv(folded, c.recv(folded, theirs, bytes));
    combine(folded);
  }
  // Steps 1..log2(p): exchange with the rank across the mask; our own send must be out before
  // the reduction overwrites the buffer it reads.
  for (int mask = 1; mask < p; mask *= 2) {
    const int partner = r ^ mask;
    c.announce(partner, bytes);
    c.expect(partner, bytes);
    const uint64_t sent = c.send(partner, mine, bytes);
    c.waitRecv(partner, c.recv(partner, theirs, bytes));
    c.waitSend(partner, sent);
    combine(partner);
  }
  // Last step: the result back to the folded rank.
  if (r + p < n) {
    c.announce(r + p, bytes);
    c.send(r + p, mine, bytes);
  }
  c.finish();
}

}  // namespace ringx::algorithms
