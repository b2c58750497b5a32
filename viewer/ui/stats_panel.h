// Statistics of what is selected: every span with the clicked event's name (or,
// with a range dragged on the ruler, every span name inside the range) — count,
// total, mean, p50/p99, bytes, bus bandwidth, and the same per rank.
#pragma once

#include <vector>

#include "analysis/trace_analyses.h"
#include "viewer/ui/view_state.h"

namespace ringx::viewer {

class StatsPanel {
 public:
  void draw(const TraceStore& store, ViewState& view);
  // What the last frame showed (tests).
  const std::vector<analysis::EventStats>& rows() const { return rows_; }

 private:
  std::vector<analysis::EventStats> rows_;
  // The rows are recomputed only when the selection or the store changes.
  uint64_t generation_ = ~0ull;
  uint32_t nameId_ = 0;
  bool hasRange_ = false;
  int64_t rangeBegin_ = 0, rangeEnd_ = 0;
};

}  // namespace ringx::viewer
