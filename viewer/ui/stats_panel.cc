// The statistics panel (see stats_panel.h).
#include "viewer/ui/stats_panel.h"

#include <imgui.h>

#include <algorithm>
#include <chrono>
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
    const auto begin = std::chrono::steady_clock::now();
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
    histogram_ = {};
    chosenBin_ = -1;
    binEvents_.clear();
    view.highlighted.clear();
    if (sel.nameId != 0) {
      analysis::EventStats s = analysis::statsForName(store, sel.nameId, t0, t1);
      if (s.count) rows_.push_back(std::move(s));
      histogram_ = analysis::durationHistogram(store, selectedArea(view), sel.nameId);
    } else if (waitsForClick(store, sel)) {
      // Every span of a big trace takes seconds: on request (the button below), not at once.
      computed_ = true;
    } else {
      analysis::Area area;
      area.tracks = sel.areaTracks;
      area.t0 = t0;
      area.t1 = t1;
      areaRows_ = analysis::areaStats(store, area, groupBy_);
    }
    computeMs_ =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
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
  drawHistogram(store, view);
}

bool StatsPanel::waitsForClick(const TraceStore& store, const Selection& sel) const {
  return sel.areaTracks.empty() && !sel.hasRange && !wholeTraceAsked_ &&
         store.eventCount() > kWholeTraceEvents;
}

analysis::Area StatsPanel::selectedArea(const ViewState& view) const {
  analysis::Area area;
  area.tracks = view.selection.areaTracks;
  if (view.selection.hasRange) {
    area.t0 = view.selection.rangeBegin;
    area.t1 = view.selection.rangeEnd;
  }
  return area;
}

void StatsPanel::chooseBin(const TraceStore& store, ViewState& view, int bin) {
  chosenBin_ = bin >= 0 && bin < int(histogram_.bins.size()) && bin != chosenBin_ ? bin : -1;
  binEvents_.clear();
  view.highlighted.clear();
  if (chosenBin_ < 0) return;
  const analysis::DurationBin& b = histogram_.bins[size_t(chosenBin_)];
  binEvents_ = analysis::spansWithDuration(store, selectedArea(view), view.selection.nameId,
                                           b.lowNs, b.highNs, kBinEventsShown);
  for (const analysis::SpanRef& r : binEvents_)
    view.highlighted.push_back(
        EventRef{r.rank, int32_t(r.track), int32_t(r.level), int64_t(r.index)});
}

void StatsPanel::drawHistogram(const TraceStore& store, ViewState& view) {
  if (histogram_.bins.empty()) return;
  ImGui::Text("durations, log scale: %s to %s; click a bar for its events",
              formatNs(histogram_.minNs).c_str(), formatNs(histogram_.maxNs).c_str());
  uint64_t most = 1;
  for (const analysis::DurationBin& b : histogram_.bins) most = std::max(most, b.count);
  const float height = 90, width = std::max(ImGui::GetContentRegionAvail().x * 0.6f, 200.0f);
  const float barWidth = width / float(histogram_.bins.size());
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  ImDrawList* draw = ImGui::GetWindowDrawList();
  for (size_t i = 0; i < histogram_.bins.size(); ++i) {
    const analysis::DurationBin& b = histogram_.bins[i];
    const float x0 = origin.x + float(i) * barWidth;
    ImGui::SetCursorScreenPos(ImVec2(x0, origin.y));
    ImGui::PushID(int(i));
    if (ImGui::InvisibleButton("##bin", ImVec2(std::max(barWidth - 1, 1.0f), height))) {
      chooseBin(store, view, int(i));
    }
    if (ImGui::IsItemHovered()) {
      ImGui::SetTooltip("%s .. %s: %llu events", formatNs(b.lowNs).c_str(),
                        formatNs(b.highNs).c_str(), static_cast<unsigned long long>(b.count));
    }
    ImGui::PopID();
    const float h = b.count == 0 ? 0 : std::max(2.0f, height * float(b.count) / float(most));
    const ImU32 color =
        int(i) == chosenBin_ ? IM_COL32(255, 236, 64, 255) : IM_COL32(110, 170, 255, 255);
    draw->AddRectFilled(ImVec2(x0, origin.y + height - h),
                        ImVec2(x0 + std::max(barWidth - 1, 1.0f), origin.y + height), color);
  }
  ImGui::SetCursorScreenPos(ImVec2(origin.x, origin.y + height + 4));
  if (chosenBin_ < 0) return;
  const analysis::DurationBin& b = histogram_.bins[size_t(chosenBin_)];
  ImGui::Text("%llu events of %s .. %s, longest first%s (outlined on the timeline)",
              static_cast<unsigned long long>(b.count), formatNs(b.lowNs).c_str(),
              formatNs(b.highNs).c_str(),
              b.count > binEvents_.size() ? strCat(", the first ", binEvents_.size()).c_str() : "");
  if (!ImGui::BeginTable("##binEvents", 4,
                         ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_Borders,
                         ImVec2(0, 160))) {
    return;
  }
  for (const char* h : {"duration", "rank", "track", "at"}) ImGui::TableSetupColumn(h);
  ImGui::TableHeadersRow();
  ImGuiListClipper clipper;
  clipper.Begin(int(binEvents_.size()));
  while (clipper.Step()) {
    for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
      const analysis::SpanRef& r = binEvents_[size_t(i)];
      const RankData* rank = store.findRank(r.rank);
      if (rank == nullptr) continue;
      const Track& track = rank->tracks[r.track];
      const Span& s = track.levels[r.level][r.index];
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::PushID(i);
      if (ImGui::Selectable(formatNs(s.duration()).c_str(), false,
                            ImGuiSelectableFlags_SpanAllColumns)) {
        view.time.show(s.begin, s.end, 0.5);
        view.selection.event =
            EventRef{r.rank, int32_t(r.track), int32_t(r.level), int64_t(r.index)};
      }
      ImGui::PopID();
      ImGui::TableNextColumn();
      ImGui::Text("%d", r.rank);
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(std::string(store.str(track.name)).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(formatNs(s.begin - store.beginNs()).c_str());
    }
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
  if (waitsForClick(store, sel)) {
    if (ImGui::Button("Statistics of the whole trace")) {
      wholeTraceAsked_ = true;
      computed_ = false;  // computed next frame
    }
    ImGui::SameLine();
    ImGui::TextDisabled("(%llu events: a few seconds)",
                        static_cast<unsigned long long>(store.eventCount()));
    return;
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
