// What-if questions about a recorded DDP job: the replay model of its step (replay/ddp_replay.h)
// built from the trace, replayed unchanged (its error against the recorded step says how far to
// trust it) and with one thing changed per row. `ringx-trace whatif`, ringx.analysis.whatif()
// (through the CLI's --json) and the viewer's "What if" panel all print this report.
//
// From the trace:
//   - per rank, the medians over the steps after the last bucket plan (the rebuild) of forward,
//     forward end to backward begin, backward's compute (the backward span's compute_end_ns),
//     and the optimizer span (finalize end to the next forward);
//   - per parameter, its gradient's ready offset from backward begin (the "grad" instants of
//     sampled steps; median), bytes and bucketing group;
//   - the bucket plan ("bucket_plan" instant): limits, gradient_as_bucket_view, world size;
//   - the wire: each bucket's allreduce time as its last-arriving rank saw it (the others'
//     include waiting for it), median over steps, fitted to the ring cost model;
//   - one gradient pass per byte: the buckets' copy-back time over their bytes.
// The recorded step is the median, over steps, of forward begin to the next forward begin
// (slowest rank).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/replay/ddp_replay.h"
#include "trace/model/trace_store.h"

namespace ringx::analysis {

// The DDP model of a trace, and what it was built from. Throws std::runtime_error saying what
// is missing when the trace cannot give one (no ringx.ddp iterations, no gradient readiness:
// a trace recorded before schema 5).
struct DdpModelSource {
  replay::DdpModel model;
  replay::LinkFit wire;
  int64_t recordedStepNs = 0;
  uint64_t steps = 0;      // steps the medians are over (per rank, the fewest)
  uint64_t gradSteps = 0;  // of those, steps with gradient readiness
  int64_t planStep = 0;    // the first step under the recorded plan
};
DdpModelSource ddpModelOf(const model::TraceStore& store);

// What to ask. Empty lists ask the default set: bucket caps from a quarter of the recorded one
// to four times it plus torch's 25 MB, gradient_as_bucket_view flipped, and the two bounds.
struct WhatIfQuestions {
  std::vector<double> bucketCapMb;
  std::vector<double> firstBucketMb;
  std::optional<bool> gradientAsBucketView;
  std::vector<int64_t> worldSizes;
  std::vector<replay::LinkCost> links;
  bool bounds = true;  // communication and compute infinitely fast
  bool defaults() const {
    return bucketCapMb.empty() && firstBucketMb.empty() && !gradientAsBucketView &&
           worldSizes.empty() && links.empty();
  }
};

struct WhatIfRow {
  replay::DdpWhatIf change;
  replay::DdpReplay replay;
  // The prediction: the recorded step times the replay's ratio of this change to the unchanged
  // model, so that the model's error on the recorded step cancels (it is reported beside).
  int64_t predictedStepNs = 0;
  double changeShare = 0;  // predicted / recorded - 1
  std::string error;       // set when the model cannot answer this one
};

struct WhatIfReport {
  DdpModelSource source;
  replay::DdpReplay baseline;     // the recorded plan, replayed
  double baselineErrorShare = 0;  // baseline / recorded - 1
  std::vector<WhatIfRow> rows;
  // The row with the shortest predicted step among the plan changes (bucket caps, first bucket,
  // the view), -1 when none is faster than the recorded plan.
  int64_t bestPlanRow = -1;
};

WhatIfReport whatIf(const model::TraceStore& store, const WhatIfQuestions& questions = {});

// The report as a table for a terminal: the model's inputs, its error on the recorded step, one
// row per change (predicted step, change, exposed communication, buckets), the best plan.
std::string formatWhatIf(const WhatIfReport& report, const std::string& source);
// The same as JSON (ringx.analysis.whatif() reads it): {"recorded_step_ns", "replayed_step_ns",
// "baseline_error", "wire": {...}, "rows": [{"change", "predicted_step_ns", "change_share",
// "exposed_comm_ns", "buckets", "error", "critical_path": [...]}], "best_plan": label or null}.
std::string whatIfJson(const WhatIfReport& report);

}  // namespace ringx::analysis
