// What if (analysis/whatif.h): the replay model of the recorded step, and what it predicts
// with one thing changed per row.
//
// - The recorded step's critical path (the chain of compute and exposed communication that
//   sets the step time, as the model replays it) drawn over the ranks' rows of the timeline,
//   at a chosen recorded step; a checkbox turns it off.
// - The table: per change its predicted step, the change against the recorded step, the
//   replayed steps' spread (a change inside the recorded one is marked as noise), the
//   exposed communication and the buckets; first the recorded plan replayed, whose change is
//   the model's own error on the recorded step. The fastest plan is marked.
// - Above the table, the advisor's findings (analysis/advise.h), each with its evidence and the
//   change to make.
// - A click on a row draws that alternative's predicted step under the recorded plan's, on
//   one time axis: per rank its stretches of the critical path, and the ring's collectives.
//
// The report is read in one place, adaptWhatIf(): what the panel draws (WhatIfView) knows
// nothing of DDP, so that another engine's replay only adds to that function. The report is
// computed once per loaded trace, when the panel is first shown (a while on a big trace: not
// every frame); a live job's only when asked, since its store grows every frame.
#pragma once

#include <imgui.h>

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/advise.h"
#include "analysis/profiler_whatif.h"
#include "analysis/whatif.h"
#include "viewer/ui/view_state.h"

namespace ringx::viewer {

// One bar of a predicted step, in ns from the modelled step's start.
struct PredictedItem {
  static constexpr int32_t kRing = -1;  // the lane of the collectives on the ring
  int32_t lane = kRing;                 // a rank, or kRing
  std::string kind;                     // "forward", "allreduce", ... (pathKindName)
  ImU32 color = 0;
  int64_t index = -1;  // the bucket (or unit) of a collective or copy-back
  int64_t beginNs = 0, endNs = 0;
  bool onPath = false;  // a stretch of the critical path
};

// One row of the table and its predicted step.
struct WhatIfRowView {
  std::string label;
  int64_t predictedStepNs = 0;    // scaled to the recorded step (whatif.h)
  double changeShare = 0;         // predicted / recorded - 1; the baseline: the model's error
  int64_t lowNs = 0, highNs = 0;  // the replayed steps' spread (p25-p75), scaled as predicted
  bool withinNoise = false;       // predicted inside the recorded steps' spread
  int64_t exposedCommNs = 0;
  size_t collectives = 0;            // DDP: buckets; FSDP: all-gathers a step
  std::string error;                 // the model cannot answer this one
  bool best = false;                 // the fastest plan
  int64_t replayedStepNs = 0;        // the replay's own step: where its drawing ends
  std::vector<PredictedItem> path;   // the critical path, in time order
  std::vector<PredictedItem> items;  // everything the predicted timeline draws
};

struct WhatIfView {
  std::string error;  // why there is no report (a trace without ringx.ddp iterations, ...)
  std::string engine;
  int64_t recordedStepNs = 0;  // the median recorded step the model is checked against
  int64_t firstStep = 0;       // the first recorded step the model describes
  int32_t anchorRank = 0;      // whose step start the modelled times count from
  WhatIfRowView baseline;      // the recorded plan, replayed
  std::vector<WhatIfRowView> rows;
  // What the trace proves (analysis/advise.h): each finding's what, evidence and change.
  std::vector<analysis::Finding> findings;
  bool ok() const { return error.empty(); }
};

// The one reader of the report (DDP), and of FSDP's, and of a profiler trace's.
WhatIfView adaptWhatIf(const analysis::WhatIfReport& report);
WhatIfView adaptWhatIf(const analysis::FsdpWhatIfReport& report);
WhatIfView adaptWhatIf(const analysis::ProfilerWhatIfReport& report);
// whatIf() over the store, adapted; its message in `error` when it cannot answer.
WhatIfView whatIfViewOf(const TraceStore& store);
// The colour of a stretch of the critical path, by kind.
ImU32 pathKindColor(replay::PathSegment::Kind kind);

// A recorded step of the anchor rank: its forward begin to the next one's (a profiler trace's:
// its ProfilerStep#N begin to the next one's, the last to its end).
struct RecordedStep {
  int64_t step = 0;
  int64_t beginNs = 0, endNs = 0;
};
// The anchor rank's recorded steps from `firstStep` on that have a next one.
std::vector<RecordedStep> recordedStepsOf(const TraceStore& store, int32_t rank, int64_t firstStep);
// Of `steps`, the one whose length is closest to `medianNs` (the step the model describes
// best); -1 for none.
int pickStep(const std::vector<RecordedStep>& steps, int64_t medianNs);

// The critical path over the recorded timeline at `step`. Modelled times count from the
// anchor rank's step start, for every rank (the replay couples the ranks through the ring, on
// one clock), so each stretch goes to its rank's rows at step.beginNs + its modelled time. No
// stretch is scaled: the model's durations are medians, and stretching them to fit this step
// would hide where the model and the recording part (the table says by how much on the
// median step). Past the step's end the timeline shows the next step, about which the path
// says nothing: stretches are cut there, and `clippedNs` says how much was cut.
std::vector<RankBand> pathOnTimeline(const WhatIfRowView& baseline, const RecordedStep& step,
                                     int64_t* clippedNs = nullptr);

class WhatIfPanel {
 public:
  // Before the timeline draws, every frame: computes the report when it is needed (the panel
  // is shown, or its path is on the timeline, and the store is new) and puts the critical
  // path in view.bands. `live`: the store grows every frame; recompute only when asked.
  void prepare(const TraceStore& store, ViewState& view, bool live);
  void draw(const TraceStore& store, ViewState& view);

  const WhatIfView& report() const { return report_; }
  bool computed() const { return computed_; }
  int computations() const { return computations_; }
  // The row shown beside the recorded plan: index into report().rows, -1 none.
  int selected() const { return selected_; }
  void select(int row) { selected_ = row; }
  bool highlight() const { return highlight_; }
  void setHighlight(bool on) { highlight_ = on; }
  const std::vector<RecordedStep>& steps() const { return steps_; }
  int chosenStep() const { return chosenStep_; }  // index into steps()
  void chooseStep(int index);

  // Layout of the last frame, for tests: each table row's middle (-1 for the baseline row
  // first, then rows), and the predicted timeline's lanes.
  float rowY(int row) const;
  float rowX() const { return rowX_; }
  struct Lane {
    bool alternative = false;  // the chosen row's, else the recorded plan's
    int32_t lane = 0;          // a rank or PredictedItem::kRing
    float y0 = 0, y1 = 0;
  };
  const std::vector<Lane>& lanes() const { return lanes_; }
  float ganttX(int64_t ns) const;

 private:
  void compute(const TraceStore& store);
  void table();
  void predicted(const WhatIfRowView& row, bool alternative, int64_t t0, int64_t t1);

  WhatIfView report_;
  bool computed_ = false;
  const TraceStore* store_ = nullptr;  // what the report is of, at generation_
  uint64_t generation_ = 0;
  bool outdated_ = false;  // a live store grew since
  int computations_ = 0;
  int selected_ = -1;
  bool highlight_ = true;
  std::vector<RecordedStep> steps_;
  int chosenStep_ = -1;
  std::vector<RankBand> bands_;
  int64_t clippedNs_ = 0;
  std::vector<float> rowY_;
  float rowX_ = 0;
  std::vector<Lane> lanes_;
  float ganttX0_ = 0, ganttWidth_ = 1;
  int64_t ganttT0_ = 0, ganttT1_ = 1;
};

}  // namespace ringx::viewer
