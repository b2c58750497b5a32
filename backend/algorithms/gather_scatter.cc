// Gather and scatter: the root talks to every rank directly.
//
// The root posts one receive (gather) or send (scatter) per rank and lets the
// progress loop serve all connections at once, so a slow rank does not hold up
// the transfers of the others. The data has a single destination, so a tree
// would only add hops.
#include <cstring>
#include <vector>

#include "backend/algorithms/algorithms.h"
#include "base/bytes.h"

namespace ringx::algorithms {

void gather(Collective& c, const void* input, void* output, size_t bytes, int root) {
  c.setAlgorithm("direct");
  const int n = c.size();
  if (c.rank() != root) {
    c.announce(root, bytes);
    c.send(root, input, bytes);
    c.finish();
    return;
  }
  char* out = static_cast<char*>(output);
  copyBytes(out + root * bytes, input, bytes);
  for (int peer = 0; peer < n; ++peer) {
    if (peer == root) continue;
    c.expect(peer, bytes);
    c.recv(peer, out + peer * bytes, bytes);
  }
  c.finish();
}

void scatter(Collective& c, const void* input, void* output, size_t bytes, int root) {
  c.setAlgorithm("direct");
  const int n = c.size();
  if (c.rank() != root) {
    c.expect(root, bytes);
    c.waitRecv(root, c.recv(root, output, bytes));
    c.finish();
    return;
  }
  const char* in = static_cast<const char*>(input);
  for (int i = 1; i < n; ++i) {
    int peer = (root + i) % n;
    c.announce(peer, bytes);
    c.send(peer, in + peer * bytes, bytes);
  }
  copyBytes(output, in + root * bytes, bytes);
  c.finish();
}

}  // namespace ringx::algorithms
