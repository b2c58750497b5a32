// The FSDP replay model (fsdp_replay.h) fitted from recorded steps:
//
//   - the hook order: each unit's forward and backward compute spans open and close its
//     hooks; the order is the first complete step's on the lowest rank, and only steps of
//     every rank with that order are used;
//   - per rank, the medians over those steps of the compute between hooks: the time between
//     them less what the engine spent not computing in it: waiting for a gather (its
//     exposed_ns), a blocking collective (FSDP2 on CPU) from its issue to its wire end,
//     freeing parameters (reshard spans), and waiting for reductions (with the rate limiter,
//     after each post-backward; at the end, always): from the post-backward (and its reshard)
//     to the reductions' done time;
//   - per hook, the engine's own work beside it (FsdpRankProfile::forwardHookNs): a pre-hook
//     from its start (where compute began to wait for the unit's gather: ready - exposed_ns)
//     to the unit's compute; a post-hook from the compute's end to its last act (the unit's
//     free, its reduction's launch, or for a blocking one its done time); less waits and
//     frees, medians;
//   - per unit, a gather's copy out (from the later of its wire end and the wait's start
//     until ready): compute of its own, which the replay runs after each gather;
//   - the cores as the recorded steps shared them (core_shares.h): each rank computing from a
//     step's forward begin to its next but for that time, the ring running each collective
//     every rank recorded; each gap's loss to sharing, and the rest of the step's rate;
//   - per unit, the gathered bytes (the all_gather's) and the reduction's input bytes (a unit
//     never gathered, as under NO_SHARD, gathers what it reduces);
//   - per collective (unit, step, occurrence): from the last rank's start (when its group could
//     start it: issued, and the group's previous collective on the rank done) to the last
//     rank's wire end, so the time the group's thread took to start it (on a machine whose
//     cores the compute keeps busy, part of every collective) and a ring's uneven finish are
//     in it; per kind, the ring cost fitted (cost_model.h) to these;
//   - the recorded step: step.h's RecordedSteps (the ranks' forward-to-forward periods).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/replay/fsdp_replay.h"

namespace ringx::replay {

// One rank's step. Times are one clock's ns (0: not recorded); units index
// FsdpRecording::units.
struct FsdpStepRecord {
  int64_t step = 0;
  int64_t forwardBeginNs = 0, forwardEndNs = 0, backwardBeginNs = 0, backwardEndNs = 0;
  int64_t optimizerNs = -1;  // after this step's backward; -1: not recorded
  struct Span {
    size_t unit = 0;
    int64_t beginNs = 0, endNs = 0;
  };
  std::vector<Span> forward, backward, reshards;  // the units' compute spans, their frees
  struct Gather {
    size_t unit = 0;
    int64_t bytes = 0, issueNs = 0, readyNs = 0, exposedNs = 0, wireEndNs = 0;
    bool prefetched = false;
  };
  std::vector<Gather> gathers;
  struct Reduction {
    size_t unit = 0;
    bool allreduce = false;  // NO_SHARD's (else a reduce_scatter)
    int64_t bytes = 0, launchNs = 0, doneNs = 0, wireEndNs = 0;
  };
  std::vector<Reduction> reductions;
};

struct FsdpRankRecord {
  int32_t rank = 0;
  std::vector<FsdpStepRecord> steps;  // ascending
};

struct FsdpRecording {
  std::vector<std::string> units;  // names
  FsdpRuntime runtime;             // the options the steps ran with
  int64_t worldSize = 1;
  std::vector<FsdpRankRecord> ranks;  // ascending
  // The job's calibration, if it ran one: each kind's cost from its ladder (cost_model.h).
  std::vector<CostSample> calibration;
  HostCores host;  // the hosts' cores, if recorded
};

struct FsdpFit {
  FsdpModel model;  // units reordered: the root (the first to open) is [0]
  LinkFit gather, reduceScatter, allreduce, all;
  bool calibrated = false;  // a kind's cost is its calibration ladder's
  int64_t recordedStepNs = 0;
  uint64_t steps = 0;  // steps the medians are over (the fewest of any rank)
};

// Throws std::runtime_error saying what is missing: no units, a rank without a complete step
// of the common hook order.
FsdpFit fitFsdpModel(const FsdpRecording& recording);

}  // namespace ringx::replay
