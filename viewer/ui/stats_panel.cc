// The statistics panel (see stats_panel.h).
#include "viewer/ui/stats_panel.h"

#include <imgui.h>

#include <algorithm>
#include <limits>
#include <set>
#include <sstream>

#include "base/error.h"
#include "base/format.h"
#include "viewer/ui/style.h"

namespace ringx::viewer {

std::string StatsPanel::areaText(Delimiter delimiter) const {
  std::ostringstream out;
  analysis::writeAreaTable(areaRows_, computedBy_, out, delimiter);
  return out.str();
}

void StatsPanel::draw(const TraceStore& store, ViewState& view) {
  const Selection& sel = view.selection;
  if (!computed_ || generation_ != store.generation() || nameId_ != sel.nameId ||
      hasRange_ != sel.hasRange || rangeBegin_ != sel.rangeBegin || rangeEnd_ != sel.rangeEnd ||
      areaTracks_ != sel.areaTracks || computedBy_ != groupBy_) {
    computed_ = true;
    generation_ = store.generation();
    nameId_ = sel.nameId;
    hasRange_ = sel.hasRange;
    rangeBegin_ = sel.rangeBegin;
    rangeEnd_ = sel.rangeEnd;
    areaTracks_ = sel.areaTracks;
    computedBy_ = groupBy_;
    const int64_t t0 = sel.hasRange ? sel.rangeBegin : std::numeric_limits<int64_t>::min();
    const int64_t t1 = sel.hasRange ? sel.rangeEnd : std::numeric_limits<int64_t>::max();
    rows_.clear();
    areaRows_.clear();
    if (sel.nameId != 0) {
      analysis::EventStats s = analysis::statsForName(store, sel.nameId, t0, t1);
      if (s.count) rows_.push_back(std::move(s));
    } else {
      analysis::Area area;
      area.tracks = sel.areaTracks;
      area.t0 = t0;
      area.t1 = t1;
      areaRows_ = analysis::areaStats(store, area, groupBy_);
    }
  }
  if (sel.nameId == 0) {
    drawArea(store, view);
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
    for (const analysis::RankEventStats& r : s.perRank)
      row("", std::to_string(r.rank), r.count, r.totalNs, r.meanNs, -1, -1, -1, 0, r.busbwGBps);
  }
  ImGui::EndTable();
}

void StatsPanel::drawArea(const TraceStore& store, const ViewState& view) {
  const Selection& sel = view.selection;
  // What the rows count: the area's tracks and ranks, the range, or everything.
  std::string what;
  if (!sel.areaTracks.empty()) {
    std::vector<int32_t> ranks;
    for (const auto& [rank, track] : sel.areaTracks)
      if (ranks.empty() || ranks.back() != rank) ranks.push_back(rank);
    what = strCat(sel.areaTracks.size(), sel.areaTracks.size() == 1 ? " track" : " tracks", " on ",
                  rankList(ranks));
  } else {
    what = "every track";
  }
  if (sel.hasRange) {
    what += strCat(", ", formatNs(sel.rangeBegin - store.beginNs()), " .. ",
                   formatNs(sel.rangeEnd - store.beginNs()), " (",
                   formatNs(sel.rangeEnd - sel.rangeBegin), ")");
  } else {
    what += ", the whole trace";
  }
  ImGui::TextUnformatted(what.c_str());
  ImGui::SameLine(0, 20);
  ImGui::SetNextItemWidth(130);
  if (ImGui::BeginCombo("group by", analysis::areaGroupByName(groupBy_))) {
    for (analysis::AreaGroupBy by : analysis::kAllAreaGroupings)
      if (ImGui::Selectable(analysis::areaGroupByName(by), by == groupBy_)) groupBy_ = by;
    ImGui::EndCombo();
  }
  ImGui::SameLine();
  if (ImGui::SmallButton("Copy CSV")) ImGui::SetClipboardText(areaText(Delimiter::kCsv).c_str());
  ImGui::SameLine();
  if (ImGui::SmallButton("Copy TSV")) ImGui::SetClipboardText(areaText(Delimiter::kTsv).c_str());
  if (sel.areaTracks.empty() && !sel.hasRange) {
    ImGui::SameLine(0, 20);
    ImGui::TextDisabled(
        "click an event for its kind; drag the ruler for a range; Shift+drag over rows for an "
        "area");
  }
  if (areaRows_.empty()) {
    ImGui::TextUnformatted("no event in this area");
    return;
  }
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders |
                                ImGuiTableFlags_ScrollY | ImGuiTableFlags_Resizable |
                                ImGuiTableFlags_Sortable;
  if (!ImGui::BeginTable("##area", 11, flags)) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  ImGui::TableSetupColumn(analysis::areaGroupByName(groupBy_));
  for (const char* h :
       {"count", "total", "self", "mean", "p50", "p99", "max", "bytes", "busbw", "failed"}) {
    ImGui::TableSetupColumn(
        h, h == std::string("total")
               ? ImGuiTableColumnFlags_DefaultSort | ImGuiTableColumnFlags_PreferSortDescending
               : ImGuiTableColumnFlags_None);
  }
  ImGui::TableHeadersRow();
  if (ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs(); specs && specs->SpecsDirty) {
    if (specs->SpecsCount > 0) {
      const ImGuiTableColumnSortSpecs& s = specs->Specs[0];
      const bool up = s.SortDirection == ImGuiSortDirection_Ascending;
      auto value = [&](const analysis::AreaRow& r) -> double {
        switch (s.ColumnIndex) {
          case 1:
            return double(r.count);
          case 2:
            return double(r.totalNs);
          case 3:
            return double(r.selfNs);
          case 4:
            return double(r.meanNs);
          case 5:
            return double(r.p50Ns);
          case 6:
            return double(r.p99Ns);
          case 7:
            return double(r.maxNs);
          case 8:
            return double(r.bytes);
          case 9:
            return r.busbwGBps;
          default:
            return double(r.failed);
        }
      };
      std::stable_sort(areaRows_.begin(), areaRows_.end(),
                       [&](const analysis::AreaRow& a, const analysis::AreaRow& b) {
                         if (s.ColumnIndex == 0) return up ? a.key < b.key : a.key > b.key;
                         return up ? value(a) < value(b) : value(a) > value(b);
                       });
    }
    specs->SpecsDirty = false;
  }
  ImGuiListClipper clipper;
  clipper.Begin(int(areaRows_.size()));
  while (clipper.Step()) {
    for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
      const analysis::AreaRow& r = areaRows_[size_t(i)];
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(r.key.c_str());
      ImGui::TableNextColumn();
      ImGui::Text("%llu", static_cast<unsigned long long>(r.count));
      for (int64_t v : {r.totalNs, r.selfNs, r.meanNs, r.p50Ns, r.p99Ns, r.maxNs}) {
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(formatNs(v).c_str());
      }
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(r.bytes > 0 ? formatBytes(double(r.bytes)).c_str() : "");
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(r.busbwGBps > 0 ? formatBandwidth(r.busbwGBps).c_str() : "");
      ImGui::TableNextColumn();
      if (r.failed > 0) ImGui::Text("%llu", static_cast<unsigned long long>(r.failed));
    }
  }
  ImGui::EndTable();
}

}  // namespace ringx::viewer
