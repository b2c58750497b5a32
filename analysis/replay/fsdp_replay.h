// A replay of an FSDP training step: what the step would take with the sharding strategy,
// the prefetching, the rate limiter or the unit boundaries changed.
//
// The step is the FSDP engine's schedule (fsdp/engine.h) run over recorded compute:
//
//   forward   for each unit hook in the recorded order: compute, then pre-forward (issue the
//             unit's all_gather unless it is gathered, wait for it; forward_prefetch: issue the
//             next unit's) or post-forward (FULL_SHARD: free the unit's parameters)
//   backward  compute, then pre-backward (gather again unless still gathered, wait; BACKWARD_PRE:
//             issue the gather of the unit whose backward comes next) or post-backward (launch
//             the unit's reduce_scatter, or NO_SHARD's allreduce; free the parameters;
//             BACKWARD_POST: issue the next gather; the rate limiter: wait for every reduction
//             but this one)
//   end       wait for every reduction, finalize, optimizer; the next step's forward
//
// Compute between two hooks is the recorded gap with the engine's own waits and frees taken
// out (fsdp_fit.h), so a change that moves the waits keeps the compute. The engine's choices
// (gather or not, prefetch or not: the limiter counts gathered units) depend only on the
// order of hooks, never on timing, so the schedule is one program of compute, issue and
// wait operations, the same on every rank. The recorded steps are replayed one after the
// other, each rank with its own compute of each step, and the step time is their median
// period, as the recorded step's is. Collectives run on their process group in issue
// order, each starting when every rank has issued it and the group's previous one is done;
// gathers have a group of their own when the recording had one (ringx.fsdp's gather_lane),
// so they overlap reduce-scatters. A collective's time is its kind's fitted ring cost
// (cost_model.h).
//
// The schedule is a program of program.h, which runs it on every rank at once; where the
// ranks' compute and their groups' threads share too few cores, compute runs at the share of
// them its schedule leaves it (program.h, core_shares.h; fsdp_fit.h says what each gap lost as
// recorded).
//
// Blocking collectives (FSDP2 on CPU): each issue is followed at once by its wait.
//
// Unit boundaries: merging k consecutive sibling units (forward order, leaves only) makes one
// unit of their parameters, gathered and reduced at once; their compute is unchanged, but the
// engine's own work at the hooks between them goes (FSDP2's hooks are Python: at 3 ranks on
// 2 cores, a fifth of what merging saved, bench/whatif.py), and the merged unit's copy-out and
// free cost one call's fixed part, not one per member (fitted over the units' sizes).
//
// Not modelled: HYBRID_SHARD (two groups of unknown speed), mixed precision changes, and the
// memory a change would need (the engine's own account is bench/fsdp.py's formula).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/replay/cost_model.h"
#include "analysis/replay/step.h"

namespace ringx::replay {

enum class FsdpSharding { kFullShard, kShardGradOp, kNoShard };
enum class FsdpBackwardPrefetch { kNone, kBackwardPre, kBackwardPost };
// PyTorch's names: "FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"; "BACKWARD_PRE", "BACKWARD_POST",
// "NONE". The parsers return false for anything else.
const char* fsdpShardingName(FsdpSharding s);
const char* fsdpBackwardPrefetchName(FsdpBackwardPrefetch p);
bool parseFsdpSharding(std::string_view name, FsdpSharding* out);
bool parseFsdpBackwardPrefetch(std::string_view name, FsdpBackwardPrefetch* out);

// The engine's schedule options (ringx.fsdp's arguments of the same names).
struct FsdpRuntime {
  FsdpSharding sharding = FsdpSharding::kFullShard;
  FsdpBackwardPrefetch backwardPrefetch = FsdpBackwardPrefetch::kBackwardPre;
  bool forwardPrefetch = false;
  bool limitAllGathers = true;
  bool gatherLane = true;  // gathers run on a process group of their own
  // Every collective blocks the thread that issued it until done (torch's FSDP2 on CPU tensors:
  // no streams), so a prefetch moves a gather earlier but nothing runs beside it.
  bool blocking = false;
  bool fsdp2 = false;  // torch's FSDP2 recorded it: what-if speaks fully_shard's options
};

struct FsdpUnitModel {
  std::string name;        // module path, "" for the root
  int64_t paramBytes = 0;  // gathered (unsharded) parameters; 0: nothing to gather
  int64_t gradBytes = 0;   // the reduction's input; 0: nothing to reduce
};

// One of a unit's hooks: open = pre-forward (pre-backward), close = post-forward
// (post-backward).
struct FsdpHook {
  size_t unit = 0;
  bool open = true;
};

// One rank's typical step (medians over the recorded steps), in ns. Gaps are compute only:
// the recorded time between two hooks less the waits and frees in it.
struct FsdpRankProfile {
  int32_t rank = 0;
  std::vector<int64_t> forwardGapNs;   // before each forward hook
  int64_t toBackwardNs = 0;            // forward end to the first backward hook (the loss)
  std::vector<int64_t> backwardGapNs;  // before each backward hook
  int64_t finalizeNs = 0;              // after the last reduction: the end of backward
  int64_t optimizerNs = 0;             // backward end to the next forward
  std::vector<int64_t> reshardNs;      // per unit: freeing its parameters once
  // Per unit: a gather's work on the compute thread between its wire end and the parameters
  // being ready (copying them out of the gathered buffer): it comes and goes with the gather.
  std::vector<int64_t> copyOutNs;
  // How much of each gap ran while the rank had a collective in flight (see contention).
  std::vector<int64_t> forwardOverlapNs, backwardOverlapNs;
  // Per hook, the engine's own work in the gaps beside it, outside its waits and frees: an
  // open hook's pre-hook (in the gap before it), a close hook's post-hook (in the gap after
  // it). Part of the compute the gaps hold; a merged unit runs its hooks once, so a merge
  // drops the work of the hooks it drops (empty: not recorded, nothing dropped).
  std::vector<int64_t> forwardHookNs, backwardHookNs;
  // What each gap lost to sharing the host's cores as recorded (core_shares.h), and the rate
  // the rest of the step's compute lost at (per ns). Empty in the typical (median) profile.
  std::vector<int64_t> forwardLostNs, backwardLostNs;
  double otherLossRate = 0;
};

struct FsdpModel {
  std::vector<FsdpUnitModel> units;  // [0] is the root
  std::vector<FsdpHook> forward;     // the recorded hook order, the same on every rank
  std::vector<FsdpHook> backward;
  std::vector<FsdpRankProfile> ranks;  // the typical step: medians
  // The recorded steps, samples[step][rank] in the order of ranks (empty: replay the typical
  // step). Replaying them keeps each rank's step-to-step jitter: where two ranks are slow in
  // turn, each collective waits for the later one, which medians would hide.
  std::vector<std::vector<FsdpRankProfile>> samples;
  // What the samples' collectives took (see fsdp_fit.h): the replay uses them, so that a
  // collective slowed on the day counts as it did, each for the same unit's collective of the
  // kind that ran the same way (waited on at once, or prefetched); one the recording lacks
  // (NO_SHARD's allreduce, merged units, another wire or world size) takes its kind's fitted
  // cost.
  struct RecordedCollective {
    PathSegment::Kind kind = PathSegment::Kind::kAllGather;
    size_t unit = 0;
    size_t sample = 0;      // index into samples
    size_t occurrence = 0;  // the unit's first, second... collective of the kind in the step
    int64_t ns = 0;
    bool prefetched = false;  // a gather issued ahead of need
    double lostNs = 0;        // of ns, lost to sharing the host's cores (core_shares.h)
  };
  std::vector<RecordedCollective> recordedCollectives;
  // The share of the recorded collectives' time their ring threads lost to sharing the host's
  // cores (core_shares.h): what every collective's time holds of it, recorded or modelled.
  double ringLossShare = 0;
  // The ranks' hosts are joined by a network, whose links a gathers' lane shares with the
  // others (program.h's shared link): every collective's time here is its time alone.
  bool sharedLink = false;
  FsdpRuntime runtime;
  int64_t worldSize = 1;
  HostCores host;  // what another world size on these hosts shares (cost_model.h)
  // Per collective kind, fitted from the recording (a kind it lacks: the fit of all kinds).
  LinkCost gather, reduceScatter, allreduce;
  // Contention: ns of compute added per ns the compute overlaps a collective of its rank (the
  // group threads take cores the compute would have). 0: none. A change that moves
  // collectives under compute (prefetching) or out of it pays or saves this. Fitted from the
  // recording, else from the cores (cost_model.h's coresContention).
  double contention = 0;
  bool contentionFitted = false;
};

// One change to replay; unset fields keep the recorded value.
struct FsdpWhatIf {
  std::string label;  // "sharding_strategy=SHARD_GRAD_OP"; empty: the recorded step
  std::optional<FsdpSharding> sharding;
  std::optional<FsdpBackwardPrefetch> backwardPrefetch;
  std::optional<bool> forwardPrefetch;
  std::optional<bool> limitAllGathers;
  int64_t mergeUnits = 1;  // unit boundaries: every k consecutive sibling leaf units as one
  std::optional<int64_t> worldSize;
  std::optional<LinkCost> link;  // every collective on this wire
  bool commFree = false;
  bool computeFree = false;
  // false: the contention constant in place of the cores' shares (program.h), as another
  // world size replays; its baseline.
  bool sharedCores = true;
};

struct FsdpReplay {
  int64_t stepNs = 0;
  // The replayed steps' spread: their 25th and 75th percentiles (program.h).
  int64_t stepLowNs = 0, stepHighNs = 0;
  // The unchanged step in the same model where the change replays in another (another world
  // size: the contention constant, not the cores' shares); 0: the baseline's. Predictions
  // scale the recorded step by stepNs over this.
  int64_t referenceNs = 0;
  // Time the slowest rank's step waited for collectives (gathers, limiter, the end).
  int64_t exposedCommNs = 0;
  int64_t commNs = 0;  // every collective's time, summed
  size_t units = 0;    // after merging
  size_t gathers = 0;  // all_gathers a step
  int32_t slowestRank = 0;
  // The slowest rank's step: its compute and the collectives it waited for, in time order.
  std::vector<PathSegment> criticalPath;
};

// Throws std::invalid_argument when the model cannot answer (no units, ranks or hooks, a
// merge of less than one unit).
FsdpReplay replayFsdp(const FsdpModel& model, const FsdpWhatIf& change = {});

// The model with every k consecutive sibling leaf units merged (k <= 1: unchanged).
FsdpModel mergeUnits(const FsdpModel& model, int64_t k);

}  // namespace ringx::replay
