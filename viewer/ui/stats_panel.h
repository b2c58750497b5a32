// Statistics of what is selected: every span with the clicked event's name (count, total, mean,
// p50/p99, bytes, bus bandwidth, and the same per rank); else of the area (the tracks picked
// with Shift, over the range dragged, analysis/area_stats.h), or of the whole trace when nothing
// is selected, grouped by name, track, rank, group, bucket/unit, op or size class. The table
// sorts on any column and copies as CSV or TSV. A selected name's durations show as a log-scale
// histogram (Tracy's find-zone): a click on a bin outlines its events on the timeline and lists
// them, longest first, each a click away.
#pragma once

#include <string>
#include <vector>

#include "analysis/area_stats.h"
#include "analysis/trace_analyses.h"
#include "viewer/ui/view_state.h"

namespace ringx::viewer {

class StatsPanel {
 public:
  void draw(const TraceStore& store, ViewState& view);
  // What the last frame showed (tests): a name's rows, or the area's.
  const std::vector<analysis::EventStats>& rows() const { return rows_; }
  const std::vector<analysis::AreaRow>& areaRows() const { return areaRows_; }
  analysis::AreaGroupBy groupBy() const { return groupBy_; }
  // How long the rows shown took to compute (ms; --print-stats), 0 before any.
  double computeMs() const { return computeMs_; }
  void setGroupBy(analysis::AreaGroupBy by) { groupBy_ = by; }
  // The area's table as the copy buttons put it on the clipboard.
  std::string areaText(Delimiter delimiter) const;
  // With an event's name selected: its durations on a log scale (area_stats.h), and the bin
  // chosen (-1: none), whose events the timeline outlines and the panel lists, longest first.
  const analysis::DurationHistogram& histogram() const { return histogram_; }
  int chosenBin() const { return chosenBin_; }
  void chooseBin(const TraceStore& store, ViewState& view, int bin);
  const std::vector<analysis::SpanRef>& binEvents() const { return binEvents_; }
  // Events of a bin outlined and listed at most.
  static constexpr size_t kBinEventsShown = 2000;
  // Above this many events the whole trace's statistics wait for a click (they take seconds);
  // an area's or a range's are computed at once.
  static constexpr uint64_t kWholeTraceEvents = 2'000'000;

 private:
  void drawArea(const TraceStore& store, const ViewState& view);
  void drawHistogram(const TraceStore& store, ViewState& view);
  analysis::Area selectedArea(const ViewState& view) const;
  // The whole trace, too big to count at once, and not asked for yet (kWholeTraceEvents).
  bool waitsForClick(const TraceStore& store, const Selection& sel) const;

  std::vector<analysis::EventStats> rows_;
  std::vector<analysis::AreaRow> areaRows_;
  analysis::AreaGroupBy groupBy_ = analysis::AreaGroupBy::kName;
  // The rows are recomputed only when the selection, the grouping or the store changes.
  uint64_t generation_ = ~0ull;
  uint32_t nameId_ = 0;
  bool hasRange_ = false;
  int64_t rangeBegin_ = 0, rangeEnd_ = 0;
  std::vector<std::pair<int32_t, uint32_t>> areaTracks_;
  analysis::AreaGroupBy computedBy_ = analysis::AreaGroupBy::kName;
  bool computed_ = false;
  double computeMs_ = 0;
  bool wholeTraceAsked_ = false;
  analysis::DurationHistogram histogram_;
  int chosenBin_ = -1;
  std::vector<analysis::SpanRef> binEvents_;
};

}  // namespace ringx::viewer
