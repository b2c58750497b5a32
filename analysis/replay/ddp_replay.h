// A replay of a DDP training step: what the step would take with one thing changed.
//
// The model is the step's dependency graph, with every duration taken from a recording:
//
//   forward ─> (loss) ─> backward compute ──────────────────────────> compute end ─┐
//                          │ gradient p ready at its recorded offset                 │
//                          v                                                         v
//              bucket k ready = its last gradient ─> launch (in bucket order) ─> allreduce k
//              (one ring for the whole group: a collective starts when every rank has
//               launched it and the previous one is done; its time is the cost model's)
//                                                                                    │
//              finalize: after compute end, wait for each bucket, copy it back <─────┘
//              ─> optimizer ─> the next step's forward
//
// Gradient readiness is per parameter (the engine records it on sampled steps), so buckets
// of any cap can be re-planned with the engine's own rule (bucket_plan.h) and their ready
// times follow. Filling a bucket slot (copy and scale, or with gradient_as_bucket_view a
// scale in place: the same memory traffic) runs in the gradient's hook, so it is inside the
// recorded offsets whatever the plan; the view saves the copy back in finalize.
//
// The step is one program (program.h) of compute, issue and wait operations per rank: forward,
// the loss, backward cut at each bucket's launch, the rest of backward, then per bucket a wait
// and its copy back, the optimizer. The recorded steps are replayed one after the other, each
// rank with its own compute of that step, so the ranks' jitter meets at the ring as it did;
// under the recorded plan each allreduce takes the time it took that step, under another the
// ring's fitted cost. Where the ranks' threads share too few cores, each compute runs at the
// share of them its schedule leaves it (program.h, core_shares.h): a plan that moves the
// allreduces under backward pays for the cores the ring threads take, one that moves them out
// saves it.
//
// The replay answers "what if" by changing the model (DdpWhatIf) and running it again; the
// unchanged model reproduces the recorded step, which is how its error is known
// (bench/whatif.py runs the alternatives for real). Nothing here reads traces or needs
// torch: analysis/whatif.h builds the model from a trace, the engine from its own timings.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/replay/bucket_plan.h"
#include "analysis/replay/core_shares.h"
#include "analysis/replay/cost_model.h"
#include "analysis/replay/step.h"

namespace ringx::replay {

// One rank's typical step (medians over the recorded steps), in ns.
struct DdpRankProfile {
  int32_t rank = 0;
  int64_t forwardNs = 0;
  int64_t toBackwardNs = 0;          // forward end to backward begin (the loss, zero_grad)
  int64_t backwardComputeNs = 0;     // backward begin to autograd done (copies included)
  std::vector<int64_t> gradReadyNs;  // per parameter: offset from backward begin; -1: unknown
  int64_t optimizerNs = 0;           // finalize end to the next forward
  // Finalize, after backward's compute: the copies back, summed (-1: not recorded; then one
  // pass per byte), and the rest of it beyond waiting and copying (waking up after the last
  // allreduce, the engine's bookkeeping: on busy cores, milliseconds).
  int64_t copyBackNs = -1;
  int64_t finalizeRestNs = 0;
  // The rank's allreduces in flight during backward (from when the ring started each to its
  // wire end here), as offsets from backward begin: the recorded overlap that contention
  // (program.h) takes out. Empty in the typical (median) profile.
  std::vector<std::pair<int64_t, int64_t>> flightNs;
  // The recorded step's loss to sharing the host's cores (core_shares.h), from forward begin
  // to the optimizer's end, as offsets from backward begin; and where finalize's compute began
  // (after backward's compute and the last allreduce). Empty in the typical (median) profile.
  std::vector<LossRate> lossRates;
  int64_t finalizeFromNs = 0;
};

struct DdpModel {
  std::vector<ParamLayout> params;  // registration order
  std::vector<DdpRankProfile> ranks;
  // The recorded plan: which buckets the recorded offsets were measured with.
  BucketLimits limits;
  bool gradientAsBucketView = false;
  int64_t worldSize = 1;
  HostCores host;  // what another world size on these hosts shares (cost_model.h)
  // The order buckets are built in (the engine's rebuild order: gradients as they became ready).
  std::vector<size_t> order;
  LinkCost link;
  // One pass over a gradient (filling its slot, copying it back); < 0: unknown (the recording
  // had gradient_as_bucket_view on, so it timed no copy back).
  double copyNsPerByte = 0;
  // The recorded steps, samples[step][rank] in the order of ranks (fewer than 2: replay the
  // typical step), and per step each bucket's allreduce as it ran (-1: not recorded), for the
  // recorded plan's buckets (their bytes in launch order).
  std::vector<std::vector<DdpRankProfile>> samples;
  std::vector<std::vector<int64_t>> recordedAllreduceNs;
  std::vector<std::vector<double>> recordedAllreduceLostNs;  // of those, lost to sharing
  // The share of the recorded allreduces' time their ring threads lost to sharing the host's
  // cores (core_shares.h): what every allreduce's time holds of it, recorded or modelled.
  double ringLossShare = 0;
  std::vector<int64_t> recordedBucketBytes;
  // ns of backward compute added per ns it overlaps an allreduce of its rank (program.h);
  // fitted from the recording, else from the cores (cost_model.h's coresContention).
  double contention = 0;
  bool contentionFitted = false;
};

// One change to replay; unset fields keep the recorded value.
struct DdpWhatIf {
  std::string label;  // "bucket_cap_mb=4"; empty: the recorded step
  std::optional<int64_t> bucketCapBytes;
  std::optional<int64_t> firstBucketBytes;
  std::optional<bool> gradientAsBucketView;
  std::optional<int64_t> worldSize;
  std::optional<LinkCost> link;
  bool commFree = false;     // communication takes no time: the step's floor from compute
  bool computeFree = false;  // compute takes no time: the step's floor from communication
  // false: the contention constant in place of the cores' shares (program.h), as another
  // world size replays; its baseline.
  bool sharedCores = true;
  // Every allreduce at the ring's fitted cost, under the recorded plan too: plans compared on
  // one footing (the recorded times favour the plan that ran).
  bool modelledCollectives = false;
};

struct ReplayedBucket {
  int64_t bytes = 0;
  size_t params = 0;
  int64_t readyNs = 0;  // launched by the last rank, from the slowest rank's step start
  int64_t startNs = 0;  // on the ring
  int64_t endNs = 0;
};

struct DdpReplay {
  int64_t stepNs = 0;
  // The replayed steps' spread: their 25th and 75th percentiles (program.h).
  int64_t stepLowNs = 0, stepHighNs = 0;
  // The unchanged step in the same model where the change replays in another (another world
  // size: the contention constant, not the cores' shares); 0: the baseline's. Predictions
  // scale the recorded step by stepNs over this.
  int64_t referenceNs = 0;
  // Communication after backward's compute ended, on the slowest rank: what the step waits for.
  int64_t exposedCommNs = 0;
  int64_t commNs = 0;  // every bucket's allreduce, summed
  std::vector<ReplayedBucket> buckets;
  std::vector<PathSegment> criticalPath;  // in time order, from the step's start
  int32_t slowestRank = 0;
};

// Throws std::invalid_argument when the model cannot answer `change` (no parameters or ranks;
// gradient_as_bucket_view turned off on a recording that timed no copy).
DdpReplay replayDdp(const DdpModel& model, const DdpWhatIf& change = {});

// The bucket plan `change` makes, in launch order (for the table and the engine's "auto").
std::vector<BucketSpec> plannedBuckets(const DdpModel& model, const DdpWhatIf& change);

// ringx.ddp's bucket_cap_mb="auto": the cap of `candidates` (bytes) whose replayed step is the
// shortest. `defaultCap` is kept unless another cap is predicted shorter than it by more than
// `margin` (a share of the default's step: differences the replay cannot vouch for), so "auto"
// never trades the default for noise.
struct CapChoice {
  int64_t capBytes = 0;
  int64_t predictedNs = 0;  // the chosen cap's replayed step
  int64_t defaultNs = 0;    // the default cap's
  size_t buckets = 0;       // the chosen plan's
  // "bucket_cap_mb=4 (3 buckets): 11.20 ms a step predicted, against 12.00 ms at 25"
  std::string reason;
};
CapChoice chooseBucketCap(const DdpModel& model, const std::vector<int64_t>& candidates,
                          int64_t defaultCap, double margin);

}  // namespace ringx::replay
