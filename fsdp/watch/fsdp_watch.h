// torch's FSDP2 (fully_shard), seen from outside: the per-unit events of a ringx.fsdp trace
// (fsdp/timing.h), for a job that changes nothing but its backend.
//
// FSDP2's scopes (trace/format/fsdp2_scopes.h) mark each phase of each unit. The callbacks
// (observe/torch_callbacks.cc) hand each scope's begin and end here, and each collective issued
// inside one (its c10d Work's scope, from issue to finish; over ringx, when the wire ran it). So a
// unit's
//   all_gather      runs from "all_gather" (the collective's issue) to the end of its copy-out,
//                   waited for from the "pre_forward"/"pre_backward" that needed it, prefetched
//                   when issued inside a prefetch scope of another unit;
//   forward         from its pre_forward's end to its post_forward's begin;
//   backward        from its pre_backward's end to its post-backward (accumulate or reshard);
//   reshard         post_forward (when the unit reshards after forward), post_backward_reshard;
//   reduce_scatter  the first collective in post_backward_reduce (a second one, HSDP's,
//   "allreduce").
// Memory counters follow FSDP2's own sizes (Python reads them from each FSDPParam): sharded
// parameters always, a unit's unsharded parameters from its copy-out to its reshard (with
// reshard_after_forward=N, a 1/N shard of them from the post-forward reshard to the next
// copy-out), its
// unsharded gradients from its post-backward to its reduction, sharded gradients from their
// reduction until the optimizer's zero_grad.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "backend/group/wire_times.h"
#include "fsdp/timing.h"
#include "trace/format/fsdp2_scopes.h"

namespace ringx::observe {

// FSDP2's scopes, by name (one reading with the profiler side's).
using trace::FsdpScope;
using trace::parseFsdpScope;

// One FSDPParamGroup, as Python read it from FSDP2's parameters.
struct FsdpUnit {
  std::string name;  // module path, "" for the root module
  int64_t shardedBytes = 0;
  int64_t unshardedBytes = 0;  // in the all-gather's dtype (mixed precision's param_dtype)
  int64_t gradBytes = 0;       // unsharded gradients, in the reduce dtype
  int64_t shardedGradBytes = 0;
  bool reshardsAfterForward = true;
  // reshard_after_forward=N (an int smaller than the shard group): what the unit keeps from its
  // post-forward reshard to its next gather, a 1/N shard of the gathered parameters; else 0.
  int64_t heldAfterForwardBytes = 0;
};

// The schedule, by PyTorch's FSDP names (recorded as "fsdp_config" as each iteration begins).
struct FsdpSchedule {
  std::string shardingStrategy = "FULL_SHARD";  // SHARD_GRAD_OP, HYBRID_SHARD, ...
  std::string backwardPrefetch = "BACKWARD_PRE";
  bool forwardPrefetch = false;
  int64_t shardSize = 1;
  bool blocking = false;  // collectives block the issuing thread (FSDP2 on CPU tensors)
};

class FsdpWatch {
 public:
  void setUnits(std::vector<FsdpUnit> units, FsdpSchedule schedule);
  bool hasUnits() const;

  // A scope began / ended on some thread. `prefetch` says the scope sits inside a prefetch
  // scope (an all_gather issued ahead of need).
  void scopeBegin(FsdpScope scope, const std::string& unit, int64_t ns, bool prefetch);
  void scopeEnd(FsdpScope scope, const std::string& unit, int64_t beginNs, int64_t endNs);
  // A collective issued inside `scope` of `unit` (all_gather or post_backward_reduce): a token
  // for its finish and wire (0: not one to record). The first in a post_backward_reduce is the
  // reduce-scatter, whatever the backend runs it as (gloo: an allreduce), a second HSDP's
  // allreduce.
  uint64_t collectiveIssued(FsdpScope scope, const std::string& unit, int64_t ns);
  void collectiveFinished(uint64_t token, int64_t ns);
  void attachWire(uint64_t token, WireReader reader);
  // Waits until every collective issued so far has finished (recorded), or `deadline`; whether
  // they all did. On a GPU, FSDP2's last reduce-scatters finish after the step's Python
  // returns: tracing stops only once they are recorded.
  bool awaitCollectives(std::chrono::steady_clock::time_point deadline);

  int64_t iterations() const;  // iterations begun
  fsdp::MemoryCounters memory() const;

 private:
  struct Collective {
    std::string unit;
    bool gather = false;
    std::string op;
    int64_t step = 0;
    int64_t bytes = 0;
    int64_t issueNs = 0;
    WireReader wire;
    // A gather whose copy-out ended before its collective finished (on a GPU the host only
    // enqueues the copy-out behind it): recorded when the collective finishes, with its wire.
    fsdp::GatherTiming copiedOut;
  };
  struct UnitState {
    FsdpUnit unit;
    fsdp::GatherTiming gather;  // the pending gather (issueNs == 0: none)
    // Its collective, until it finishes (0: none, or finished). A unit's next gather can be
    // issued before its last one's collective finishes on a GPU: a finish updates only its own.
    uint64_t gatherToken = 0;
    int64_t computeBeginNs = 0;
    bool holdsUnsharded = false;
    bool holdsGrads = false;
    bool holdsShardedGrads = false;
    bool holdsPostForward = false;  // its reshard_after_forward=N shard
    int reductions = 0;             // collectives issued in the current post_backward_reduce
  };
  UnitState* unitLocked(const std::string& name);
  void sampleMemoryLocked();
  void recordConfigLocked(int64_t ns);  // the schedule as iteration step_ begins at ns

  mutable std::mutex mutex_;
  std::condition_variable settled_;  // collectives_ became empty
  std::map<std::string, UnitState> units_;
  FsdpSchedule schedule_;
  bool haveUnits_ = false;
  int64_t step_ = -1;
  bool inBackward_ = false;
  int64_t pendingConfigNs_ = 0;  // an iteration began before the units were known
  int64_t forwardBeginNs_ = 0, forwardEndNs_ = 0, backwardBeginNs_ = 0, lastBackwardEndNs_ = 0;
  fsdp::MemoryCounters memory_;
  std::map<uint64_t, Collective> collectives_;
  uint64_t nextToken_ = 1;
};

}  // namespace ringx::observe
