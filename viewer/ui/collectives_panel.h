// Collectives lined up across ranks by group and sequence number: arrival skew,
// the last and the slowest rank, bus bandwidth, in a sortable table; a click
// jumps the timeline to the collective. Collectives whose ranks disagree on the
// op, or that some rank never recorded, are highlighted, and the ranks that
// stopped arriving are listed first (hang diagnosis). Rows from flight recorder
// dumps also say which ranks were stuck in a collective or had it queued. On
// torch's own Flight Recorder dumps the list on top is the hang report's
// (analysis/hang_report.h, what `ringx-trace why` prints): NCCL's dumps keep
// only the entries not yet retired, so a rank's last seq there says little of
// how far it got, and the report goes by what each rank enqueued instead.
#pragma once

#include <string>
#include <vector>

#include "analysis/hang_report.h"
#include "analysis/trace_analyses.h"
#include "viewer/ui/view_state.h"

namespace ringx::viewer {

// One line of the list above the table: a hang suspect of the matched rows, or a line of the hang
// report of torch's dumps: per group that did not finish its title, its ranks by verdict and each
// culprit's own line (hang_report.h's formats), the culprits' groups first.
struct HangLine {
  std::string text;
  std::string group;  // the collective's group and seq, as the rows name them
  int64_t seq = -1;
  int64_t row = -1;      // its row, where some rank recorded it
  bool culprit = false;  // a rank the others wait on (its group's title too), or the suspect
};

// The report's lines (rows: matchCollectives' of the store the report's dumps were ingested into).
std::vector<HangLine> hangLinesOf(const trace::HangReport& report,
                                  const std::vector<analysis::CollectiveRow>& rows);

// What flight recorder dumps say of the ranks of `row` that had not finished it
// when they dumped ("stuck: rank 1  queued: rank 2"); "" for traced collectives.
std::string flightStatus(const TraceStore& store, const analysis::CollectiveRow& row);

class CollectivesPanel {
 public:
  enum class Column { kGroup, kSeq, kOp, kBytes, kRanks, kSkew, kLast, kSlowest, kBusbw, kStatus };
  void draw(const TraceStore& store, ViewState& view);
  const std::vector<analysis::CollectiveRow>& rows() const { return rows_; }
  const analysis::CollectiveOverview& overview() const { return overview_; }
  // What the list above the table shows (--print-stats prints it).
  const std::vector<HangLine>& hangLines() const { return hangLines_; }
  // Row indices in display order (after sorting).
  const std::vector<size_t>& order() const { return order_; }
  void sortBy(Column column, bool ascending);

 private:
  std::vector<analysis::CollectiveRow> rows_;
  analysis::CollectiveOverview overview_;
  std::vector<HangLine> hangLines_;
  std::vector<size_t> order_;
  uint64_t generation_ = ~0ull;
  bool onlyProblems_ = false;
};

}  // namespace ringx::viewer
