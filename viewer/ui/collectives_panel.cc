// The collectives panel (see collectives_panel.h). Rows come from
// analysis::matchCollectives() and are recomputed when the store changes; the table is
// clipped (ImGuiListClipper) so a hundred thousand rows draw as fast as twenty.
#include "viewer/ui/collectives_panel.h"

#include <imgui.h>

#include <algorithm>
#include <string>

#include "trace/model/flight_ingest.h"
#include "viewer/ui/style.h"

namespace ringx::viewer {
// The viewer draws the trace model (trace/model/); its names are used unqualified here.
using namespace ringx::model;
namespace {

bool problem(const analysis::CollectiveRow& r) {
  return r.mismatch || r.missingCount > 0 || r.failed;
}

std::string status(const analysis::CollectiveRow& r) {
  std::string s;
  if (r.mismatch) s += "op mismatch: " + r.opsSeen + "  ";
  if (r.missingCount > 0) {
    s += "missing";
    if (r.missingRanks.empty()) s += " " + std::to_string(r.missingCount) + " rank(s)";
    for (int32_t m : r.missingRanks) s += " " + std::to_string(m);
    s += "  ";
  }
  if (r.failed) s += "failed";
  return s;
}

// The overview's hang suspects as the list's lines.
std::vector<HangLine> suspectLines(const analysis::CollectiveOverview& overview) {
  std::vector<HangLine> out;
  for (const analysis::HangSuspect& h : overview.hangSuspects)
    out.push_back({h.description, h.group, h.missingSeq, h.row, true});
  return out;
}

}  // namespace

std::vector<HangLine> hangLinesOf(const trace::HangReport& report,
                                  const std::vector<analysis::CollectiveRow>& rows) {
  std::vector<HangLine> out;
  for (const trace::GroupHang& g : report.groups) {
    if (g.complete) continue;
    int64_t row = -1;
    for (size_t i = 0; i < rows.size() && row < 0; ++i)
      if (rows[i].group == g.name && rows[i].seq == g.seq) row = static_cast<int64_t>(i);
    bool culprits = false;
    for (const trace::HangRank& h : g.ranks) culprits |= trace::isHangCulprit(h.verdict);
    out.push_back({trace::formatGroupHangTitle(g), g.name, g.seq, row, culprits});
    for (const std::string& line : trace::formatGroupHangVerdicts(g))
      out.push_back({"  " + line, g.name, g.seq, row, false});
    for (const trace::HangRank& h : g.ranks)
      if (trace::isHangCulprit(h.verdict))
        out.push_back({"  " + trace::formatHangRank(h), g.name, g.seq, row, true});
  }
  return out;
}

std::string flightStatus(const TraceStore& store, const analysis::CollectiveRow& row) {
  const uint32_t key = store.strings().find(kFlightStateArg);
  if (key == 0) return "";  // no dump loaded
  std::vector<int32_t> stuck, queued;
  for (const analysis::CollectiveRank& r : row.ranks) {
    const RankData* rank = store.findRank(r.span.rank);
    if (!rank) continue;
    const Span& s = rank->tracks[r.span.track].levels[r.span.level][r.span.index];
    for (const ArgValue& v : ArgList(*rank, s)) {
      if (v.key != key || v.kind != ArgKind::kString) continue;
      if (store.str(v.stringId) == "started") stuck.push_back(r.rank);
      if (store.str(v.stringId) == "issued") queued.push_back(r.rank);
    }
  }
  std::string out;
  auto list = [&](const char* what, const std::vector<int32_t>& ranks) {
    if (ranks.empty()) return;
    out += out.empty() ? "" : "  ";
    out += what;
    out += ranks.size() == 1 ? ": rank" : ": ranks";
    for (int32_t r : ranks) {
      out += ' ';
      out += std::to_string(r);
    }
  };
  list("stuck", stuck);
  list("queued", queued);
  return out;
}

void CollectivesPanel::sortBy(Column column, bool ascending) {
  auto key = [&](const analysis::CollectiveRow& r) -> double {
    switch (column) {
      case Column::kGroup:
        return 0;
      case Column::kSeq:
        return double(r.seq);
      case Column::kOp:
        return 0;
      case Column::kBytes:
        return double(r.bytes);
      case Column::kRanks:
        return double(r.ranks.size());
      case Column::kSkew:
        return double(r.arrivalSkewNs);
      case Column::kLast:
        return double(r.lastArrivalRank);
      case Column::kSlowest:
        return double(r.slowestRank);
      case Column::kBusbw:
        return r.busbwGBps;
      case Column::kStatus:
        return problem(r) ? 1 : 0;
    }
    return 0;
  };
  std::stable_sort(order_.begin(), order_.end(), [&](size_t a, size_t b) {
    const analysis::CollectiveRow &x = rows_[a], &y = rows_[b];
    bool less;
    if (column == Column::kGroup)
      less = x.group < y.group || (x.group == y.group && x.seq < y.seq);
    else if (column == Column::kOp)
      less = x.op < y.op;
    else
      less = key(x) < key(y);
    bool greater;
    if (column == Column::kGroup)
      greater = y.group < x.group || (x.group == y.group && y.seq < x.seq);
    else if (column == Column::kOp)
      greater = y.op < x.op;
    else
      greater = key(y) < key(x);
    return ascending ? less : greater;
  });
}

void CollectivesPanel::draw(const TraceStore& store, ViewState& view) {
  if (generation_ != store.generation()) {
    generation_ = store.generation();
    rows_ = analysis::matchCollectives(store);
    overview_ = analysis::overviewOf(rows_);
    // torch's dumps: the report's rule, not the rows' last seqs (see collectives_panel.h).
    hangLines_ = store.torchFlight()
                     ? hangLinesOf(trace::analyzeTorchHang(*store.torchFlight()), rows_)
                     : suspectLines(overview_);
    order_.resize(rows_.size());
    for (size_t i = 0; i < order_.size(); ++i) order_[i] = i;
  }
  if (rows_.empty()) {
    ImGui::TextWrapped("No collectives with a group and sequence number in this trace.");
    return;
  }
  ImGui::Text("%llu collectives   %llu op mismatches   %llu incomplete   %llu failed   max skew %s",
              (unsigned long long)overview_.total, (unsigned long long)overview_.mismatched,
              (unsigned long long)overview_.incomplete, (unsigned long long)overview_.failed,
              formatNs(overview_.maxSkewNs).c_str());
  ImGui::SameLine();
  ImGui::Checkbox("only problems", &onlyProblems_);
  // At most a third of the panel, scrolled: a job of many groups (torch's dumps of a Megatron
  // job name a dozen) leaves the table room.
  const float listHeight =
      std::min(float(hangLines_.size()) * ImGui::GetTextLineHeightWithSpacing(),
               ImGui::GetContentRegionAvail().y / 3);
  if (!hangLines_.empty()) ImGui::BeginChild("##hang", ImVec2(0, listHeight));
  for (size_t i = 0; i < hangLines_.size(); ++i) {
    const HangLine& h = hangLines_[i];
    ImGui::PushStyleColor(ImGuiCol_Text, h.culprit ? IM_COL32(255, 110, 100, 255)
                                                   : ImGui::GetColorU32(ImGuiCol_Text));
    ImGui::PushID(static_cast<int>(i));
    if (ImGui::Selectable(h.text.c_str()) && h.row >= 0) {
      const int64_t at = rows_[size_t(h.row)].firstBeginNs;
      view.time.show(at, at + std::max<int64_t>(view.time.span() / 20, 1000));
    }
    ImGui::PopID();
    ImGui::PopStyleColor();
  }
  if (!hangLines_.empty()) ImGui::EndChild();
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders |
                                ImGuiTableFlags_ScrollY | ImGuiTableFlags_Sortable |
                                ImGuiTableFlags_Resizable;
  if (!ImGui::BeginTable("##collectives", 10, flags)) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  const char* headers[] = {"group",          "seq",     "op",    "bytes", "ranks", "arrival skew",
                           "last to arrive", "slowest", "busbw", "status"};
  for (int c = 0; c < 10; ++c)
    ImGui::TableSetupColumn(headers[c], c == 1 ? ImGuiTableColumnFlags_DefaultSort : 0, 0.0f,
                            ImGuiID(c));
  ImGui::TableHeadersRow();
  if (ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs()) {
    if (specs->SpecsDirty && specs->SpecsCount > 0) {
      sortBy(Column(specs->Specs[0].ColumnUserID),
             specs->Specs[0].SortDirection == ImGuiSortDirection_Ascending);
      specs->SpecsDirty = false;
    }
  }
  std::vector<size_t> shown;
  const std::vector<size_t>* visible = &order_;
  if (onlyProblems_) {
    for (size_t i : order_)
      if (problem(rows_[i])) shown.push_back(i);
    visible = &shown;
  }
  ImGuiListClipper clipper;
  clipper.Begin(int(visible->size()));
  while (clipper.Step()) {
    for (int k = clipper.DisplayStart; k < clipper.DisplayEnd; ++k) {
      const analysis::CollectiveRow& r = rows_[(*visible)[size_t(k)]];
      const std::string flight = flightStatus(store, r);
      ImGui::TableNextRow();
      if (problem(r) || !flight.empty())
        ImGui::TableSetBgColor(ImGuiTableBgTarget_RowBg0, IM_COL32(120, 30, 30, 160));
      ImGui::TableNextColumn();
      ImGui::PushID(k);
      if (ImGui::Selectable(r.group.c_str(), false, ImGuiSelectableFlags_SpanAllColumns)) {
        view.time.show(r.firstBeginNs, r.lastEndNs, 0.5);
        if (!r.ranks.empty()) {
          const analysis::SpanRef& s = r.ranks.front().span;
          view.selection.event =
              EventRef{s.rank, int32_t(s.track), int32_t(s.level), int64_t(s.index)};
          const RankData* rank = store.findRank(s.rank);
          if (rank) view.selection.nameId = rank->tracks[s.track].levels[s.level][s.index].name;
        }
      }
      ImGui::PopID();
      ImGui::TableNextColumn();
      ImGui::Text("%lld", (long long)r.seq);
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(r.op.c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(r.bytes >= 0 ? formatBytes(double(r.bytes)).c_str() : "");
      ImGui::TableNextColumn();
      if (r.groupSize > 0)
        ImGui::Text("%zu/%lld", r.ranks.size(), (long long)r.groupSize);
      else
        ImGui::Text("%zu", r.ranks.size());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(formatNs(r.arrivalSkewNs).c_str());
      ImGui::TableNextColumn();
      if (r.lastArrivalRank >= 0) ImGui::Text("rank %d", r.lastArrivalRank);
      ImGui::TableNextColumn();
      if (r.slowestRank >= 0) ImGui::Text("rank %d", r.slowestRank);
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(r.busbwGBps > 0 ? formatBandwidth(r.busbwGBps).c_str() : "");
      ImGui::TableNextColumn();
      ImGui::TextUnformatted((status(r) + flight).c_str());
    }
  }
  ImGui::EndTable();
}

}  // namespace ringx::viewer
