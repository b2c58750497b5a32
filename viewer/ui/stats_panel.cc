// The statistics panel (see stats_panel.h).
#include "viewer/ui/stats_panel.h"

#include <imgui.h>

#include <limits>

#include "viewer/ui/style.h"

namespace ringx::viewer {

void StatsPanel::draw(const TraceStore& store, ViewState& view) {
  const Selection& sel = view.selection;
  if (generation_ != store.generation() || nameId_ != sel.nameId || hasRange_ != sel.hasRange ||
      rangeBegin_ != sel.rangeBegin || rangeEnd_ != sel.rangeEnd) {
    generation_ = store.generation();
    nameId_ = sel.nameId;
    hasRange_ = sel.hasRange;
    rangeBegin_ = sel.rangeBegin;
    rangeEnd_ = sel.rangeEnd;
    const int64_t t0 = sel.hasRange ? sel.rangeBegin : std::numeric_limits<int64_t>::min();
    const int64_t t1 = sel.hasRange ? sel.rangeEnd : std::numeric_limits<int64_t>::max();
    rows_.clear();
    if (sel.nameId != 0) {
      analysis::EventStats s = analysis::statsForName(store, sel.nameId, t0, t1);
      if (s.count) rows_.push_back(std::move(s));
    } else if (sel.hasRange) {
      rows_ = analysis::statsForRange(store, t0, t1);
    }
  }
  if (sel.nameId == 0 && !sel.hasRange) {
    ImGui::TextWrapped(
        "Click an event on the timeline to see every event of its kind, or drag on the time "
        "ruler to select a range.");
    return;
  }
  if (sel.hasRange)
    ImGui::Text("range %s .. %s (%s)", formatNs(sel.rangeBegin - store.beginNs()).c_str(),
                formatNs(sel.rangeEnd - store.beginNs()).c_str(),
                formatNs(sel.rangeEnd - sel.rangeBegin).c_str());
  if (rows_.empty()) {
    ImGui::TextUnformatted("nothing selected in this range");
    return;
  }
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders |
                                ImGuiTableFlags_ScrollY | ImGuiTableFlags_Resizable;
  if (!ImGui::BeginTable("##stats", 10, flags)) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  for (const char* h :
       {"event", "rank", "count", "total", "mean", "p50", "p99", "max", "bytes", "busbw"})
    ImGui::TableSetupColumn(h);
  ImGui::TableHeadersRow();
  auto row = [](const std::string& name, const std::string& rank, uint64_t count, int64_t total,
                int64_t mean, int64_t p50, int64_t p99, int64_t max, int64_t bytes, double busbw) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(name.c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(rank.c_str());
    ImGui::TableNextColumn();
    ImGui::Text("%llu", static_cast<unsigned long long>(count));
    for (int64_t v : {total, mean, p50, p99, max}) {
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(v >= 0 ? formatNs(v).c_str() : "");
    }
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(bytes > 0 ? formatBytes(double(bytes)).c_str() : "");
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(busbw > 0 ? formatBandwidth(busbw).c_str() : "");
  };
  for (const analysis::EventStats& s : rows_) {
    row(s.name, "all", s.count, s.totalNs, s.meanNs, s.p50Ns, s.p99Ns, s.maxNs, s.bytes,
        s.busbwGBps);
    if (rows_.size() == 1 || sel.nameId != 0)
      for (const analysis::RankEventStats& r : s.perRank)
        row("", std::to_string(r.rank), r.count, r.totalNs, r.meanNs, -1, -1, -1, 0, r.busbwGBps);
  }
  ImGui::EndTable();
}

}  // namespace ringx::viewer
