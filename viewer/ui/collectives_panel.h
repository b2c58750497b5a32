// Collectives lined up across ranks by group and sequence number: arrival skew,
// the last and the slowest rank, bus bandwidth, in a sortable table; a click
// jumps the timeline to the collective. Collectives whose ranks disagree on the
// op, or that some rank never recorded, are highlighted, and the ranks that
// stopped arriving are listed first (hang diagnosis). Rows from flight recorder
// dumps also say which ranks were stuck in a collective or had it queued.
#pragma once

#include <string>
#include <vector>

#include "analysis/trace_analyses.h"
#include "viewer/ui/view_state.h"

namespace ringx::viewer {

// What flight recorder dumps say of the ranks of `row` that had not finished it
// when they dumped ("stuck: rank 1  queued: rank 2"); "" for traced collectives.
std::string flightStatus(const TraceStore& store, const analysis::CollectiveRow& row);

class CollectivesPanel {
 public:
  enum class Column { kGroup, kSeq, kOp, kBytes, kRanks, kSkew, kLast, kSlowest, kBusbw, kStatus };
  void draw(const TraceStore& store, ViewState& view);
  const std::vector<analysis::CollectiveRow>& rows() const { return rows_; }
  const analysis::CollectiveOverview& overview() const { return overview_; }
  // Row indices in display order (after sorting).
  const std::vector<size_t>& order() const { return order_; }
  void sortBy(Column column, bool ascending);

 private:
  std::vector<analysis::CollectiveRow> rows_;
  analysis::CollectiveOverview overview_;
  std::vector<size_t> order_;
  uint64_t generation_ = ~0ull;
  bool onlyProblems_ = false;
};

}  // namespace ringx::viewer
