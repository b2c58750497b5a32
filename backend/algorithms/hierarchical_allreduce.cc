// Hierarchical allreduce: within each host first, then one leader per host across hosts.
//
// The flat algorithms treat every rank alike, so their step count grows with the number of
// ranks N: the ring takes 2(N-1) steps, and every one of them can cross a host boundary.
// With H hosts of L ranks each (the host layout, bootstrap/host_layout.h; a host's leader is
// its lowest rank), this runs three phases on views of the group (collective.h):
//
//   step 1: within each host, reduce to the leader (reduce(): direct for small buffers,
//           pipelined chain for large ones), over shared memory;
//   step 2: the H leaders allreduce among themselves with the flat algorithms (flatAllreduce:
//           direct or recursive doubling for small buffers, the ring for large ones), the only
//           traffic between hosts;
//   step 3: within each host, the leader broadcasts the result (flatBroadcast(): direct,
//           binomial tree or pipelined chain).
//
// A ring allreduce of a large buffer now takes 2(H-1) steps across hosts instead of 2(N-1),
// and sends the same bytes across each host's link; a small one takes log2(H) rounds across
// hosts. Non-leaders talk only to ranks of their own host, and leaders only to other leaders
// across hosts, so connections stay few (connections on demand, bootstrap/connector.h).
//
// Why a reduce to the leader rather than a reduce-scatter within the host (each rank then
// allreducing its shard across hosts, and an all-gather within the host): the sharded form
// moves fewer bytes per rank, but every rank would then talk across hosts, to its peer on
// every other host, and the point of this form at a thousand ranks is that only one rank per
// host does.
//
// The phases run one after the other, not pipelined into each other: for large buffers that
// costs up to three passes over the buffer where the flat ring costs two.
//
// Every leader ends step 2 with the bit-identical result (the flat algorithms guarantee it),
// and step 3 copies it verbatim, so every rank of the group holds the same bits.
#include "backend/algorithms/algorithms.h"
#include "backend/reduce/reduce.h"

namespace ringx::algorithms {

bool useHierarchy(const Collective& c, const Tuning& tuning) {
  switch (tuning.hierarchical) {
    case Tuning::Hierarchy::kOff:
      return false;
    case Tuning::Hierarchy::kOn:
      return c.size() > 1;
    case Tuning::Hierarchy::kAuto:
      break;
  }
  const bootstrap::HostLayout& hosts = c.hosts();
  return c.size() > tuning.directMaxRanks && hosts.hosts() > 1 && hosts.largestHost() > 1;
}

void allreduce(Collective& c, void* data, size_t count, DataType dtype, ReduceOp op,
               const Tuning& tuning, double divideBy) {
  if (useHierarchy(c, tuning)) {
    hierarchicalAllreduce(c, data, count, dtype, op, tuning, divideBy);
  } else {
    flatAllreduce(c, data, count, dtype, op, tuning, divideBy);
  }
}

namespace {

// What step 2 runs, as flatAllreduce chooses it, for the trace: every rank names the same
// algorithm, leaders or not. A static string (Collective::setAlgorithm).
const char* hierarchicalName(int hosts, size_t bytes, const Tuning& tuning) {
  if (hosts == 1) return "hierarchical";
  if (bytes > tuning.directAllreduceMaxBytes) return "hierarchical+ring";
  return hosts <= tuning.directMaxRanks ? "hierarchical+direct" : "hierarchical+recursive_doubling";
}

}  // namespace

void hierarchicalAllreduce(Collective& c, void* data, size_t count, DataType dtype, ReduceOp op,
                           const Tuning& tuning, double divideBy) {
  const bootstrap::HostLayout& hosts = c.hosts();
  const int me = c.rank();
  const size_t bytes = count * elementSize(dtype);
  // Ranks of this host, ascending: the leader is rank 0 of the host's view.
  const std::vector<int> local = hosts.ranksOn(hosts.hostOf(me));
  const bool together = local.size() > 1;

  // Step 1: reduce within the host to the leader (non-leaders' buffers are left as they are).
  if (together) {
    Collective host(c, local);
    reduce(host, data, count, dtype, op, 0, tuning);
  }
  // Step 2: the leaders allreduce across hosts; host h's leader is rank h of this view. AVG
  // divides there (or, with one host, on the leader before step 3), so that step 3 hands out
  // the final result.
  if (hosts.isLeader(me) && hosts.hosts() > 1) {
    Collective leaders(c, hosts.leaders());
    flatAllreduce(leaders, data, count, dtype, op, tuning, divideBy);
  } else if (hosts.isLeader(me) && divideBy != 0) {
    reduce::divide(dtype, data, divideBy, count);
  }
  // Step 3: the leader hands the result to its host. A view of its own: step 1's view has
  // used its handshake with each of these ranks.
  if (together) {
    Collective host(c, local);
    flatBroadcast(host, data, bytes, 0, tuning);
  }
  c.setAlgorithm(hierarchicalName(hosts.hosts(), bytes, tuning));
}

}  // namespace ringx::algorithms
