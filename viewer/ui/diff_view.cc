// The diff view (see diff_view.h).
#include "viewer/ui/diff_view.h"

#include <imgui.h>

#include <algorithm>

#include "analysis/figures.h"
#include "viewer/ui/style.h"

namespace ringx::viewer {
namespace {

// Shows [at, at + length] of one run in the middle third of a view `width` ns wide.
void showAt(int64_t at, int64_t length, int64_t width, ViewState& view) {
  if (at < 0) return;
  view.time.t0 = at - width;
  view.time.t1 = at + 2 * width;
  view.selection = Selection{};
  view.selection.hasRange = true;
  view.selection.rangeBegin = at;
  view.selection.rangeEnd = at + std::max<int64_t>(length, 1);
}

// A view of the same nanoseconds per pixel as `scale`, around `view`'s centre.
void matchScale(TimeView& view, const TimeView& scale) {
  const int64_t centre = view.t0 + view.span() / 2;
  view.t0 = centre - scale.span() / 2;
  view.t1 = view.t0 + scale.span();
}

}  // namespace

void DiffView::setDiff(analysis::RunDiff diff, std::string aName, std::string bName) {
  diff_ = std::move(diff);
  aName_ = std::move(aName);
  bName_ = std::move(bName);
  selected_ = -1;
}

void DiffView::show(const analysis::DiffRow& row, ViewState& viewA, ViewState& viewB) {
  // One width for both, so the two lengths compare on screen.
  const int64_t width = std::max<int64_t>({row.aNs, row.bNs, 1000});
  showAt(row.aTimeNs, row.aNs, width, viewA);
  showAt(row.bTimeNs, row.bNs, width, viewB);
}

void DiffView::select(size_t index, ViewState& viewA, ViewState& viewB) {
  if (index >= diff_.rows.size()) {
    selected_ = -1;
    return;
  }
  selected_ = int(index);
  show(diff_.rows[index], viewA, viewB);
}

void DiffView::frame(const TraceStore& a, const TraceStore& b, ViewState& viewA, ViewState& viewB) {
  const ImGuiIO& io = ImGui::GetIO();
  ImGui::SetNextWindowPos(ImVec2(0, 0));
  ImGui::SetNextWindowSize(io.DisplaySize);
  ImGui::PushStyleVar(ImGuiStyleVar_WindowRounding, 0);
  ImGui::Begin("ringx-viewer diff", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove |
                   ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_NoScrollWithMouse);
  ImGui::PopStyleVar();
  viewA.hasCursor = viewB.hasCursor = false;
  header(a, b);
  const TimeView beforeA = viewA.time, beforeB = viewB.time;
  const float height = ImGui::GetContentRegionAvail().y * timelineShare_ / 2;
  timeline("##timelineA", "A", aName_, timelineA_, a, viewA, height);
  timeline("##timelineB", "B", bName_, timelineB_, b, viewB, height);
  keepScales(viewA, viewB, beforeA, beforeB);
  breakdown(viewA, viewB);
  rankedRows(viewA, viewB);
  ImGui::End();
}

void DiffView::header(const TraceStore& a, const TraceStore& b) {
  ImGui::Text("Two runs: A = %s (%zu ranks, %llu events), B = %s (%zu ranks, %llu events)",
              aName_.c_str(), a.ranks().size(), (unsigned long long)a.eventCount(), bName_.c_str(),
              b.ranks().size(), (unsigned long long)b.eventCount());
  ImGui::SameLine(0, 30);
  ImGui::Checkbox("same scale", &sameScale_);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("zooming one run's timeline zooms the other to the same ns per pixel");
}

void DiffView::timeline(const char* id, const char* label, const std::string& name,
                        TimelinePanel& panel, const TraceStore& store, ViewState& view,
                        float height) {
  ImGui::TextDisabled("%s: %s", label, name.c_str());
  ImGui::BeginChild(id, ImVec2(0, height), false,
                    ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  if (store.empty())
    ImGui::TextWrapped("run %s recorded no events", label);
  else
    panel.draw(store, view);
  ImGui::EndChild();
}

void DiffView::keepScales(ViewState& viewA, ViewState& viewB, const TimeView& beforeA,
                          const TimeView& beforeB) {
  if (!sameScale_) return;
  // Only a zoom changes the scale: a pan of one run moves that run alone.
  if (viewA.time.span() != beforeA.span())
    matchScale(viewB.time, viewA.time);
  else if (viewB.time.span() != beforeB.span())
    matchScale(viewA.time, viewB.time);
}

void DiffView::breakdown(ViewState& viewA, ViewState& viewB) {
  const analysis::RunDiff& d = diff_;
  if (!d.engine.empty()) {
    ImGui::Text("Step time (%s engine; means over %llu and %llu iterations of all ranks)",
                d.engine.c_str(), (unsigned long long)d.aIterations,
                (unsigned long long)d.bIterations);
    ImGui::SameLine(0, 40);
    for (const analysis::DiffRow& p : d.phases) {
      const std::string text = p.name + " " + formatNs(p.aNs) + " -> " + formatNs(p.bNs);
      ImGui::PushStyleColor(ImGuiCol_Text, p.deltaNs > 0   ? kRegressionColor
                                           : p.deltaNs < 0 ? kImprovementColor
                                                           : ImGui::GetColorU32(ImGuiCol_Text));
      if (ImGui::SmallButton(text.c_str())) {
        selected_ = -1;
        show(p, viewA, viewB);
      }
      ImGui::PopStyleColor();
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("%s: B - A %s (%s); click: step %lld in both runs", p.name.c_str(),
                          ringx::formatSignedDuration(p.deltaNs).c_str(),
                          analysis::formatRatio(p.aNs, p.bNs).c_str(), (long long)d.exampleStep);
      ImGui::SameLine();
    }
    ImGui::NewLine();
  }
  ImGui::Text("Collectives matched by (group, seq): %llu",
              (unsigned long long)d.matchedCollectives);
  if (d.onlyInA || d.onlyInB) {
    ImGui::SameLine();
    ImGui::Text("(only in A: %llu, only in B: %llu)", (unsigned long long)d.onlyInA,
                (unsigned long long)d.onlyInB);
  }
  if (d.matchedCollectives > 0) {
    ImGui::SameLine(0, 30);
    ImGui::Text("time in them: A %s, B %s (%s)", formatNs(d.collectiveTotalA).c_str(),
                formatNs(d.collectiveTotalB).c_str(),
                analysis::formatRatio(d.collectiveTotalA, d.collectiveTotalB).c_str());
  }
  if (d.opMismatches > 0) {
    ImGui::TextColored(ImVec4(1.0f, 0.45f, 0.4f, 1.0f),
                       "the runs diverged: %llu collectives have a different op at the same "
                       "seq (first: %s); they are not compared",
                       (unsigned long long)d.opMismatches, d.firstMismatch.c_str());
  }
}

void DiffView::rankedRows(ViewState& viewA, ViewState& viewB) {
  rowY_.assign(diff_.rows.size(), -1.0f);
  if (diff_.rows.empty()) {
    ImGui::TextWrapped("Nothing to compare: no collective, step, bucket or unit is in both runs.");
    return;
  }
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV |
                                ImGuiTableFlags_ScrollY | ImGuiTableFlags_Resizable;
  if (!ImGui::BeginTable("##diffrows", 7, flags, ImVec2(0, ImGui::GetContentRegionAvail().y)))
    return;
  ImGui::TableSetupScrollFreeze(0, 1);
  ImGui::TableSetupColumn("#", ImGuiTableColumnFlags_WidthFixed, 40);
  ImGui::TableSetupColumn("kind", ImGuiTableColumnFlags_WidthFixed, 80);
  ImGui::TableSetupColumn("what (furthest above its noise first)",
                          ImGuiTableColumnFlags_WidthStretch);
  for (const char* h : {"A", "B", "B - A", "B/A"})
    ImGui::TableSetupColumn(h, ImGuiTableColumnFlags_WidthFixed, 100);
  ImGui::TableHeadersRow();
  ImGuiListClipper clipper;
  clipper.Begin(int(diff_.rows.size()));
  while (clipper.Step()) {
    for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
      const analysis::DiffRow& r = diff_.rows[size_t(i)];
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      const ImVec2 at = ImGui::GetCursorScreenPos();
      rowX_ = at.x + 10;
      rowY_[size_t(i)] = at.y + ImGui::GetTextLineHeight() / 2;
      char label[32];
      std::snprintf(label, sizeof label, "%d##row", i + 1);
      if (ImGui::Selectable(label, selected_ == i, ImGuiSelectableFlags_SpanAllColumns))
        select(size_t(i), viewA, viewB);
      if (ImGui::IsItemHovered() && (r.aTimeNs < 0 || r.bTimeNs < 0))
        ImGui::SetTooltip("one of the runs has no place for this row to show");
      const ImU32 color = r.deltaNs > 0   ? kRegressionColor
                          : r.deltaNs < 0 ? kImprovementColor
                                          : ImGui::GetColorU32(ImGuiCol_Text);
      ImGui::PushStyleColor(ImGuiCol_Text, color);
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(analysis::diffKindName(r.kind));
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(r.name.c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(formatNs(r.aNs).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(formatNs(r.bNs).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(ringx::formatSignedDuration(r.deltaNs).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(analysis::formatRatio(r.aNs, r.bNs).c_str());
      ImGui::PopStyleColor();
    }
  }
  ImGui::EndTable();
}

}  // namespace ringx::viewer
