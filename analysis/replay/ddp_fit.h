// The DDP replay model (ddp_replay.h) fitted from recorded steps, whoever recorded them: the
// what-if analysis reads them from a trace (analysis/whatif.h), ringx.ddp's
// bucket_cap_mb="auto" from its own timings. One fit, so both predict the same way:
//
//   - per rank, the medians over its steps of forward, forward end to backward begin,
//     backward's compute, and the optimizer (finalize end to the next forward);
//   - per parameter, the median offset of its gradient's hook from backward begin, over the
//     steps that recorded gradient readiness;
//   - the build order: the lowest rank's gradients of its first such step (the engine's
//     rebuild uses the first iteration's order);
//   - the wire: per (bucket, step) the shortest time of any rank (the last arrival's: the
//     others include waiting for it), per bucket the median over steps, fitted to the ring's
//     cost (cost_model.h); the job's calibration's allreduce ladder instead where it ran one;
//   - one gradient pass per byte: the buckets' copy-back time over their bytes (unknown with
//     gradient_as_bucket_view, which copies nothing back);
//   - the recorded steps every rank has, one after the other (DdpModel::samples): each rank's
//     own durations of that step, its gradients' offsets where the step sampled them (else the
//     median offsets scaled to the step's backward), its collectives in flight during
//     backward, and each bucket's allreduce as it ran (the last rank's start, when it had
//     launched it and the previous one was done, to the last wire end);
//   - the cores as the recorded steps shared them (core_shares.h): each rank's compute and
//     the ring's allreduces over every step at once, each step's loss to sharing by offset
//     from its backward begin (DdpRankProfile::lossRates);
//   - contention (program.h), where the shares are not used: per rank and stretch of backward
//     between two launches, across steps, the extra compute per ns of overlap with the rank's
//     collectives in flight (from when the ring started each);
//   - the recorded step: step.h's RecordedSteps (the ranks' forward-to-forward periods).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "analysis/replay/ddp_replay.h"

namespace ringx::replay {

// One rank's step under the plan being modelled. Times are one clock's ns (0: not recorded).
struct DdpStepRecord {
  int64_t step = 0;
  int64_t forwardBeginNs = 0, forwardEndNs = 0, backwardBeginNs = 0, computeEndNs = 0,
          finalizeEndNs = 0;
  int64_t optimizerNs = -1;                       // after this step's backward; -1: not recorded
  std::vector<std::pair<size_t, int64_t>> grads;  // (parameter, hook time); empty: not sampled
  struct Bucket {
    int64_t index = 0;
    int64_t bytes = 0;
    int64_t wireNs = -1;      // -1: not recorded
    int64_t copyBackNs = -1;  // -1: not recorded
    int64_t launchNs = 0;     // issued; 0: not recorded
    int64_t wireEndNs = 0;    // the backend finished it; 0: not recorded
  };
  std::vector<Bucket> buckets;
};

struct DdpRankRecord {
  int32_t rank = 0;
  std::vector<DdpStepRecord> steps;  // ascending
};

struct DdpRecording {
  std::vector<ParamLayout> params;  // registration order
  BucketLimits limits;              // the plan the steps ran under
  bool gradientAsBucketView = false;
  int64_t worldSize = 1;
  std::vector<DdpRankRecord> ranks;  // ascending
  // The job's calibration, if it ran one (cost_model.h's calibratedLink): the wire's cost is
  // then its allreduce ladder's fit rather than the buckets'.
  std::vector<CostSample> calibration;
  HostCores host;  // the hosts' cores, if recorded
};

struct DdpFit {
  DdpModel model;
  LinkFit wire;
  bool calibrated = false;  // the wire is the calibration's
  int64_t recordedStepNs = 0;
  uint64_t steps = 0;      // complete steps the medians are over (the fewest of any rank)
  uint64_t gradSteps = 0;  // of those, steps with gradient readiness (the fewest of any rank)
};

// Throws std::runtime_error saying what is missing: no parameters, a rank without a complete
// step (forward, backward with its compute end), no step with gradient readiness.
DdpFit fitDdpModel(const DdpRecording& recording);

}  // namespace ringx::replay
