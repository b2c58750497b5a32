// Two runs side by side: what `ringx-trace diff A B` prints and what the
// viewer's diff view ranks (a baseline A and a candidate B: "what got slower").
//
// The runs are aligned the way ringx identifies work, never by wall time:
//  - collectives by (group, seq), which every run of the same program numbers
//    alike; a (group, seq) whose op differs between the runs means the programs
//    diverged there, and is counted, not compared;
//  - iterations by step number (the engines' step argument);
//  - DDP buckets by index and FSDP units by module path.
// Each matched item gives one row per figure (a collective's duration, a
// bucket's wire or exposed time, a unit's gather wait, a step's time) with
// both values and B - A. Rows are ranked by B - A weighed against that
// figure's own spread within the runs (its noise): a change every iteration
// shows ranks above a one-off stall of the same size or larger, whose own
// run's spread it inflates. The noise of a row is the pooled standard deviation
// of its figure's samples in A and in B: a collective's, over the collectives
// of its op, size and group; a step's, over the steps; a DDP bucket figure's,
// over the bucket's iterations and ranks. FSDP units keep only means, so a
// unit's noise is taken as 5% of its larger value. Every noise is at least
// 1 us + 1% of the larger value, so a figure that never varied still needs a
// real change to rank high.
// Durations of a collective are the mean over the ranks that recorded it in
// that run; engine figures are the analyses' means (analysis/figures.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace/model/trace_store.h"

namespace ringx::analysis {

enum class DiffKind { kStep, kPhase, kCollective, kBucket, kUnit };
const char* diffKindName(DiffKind kind);  // "step", "phase", "collective", "bucket", "unit"

struct DiffRow {
  DiffKind kind = DiffKind::kCollective;
  std::string name;  // "allreduce seq 17 (group world)", "bucket 2 wire", "step 5"
  int64_t aNs = 0;
  int64_t bNs = 0;
  int64_t deltaNs = 0;  // bNs - aNs: positive is a regression
  int64_t noiseNs = 0;  // the figure's spread within the runs (see above)
  double score = 0;     // deltaNs / noiseNs: what the rows are ranked by
  // Where it happened in each run (aligned ns), for jumping both timelines
  // there. A row that averages over iterations points at an example: phases
  // and buckets at the last step both runs recorded (a bucket: its span on the
  // lowest rank in that step), a unit at its first run. -1 when there is none.
  int64_t aTimeNs = -1;
  int64_t bTimeNs = -1;
};

struct RunDiff {
  // The step-time breakdown side by side: forward, backward, optimizer and
  // exposed communication means of the engine that ran (DDP, else FSDP).
  std::string engine;  // "DDP", "FSDP", "" when neither recorded iterations
  uint64_t aIterations = 0;
  uint64_t bIterations = 0;
  std::vector<DiffRow> phases;
  // The last step both runs recorded, where averaged rows point; -1 if none.
  int64_t exampleStep = -1;
  int64_t exampleStepBeginA = -1;
  int64_t exampleStepBeginB = -1;
  uint64_t matchedCollectives = 0;
  uint64_t onlyInA = 0;  // collectives (group, seq) the other run lacks
  uint64_t onlyInB = 0;
  uint64_t opMismatches = 0;     // same (group, seq), different op: the runs diverged
  std::string firstMismatch;     // "seq 12 of group world: allreduce in A, broadcast in B"
  int64_t collectiveTotalA = 0;  // summed durations of the matched collectives
  int64_t collectiveTotalB = 0;
  std::vector<DiffRow> rows;  // every compared figure, highest score first
};

RunDiff diffRuns(const model::TraceStore& a, const model::TraceStore& b);

// B / A as "1.25x"; "-" when A is not positive.
std::string formatRatio(int64_t a, int64_t b);

// The diff as text: the step breakdown, the collective totals and the `top`
// largest regressions (and improvements), ending in a newline.
std::string formatDiff(const RunDiff& diff, const std::string& aName, const std::string& bName,
                       size_t top = 15);

}  // namespace ringx::analysis
