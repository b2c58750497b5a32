// Hierarchical broadcast: the root's host first, then one leader per host, then every host.
//
// With the root on host R (the host layout, bootstrap/host_layout.h; a host's leader is its
// lowest rank), three phases run on views of the group (collective.h), each with the flat
// broadcast (flatBroadcast: direct, binomial tree or pipelined chain):
//
//   step 1: within host R, from the root to every rank of host R (its leader among them);
//   step 2: among the H leaders, from host R's leader: the only traffic between hosts;
//   step 3: within every other host, from its leader.
//
// A small broadcast's binomial tree over all N ranks crosses hosts in most of its log2(N)
// rounds, and each rank of it talks to ranks of other hosts; here only log2(H) rounds cross
// hosts, between leaders, and non-leaders talk only within their host.
//
// broadcast() takes this form on its own (Tuning::Hierarchy::kAuto) for small buffers only:
// the flat chain of a large buffer is pipelined over all N ranks and crosses each host
// boundary once when a host's ranks are numbered together, while the three phases here run one
// after the other, each a whole pass over the buffer.
#include <algorithm>

#include "backend/algorithms/algorithms.h"

namespace ringx::algorithms {

void broadcast(Collective& c, void* data, size_t bytes, int root, const Tuning& tuning) {
  if (useHierarchy(c, tuning) &&
      (tuning.hierarchical == Tuning::Hierarchy::kOn || bytes <= tuning.directBroadcastMaxBytes)) {
    hierarchicalBroadcast(c, data, bytes, root, tuning);
  } else {
    flatBroadcast(c, data, bytes, root, tuning);
  }
}

namespace {
// This rank's place in `ranks` (it is there).
int indexOf(const std::vector<int>& ranks, int rank) {
  return static_cast<int>(std::find(ranks.begin(), ranks.end(), rank) - ranks.begin());
}
}  // namespace

void hierarchicalBroadcast(Collective& c, void* data, size_t bytes, int root,
                           const Tuning& tuning) {
  const bootstrap::HostLayout& hosts = c.hosts();
  const int me = c.rank();
  const int rootHost = hosts.hostOf(root);
  const int myHost = hosts.hostOf(me);
  const std::vector<int> local = hosts.ranksOn(myHost);

  // Step 1: the root's host, from the root.
  if (myHost == rootHost && local.size() > 1) {
    Collective host(c, local);
    flatBroadcast(host, data, bytes, indexOf(local, root), tuning);
  }
  // Step 2: the leaders, from the root host's leader (rank rootHost of this view).
  if (hosts.isLeader(me) && hosts.hosts() > 1) {
    Collective leaders(c, hosts.leaders());
    flatBroadcast(leaders, data, bytes, rootHost, tuning);
  }
  // Step 3: every other host, from its leader.
  if (myHost != rootHost && local.size() > 1) {
    Collective host(c, local);
    flatBroadcast(host, data, bytes, 0, tuning);
  }
  c.setAlgorithm("hierarchical");
}

}  // namespace ringx::algorithms
