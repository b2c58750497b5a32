// What-if questions about a recorded DDP job: the replay model of its step (replay/ddp_replay.h)
// built from the trace, replayed unchanged (its error against the recorded step says how far to
// trust it) and with one thing changed per row. `ringx-trace whatif` and ringx.analysis.whatif()
// (through the CLI's --json) print this report.
//
// From the trace: each rank's forward/backward/optimizer spans (the backward's compute_end_ns),
// the "grad" instants of sampled steps, the buckets' wire and copy-back times, all from the
// steps after the last "bucket_plan" instant (the rebuild), and that plan's limits,
// gradient_as_bucket_view and world size. What the model takes from them, and how, is
// replay/ddp_fit.h's: the engine's bucket_cap_mb="auto" fits the same way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/replay/ddp_fit.h"
#include "analysis/replay/fsdp_fit.h"
#include "trace/model/trace_store.h"

namespace ringx::analysis {

// The DDP model of a trace, and what it was built from. Throws std::runtime_error saying what
// is missing when the trace cannot give one (no ringx.ddp iterations, no gradient readiness:
// a trace recorded before schema 5).
struct DdpModelSource : replay::DdpFit {
  int64_t planStep = 0;  // the first step under the recorded plan
  // Non-empty: torch DDP recovered from torch.profiler traces (profiler_ddp.h), the wire timed
  // by this backend's scopes ("gloo", "ringx"), the plan's limits inferred from its buckets.
  std::string profiledWire;
  // torch's DDP ran (watched by ringx, or recovered from profiler traces): a cap asked of it
  // makes its first bucket that size too (whatif_text.h's askPlanQuestions).
  bool torchDdp = false;
};
// hostCores: the hosts' cores where the trace does not record them (profiler traces).
DdpModelSource ddpModelOf(const model::TraceStore& store, double hostCores = 0);

// The calibration a job recorded (ringx.trace.calibrate: "calibration" instants with op,
// bytes, ns and group_size), the lowest rank's that has one; empty when none ran.
std::vector<replay::CostSample> calibrationOf(const model::TraceStore& store);
// The hosts' cores, from the "host" instant each rank records as it starts tracing (cores it
// may run on, torch's compute threads), and how many hosts the ranks are on; cores 0 when no
// rank recorded one.
replay::HostCores hostCoresOf(const model::TraceStore& store);

// What to ask. Empty lists ask the default set: bucket caps from a quarter of the recorded one
// to four times it plus torch's 25 MB, gradient_as_bucket_view flipped, and the two bounds.
struct WhatIfQuestions {
  std::vector<double> bucketCapMb;
  std::vector<double> firstBucketMb;
  std::optional<bool> gradientAsBucketView;
  std::vector<int64_t> worldSizes;
  std::vector<replay::LinkCost> links;
  bool bounds = true;  // communication and compute infinitely fast
  // The hosts' cores, for profiler traces, which do not record them (a ringx trace does): how
  // the ranks on one host share them (cost_model.h's HostCores); 0: unknown.
  double hostCores = 0;
  // FSDP (PyTorch's names): sharding strategies, backward prefetch modes, forward prefetch and
  // the rate limiter on or off, and unit boundaries (every k consecutive units merged).
  std::vector<std::string> shardingStrategies;
  std::vector<std::string> backwardPrefetch;
  std::optional<bool> forwardPrefetch;
  std::optional<bool> limitAllGathers;
  std::vector<int64_t> mergeUnits;
  bool defaults() const {
    return bucketCapMb.empty() && firstBucketMb.empty() && !gradientAsBucketView &&
           worldSizes.empty() && links.empty() && shardingStrategies.empty() &&
           backwardPrefetch.empty() && !forwardPrefetch && !limitAllGathers && mergeUnits.empty();
  }
};

struct WhatIfRow {
  replay::DdpWhatIf change;
  replay::DdpReplay replay;
  // The prediction: the recorded step times the replay's ratio of this change to the unchanged
  // model, so that the model's error on the recorded step cancels (it is reported beside).
  int64_t predictedStepNs = 0;
  double changeShare = 0;  // predicted / recorded - 1
  // The spread of the replayed steps (their 25th to 75th percentiles), scaled as the
  // prediction; inside the noise: the prediction falls within the unchanged replay's spread.
  int64_t predictedLowNs = 0, predictedHighNs = 0;
  bool withinNoise = false;
  std::string error;  // set when the model cannot answer this one
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

// ---- FSDP ------------------------------------------------------------------------------
// The same questions of a ringx.fsdp job (replay/fsdp_replay.h), from its units' spans (all
// gathers, compute, frees, reductions) and the "fsdp_config" instants, over the steps since
// the options last changed.

// Which engine a trace's job trained with: "ddp", "fsdp", or "" for neither; "profiler" for a
// GPU job's profiler trace (profiler_program.h's holdsProfilerTrace): its program is replayed,
// whatever the engine (profiler_whatif.h).
std::string whatIfEngine(const model::TraceStore& store);

struct FsdpModelSource : replay::FsdpFit {
  int64_t firstStep = 0;  // the first step the model is fitted from
  // Non-empty: torch FSDP2 recovered from torch.profiler traces (profiler_fsdp.h), the wire
  // timed by this backend's scopes.
  std::string profiledWire;
  // torch's DDP ran (watched by ringx, or recovered from profiler traces): a cap asked of it
  // makes its first bucket that size too (whatif_text.h's askPlanQuestions).
  bool torchDdp = false;
};
// Throws std::runtime_error saying what is missing (no ringx.fsdp iterations, no fsdp_config:
// a trace recorded before schema 6). hostCores as ddpModelOf's.
FsdpModelSource fsdpModelOf(const model::TraceStore& store, double hostCores = 0);

struct FsdpWhatIfRow {
  replay::FsdpWhatIf change;
  replay::FsdpReplay replay;
  int64_t predictedStepNs = 0;  // as WhatIfRow's
  double changeShare = 0;
  int64_t predictedLowNs = 0, predictedHighNs = 0;
  bool withinNoise = false;
  std::string error;
};

struct FsdpWhatIfReport {
  FsdpModelSource source;
  replay::FsdpReplay baseline;
  double baselineErrorShare = 0;
  std::vector<FsdpWhatIfRow> rows;
  int64_t bestRow = -1;  // the fastest change of the schedule (not the bounds, world or wire)
};

// Empty questions ask the default set: every other sharding strategy, the other backward
// prefetch modes, forward prefetch and the limiter flipped, units merged in twos, the bounds.
FsdpWhatIfReport fsdpWhatIf(const model::TraceStore& store, const WhatIfQuestions& questions = {});
std::string formatFsdpWhatIf(const FsdpWhatIfReport& report, const std::string& source);
// As whatIfJson, with "engine":"fsdp", "units" and per row "units" and "gathers".
std::string fsdpWhatIfJson(const FsdpWhatIfReport& report);

}  // namespace ringx::analysis
