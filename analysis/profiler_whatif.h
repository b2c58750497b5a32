// What-if questions about a job known only by its torch.profiler traces (profiler_program.h):
// the program replayed unchanged (its error against the recorded step says how far to trust
// it) and with one thing changed per row: the collectives on another wire (--link: each
// collective's time scaled by the alpha-beta model's ratio of the new wire to the one fitted
// from the trace's own collectives), another world size (the same model's ratio for the
// collective's algorithm on that many ranks), and the bounds (communication free, the device's
// compute free); for a torch DDP job whose buckets the trace gives (profiler_ddp.h), its bucket
// caps and first bucket, re-planned in the program (profiler_ddp_plan.h). `ringx-trace whatif`
// on profiler files prints this report.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/profiler_ddp.h"
#include "analysis/profiler_program.h"
#include "analysis/replay/cost_model.h"
#include "analysis/whatif.h"
#include "trace/model/trace_store.h"

namespace ringx::analysis {

struct ProfilerChange {
  std::string label;
  std::optional<int64_t> worldSize;
  std::optional<replay::LinkCost> link;
  bool commFree = false;
  bool computeFree = false;  // the device's kernels, copies and fills take no time
  // torch DDP's plan, where the trace gives its buckets (profiler_ddp_plan.h).
  std::optional<int64_t> bucketCapBytes, firstBucketBytes;
  std::optional<bool> gradientAsBucketView;  // not answered from a profiler program
};

struct ProfilerReplay : replay::ProgramRun {
  int64_t referenceNs = 0;  // 0: the baseline is the reference
  size_t buckets = 0;       // a DDP plan's buckets; 0: not a plan change
};

struct ProfilerWhatIfRow {
  ProfilerChange change;
  ProfilerReplay replay;
  int64_t predictedStepNs = 0;  // as WhatIfRow's
  double changeShare = 0;
  int64_t predictedLowNs = 0, predictedHighNs = 0;
  bool withinNoise = false;
  std::string error;
};

struct ProfilerWhatIfReport {
  ProfilerProgram source;
  // torch DDP recovered from the trace (profiler_ddp.h), whose bucket questions the rows
  // answer; and its recorded plan rewritten with the fitted wire (the plans' reference).
  std::optional<ProfiledDdp> ddp;
  int64_t ddpReferenceNs = 0;
  ProfilerReplay baseline;
  double baselineErrorShare = 0;  // baseline / recorded - 1
  replay::LinkFit wire;           // fitted from the collectives with known bytes
  // How far the unchanged replay starts the collectives from where they started (the last
  // member's kernel): the median and 90th percentile of |replayed - recorded| over them. It
  // checks the waits inferred between streams, which the step time alone cannot where the
  // host sets the step.
  int64_t startErrorMedianNs = 0, startErrorP90Ns = 0;
  std::vector<ProfilerWhatIfRow> rows;
};

// Throws std::runtime_error for a trace that gives no program (profilerProgramOf's) and
// std::invalid_argument for questions the trace cannot answer (bucket caps where torch DDP's
// buckets are not recovered, FSDP's).
ProfilerWhatIfReport profilerWhatIf(const model::TraceStore& store,
                                    const WhatIfQuestions& questions = {});
// The same of a program already built (profilerProgramOf), with the job's DDP if recovered.
ProfilerWhatIfReport profilerWhatIf(ProfilerProgram program, const WhatIfQuestions& questions,
                                    std::optional<ProfiledDdp> ddp = std::nullopt);
// torch DDP recovered from a GPU job's profiler trace, whose buckets the rows re-plan; none
// where it did not run, or ran but is not recovered (the reason then in `program`'s notes).
std::optional<ProfiledDdp> profiledGpuDdp(const model::TraceStore& store, ProfilerProgram* program);
// The program run with one change (the report's rows; tests and advise ask their own).
ProfilerReplay replayProfiler(const ProfilerProgram& program, const replay::LinkFit& wire,
                              const ProfilerChange& change);
// The wire the trace's collectives fit (fitLinkCost over those with known bytes).
replay::LinkFit profilerWire(const ProfilerProgram& program);

std::string formatProfilerWhatIf(const ProfilerWhatIfReport& report, const std::string& source);
// {"engine": "profiler", "ranks", "steps", "recorded_step_ns", "replayed_step_ns",
// "baseline_error", "kernels", "collectives", "stream_waits", "host_syncs", "wire": {...},
// "baseline": {...}, "rows": [...]} (the rows as whatIfJson's).
std::string profilerWhatIfJson(const ProfilerWhatIfReport& report);

}  // namespace ringx::analysis
