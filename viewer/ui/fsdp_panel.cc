// The FSDP panel (see fsdp_panel.h).
#include "viewer/ui/fsdp_panel.h"

#include <imgui.h>

#include <algorithm>

#include "viewer/ui/style.h"

namespace ringx::viewer {

void FsdpPanel::draw(const TraceStore& store, ViewState& view) {
  if (generation_ != store.generation()) {
    generation_ = store.generation();
    notRecovered_.clear();
    analysis_ = analysis::analyzeFsdp(store, &notRecovered_);
  }
  const analysis::FsdpAnalysis& a = analysis_;
  if (a.units.empty()) {
    ImGui::TextWrapped(
        "No FSDP steps in this trace: trace a ringx.fsdp or torch FSDP2 job with "
        "ringx.trace.start(), or profile a torch FSDP2 job with torch.profiler "
        "(record_shapes=True).");
    if (!notRecovered_.empty()) {
      ImGui::TextWrapped("FSDP2's units are not recovered from these profiler traces: %s",
                         notRecovered_.c_str());
    }
    return;
  }
  ImGui::Text(
      "%zu units   %zu iterations   forward %s   backward %s   optimizer %s   "
      "compute waiting for gathers %s per iteration",
      a.units.size(), a.iterations.size(), formatNs(a.forwardMeanNs).c_str(),
      formatNs(a.backwardMeanNs).c_str(), formatNs(a.optimizerMeanNs).c_str(),
      formatNs(a.exposedMeanNs).c_str());
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders |
                                ImGuiTableFlags_ScrollY | ImGuiTableFlags_Resizable;
  if (!ImGui::BeginTable("##units", 12, flags)) return;
  ImGui::TableSetupScrollFreeze(1, 1);
  for (const char* h :
       {"unit", "gathers fwd/bwd", "prefetched", "unsharded", "gather wire", "waited per gather",
        "wait vs wire", "forward", "backward", "reshards", "reduce-scatter", "allreduce"})
    ImGui::TableSetupColumn(
        h, std::string_view(h) == "wait vs wire" ? ImGuiTableColumnFlags_WidthFixed : 0,
        std::string_view(h) == "wait vs wire" ? 120.0f : 0.0f);
  ImGui::TableHeadersRow();
  int64_t longestWire = 1;
  for (const auto& u : a.units)
    longestWire = std::max(longestWire, std::max(u.gatherWireMeanNs, u.exposedMeanNs));
  for (size_t i = 0; i < a.units.size(); ++i) {
    const analysis::FsdpUnitAnalysis& u = a.units[i];
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::PushID(int(i));
    if (ImGui::Selectable(u.unit.c_str(), false, ImGuiSelectableFlags_SpanAllColumns)) {
      view.time.show(u.firstBeginNs, u.firstBeginNs + std::max<int64_t>(u.forwardMeanNs * 4, 1000));
    }
    ImGui::PopID();
    ImGui::TableNextColumn();
    ImGui::Text("%llu/%llu", (unsigned long long)u.forwardGathers,
                (unsigned long long)u.backwardGathers);
    ImGui::TableNextColumn();
    ImGui::Text("%.0f%%", u.gathers ? 100.0 * double(u.prefetched) / double(u.gathers) : 0.0);
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(formatBytes(double(u.gatherBytes)).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(formatNs(u.gatherWireMeanNs).c_str());
    ImGui::TableNextColumn();
    if (u.exposedMeanNs > 0) ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(255, 120, 110, 255));
    ImGui::TextUnformatted(formatNs(u.exposedMeanNs).c_str());
    if (u.exposedMeanNs > 0) ImGui::PopStyleColor();
    ImGui::TableNextColumn();
    {
      const ImVec2 p = ImGui::GetCursorScreenPos();
      const float w = 116;
      ImDrawList* draw = ImGui::GetWindowDrawList();
      draw->AddRectFilled(
          ImVec2(p.x, p.y + 2),
          ImVec2(p.x + w * float(double(u.gatherWireMeanNs) / double(longestWire)), p.y + 12),
          IM_COL32(255, 167, 38, 255));
      draw->AddRectFilled(
          ImVec2(p.x, p.y + 5),
          ImVec2(p.x + w * float(double(u.exposedMeanNs) / double(longestWire)), p.y + 9),
          IM_COL32(229, 57, 53, 255));
      ImGui::Dummy(ImVec2(w, 14));
    }
    for (int64_t v : {u.forwardMeanNs, u.backwardMeanNs}) {
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(formatNs(v).c_str());
    }
    ImGui::TableNextColumn();
    ImGui::Text("%llu", (unsigned long long)u.reshards);
    ImGui::TableNextColumn();
    if (u.reduceScatters)
      ImGui::Text("%llu x %s", (unsigned long long)u.reduceScatters,
                  formatNs(u.reduceScatterMeanNs).c_str());
    ImGui::TableNextColumn();
    if (u.allreduces)
      ImGui::Text("%llu x %s", (unsigned long long)u.allreduces,
                  formatNs(u.allreduceMeanNs).c_str());
  }
  ImGui::EndTable();
}

}  // namespace ringx::viewer
