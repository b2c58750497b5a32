// The diff view (ringx-viewer --diff A B): two runs of one program, each on its
// own timeline (A above B; each keeps its own time axis, since two runs never
// share a clock), and below them what analysis::diffRuns ranks: the step-time
// breakdown side by side, then every compared figure (a collective by
// (group, seq), a step, a DDP bucket, an FSDP unit), the regression furthest above its
// noise first (analysis/diff.h).
//
// A click on a row (or --diff-row K) shows both runs there: each timeline puts
// the row's place in its run (DiffRow::aTimeNs / bTimeNs) in the middle third
// of the view, at one scale wide enough for the slower of the two, and marks
// the item's extent in that run as the selected range. So the same collective
// sits at the same x in both timelines and its two lengths compare by eye.
// With "same scale" on (the default), zooming one timeline zooms the other to
// the same nanoseconds per pixel around its own centre.
#pragma once

#include <string>
#include <vector>

#include "analysis/diff.h"
#include "trace/model/trace_store.h"
#include "viewer/ui/timeline_panel.h"
#include "viewer/ui/view_state.h"

namespace ringx::viewer {
// The viewer draws the trace model (trace/model/); its names are used unqualified here.
using namespace ringx::model;

class DiffView {
 public:
  // The runs' names (their paths, as the header shows them) and their diff.
  void setDiff(analysis::RunDiff diff, std::string aName, std::string bName);

  // Draws one frame covering the whole display.
  void frame(const TraceStore& a, const TraceStore& b, ViewState& viewA, ViewState& viewB);

  // Selects row `index` of diff().rows (the ranked rows) and shows both runs
  // there; an out-of-range index selects nothing.
  void select(size_t index, ViewState& viewA, ViewState& viewB);
  // What a click on a row does: shows both runs at `row`.
  static void show(const analysis::DiffRow& row, ViewState& viewA, ViewState& viewB);

  const analysis::RunDiff& diff() const { return diff_; }
  int selectedRow() const { return selected_; }  // index in diff().rows; -1: none
  const TimelinePanel& timelineA() const { return timelineA_; }
  const TimelinePanel& timelineB() const { return timelineB_; }
  bool sameScale() const { return sameScale_; }
  void setSameScale(bool on) { sameScale_ = on; }
  // Where ranked row i was drawn in the last frame (screen y of its middle), or
  // a negative number when it was scrolled out or not drawn.
  float rowY(size_t i) const { return i < rowY_.size() ? rowY_[i] : -1.0f; }
  float rowX() const { return rowX_; }

  // Rows of the ranked table with a regression (B - A > 0) are drawn in this
  // colour, improvements in kImprovementColor.
  static constexpr ImU32 kRegressionColor = IM_COL32(255, 120, 100, 255);
  static constexpr ImU32 kImprovementColor = IM_COL32(130, 220, 130, 255);

 private:
  void header(const TraceStore& a, const TraceStore& b);
  void timeline(const char* id, const char* label, const std::string& name, TimelinePanel& panel,
                const TraceStore& store, ViewState& view, float height);
  void breakdown(ViewState& viewA, ViewState& viewB);
  void rankedRows(ViewState& viewA, ViewState& viewB);
  void keepScales(ViewState& viewA, ViewState& viewB, const TimeView& beforeA,
                  const TimeView& beforeB);

  analysis::RunDiff diff_;
  std::string aName_, bName_;
  TimelinePanel timelineA_, timelineB_;
  int selected_ = -1;
  bool sameScale_ = true;
  std::vector<float> rowY_;
  float rowX_ = 0;
  float timelineShare_ = 0.62f;  // of the window's height, for both timelines together
};

}  // namespace ringx::viewer
