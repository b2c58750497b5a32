// The DDP panel (see ddp_panel.h).
#include "viewer/ui/ddp_panel.h"

#include <imgui.h>

#include <algorithm>

#include "viewer/ui/style.h"

namespace ringx::viewer {
namespace {
constexpr ImU32 kForward = IM_COL32(52, 168, 83, 255);
constexpr ImU32 kBackward = IM_COL32(66, 133, 244, 255);
constexpr ImU32 kExposed = IM_COL32(229, 57, 53, 255);
constexpr ImU32 kOptimizer = IM_COL32(158, 158, 158, 255);
constexpr ImU32 kWire = IM_COL32(255, 167, 38, 255);

void legend(ImU32 color, const char* text) {
  const ImVec2 p = ImGui::GetCursorScreenPos();
  ImGui::GetWindowDrawList()->AddRectFilled(p, ImVec2(p.x + 10, p.y + 10), color);
  ImGui::Dummy(ImVec2(12, 10));
  ImGui::SameLine();
  ImGui::TextUnformatted(text);
  ImGui::SameLine();
}
}  // namespace

void DdpPanel::draw(const TraceStore& store, ViewState& view) {
  if (generation_ != store.generation()) {
    generation_ = store.generation();
    notRecovered_.clear();
    analysis_ = analysis::analyzeDdp(store, &notRecovered_);
    if (chosen_ >= int(analysis_.iterations.size())) chosen_ = -1;
  }
  const analysis::DdpAnalysis& a = analysis_;
  if (a.iterations.empty() && a.buckets.empty()) {
    ImGui::TextWrapped(
        "No DDP steps in this trace: trace a ringx.ddp or torch DDP job with "
        "ringx.trace.start(), or profile a torch DDP job with torch.profiler "
        "(record_shapes=True).");
    if (!notRecovered_.empty()) {
      ImGui::TextWrapped("torch DDP's buckets are not recovered from these profiler traces: %s",
                         notRecovered_.c_str());
    }
    return;
  }
  ImGui::Text(
      "%zu iterations   forward %s   backward %s   optimizer %s   exposed comm %s   "
      "hidden %.0f%%   bucket rebuilds %llu",
      a.iterations.size(), formatNs(a.forwardMeanNs).c_str(), formatNs(a.backwardMeanNs).c_str(),
      formatNs(a.optimizerMeanNs).c_str(), formatNs(a.exposedMeanNs).c_str(), a.hiddenShare * 100,
      (unsigned long long)a.rebuilds);
  if (ImGui::BeginTable("##ddp", 2, ImGuiTableFlags_Resizable | ImGuiTableFlags_BordersInnerV)) {
    ImGui::TableNextColumn();
    drawIterations(view);
    ImGui::TableNextColumn();
    if (ImGui::BeginTable("##buckets", 8, ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders,
                          ImVec2(0, 0))) {
      for (const char* h :
           {"bucket", "bytes", "params", "ready at", "wait to launch", "wire", "exposed", "hidden"})
        ImGui::TableSetupColumn(h);
      ImGui::TableHeadersRow();
      for (const analysis::DdpBucketAverage& b : a.buckets) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::Text("%lld", (long long)b.bucket);
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(formatBytes(double(b.bytes)).c_str());
        ImGui::TableNextColumn();
        ImGui::Text("%lld", (long long)b.params);
        for (int64_t v :
             {b.readyOffsetMeanNs, b.launchDelayMeanNs, b.wireMeanNs, b.exposedMeanNs}) {
          ImGui::TableNextColumn();
          ImGui::TextUnformatted(formatNs(v).c_str());
        }
        ImGui::TableNextColumn();
        ImGui::Text("%.0f%%", b.hiddenShare * 100);
      }
      ImGui::EndTable();
    }
    if (chosen_ >= 0) drawBucketTimeline(a.iterations[size_t(chosen_)]);
    ImGui::EndTable();
  }
}

void DdpPanel::drawIterations(ViewState& view) {
  legend(kForward, "forward");
  legend(kBackward, "backward");
  legend(kExposed, "exposed comm");
  legend(kOptimizer, "optimizer");
  ImGui::NewLine();
  const auto& its = analysis_.iterations;
  int64_t longest = 1;
  for (const auto& it : its)
    longest = std::max(longest, it.forwardNs + it.backwardNs + it.exposedNs + it.optimizerNs);
  ImGui::BeginChild("##iterations", ImVec2(0, 0), false);
  const float labelWidth = 90,
              width = std::max(ImGui::GetContentRegionAvail().x - labelWidth, 20.0f);
  ImDrawList* draw = ImGui::GetWindowDrawList();
  ImGuiListClipper clipper;
  clipper.Begin(int(its.size()), 16.0f);
  while (clipper.Step()) {
    for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
      const analysis::DdpIteration& it = its[size_t(i)];
      const ImVec2 p = ImGui::GetCursorScreenPos();
      char label[48];
      std::snprintf(label, sizeof label, "r%d step %lld", it.rank, (long long)it.step);
      ImGui::PushID(i);
      if (ImGui::Selectable(label, chosen_ == i, 0, ImVec2(labelWidth - 4, 14))) {
        chosen_ = i;
        view.time.show(it.forwardBeginNs ? it.forwardBeginNs : it.backwardBeginNs,
                       it.backwardEndNs + it.exposedNs + it.optimizerNs);
      }
      ImGui::PopID();
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("forward %s\nbackward %s\nexposed comm %s\noptimizer %s\nwire %s",
                          formatNs(it.forwardNs).c_str(), formatNs(it.backwardNs).c_str(),
                          formatNs(it.exposedNs).c_str(), formatNs(it.optimizerNs).c_str(),
                          formatNs(it.wireNs).c_str());
      float x = p.x + labelWidth;
      for (auto [ns, color] : {std::pair{it.forwardNs, kForward},
                               {it.backwardNs, kBackward},
                               {it.exposedNs, kExposed},
                               {it.optimizerNs, kOptimizer}}) {
        const float w = float(double(ns) / double(longest)) * width;
        draw->AddRectFilled(ImVec2(x, p.y + 1), ImVec2(x + w, p.y + 13), color);
        x += w;
      }
    }
  }
  ImGui::EndChild();
}

void DdpPanel::drawBucketTimeline(const analysis::DdpIteration& it) {
  ImGui::Text("rank %d step %lld: buckets against backward (blue); wire orange, exposed red",
              it.rank, (long long)it.step);
  int64_t end = it.backwardEndNs;
  for (const auto& b : it.buckets) end = std::max(end, std::max(b.wireEndNs, b.endNs));
  const int64_t begin = it.backwardBeginNs;
  const float width = std::max(ImGui::GetContentRegionAvail().x - 70, 20.0f);
  ImDrawList* draw = ImGui::GetWindowDrawList();
  auto x = [&](float x0, int64_t t) {
    return x0 + float(double(t - begin) / double(std::max<int64_t>(end - begin, 1))) * width;
  };
  const ImVec2 top = ImGui::GetCursorScreenPos();
  draw->AddRectFilled(ImVec2(x(top.x + 70, begin), top.y),
                      ImVec2(x(top.x + 70, it.backwardEndNs), top.y + 6), kBackward);
  ImGui::Dummy(ImVec2(0, 8));
  for (const auto& b : it.buckets) {
    const ImVec2 p = ImGui::GetCursorScreenPos();
    ImGui::Text("bucket %lld", (long long)b.bucket);
    const float x0 = p.x + 70;
    if (b.wireStartNs && b.wireEndNs)
      draw->AddRectFilled(ImVec2(x(x0, b.wireStartNs), p.y + 2),
                          ImVec2(x(x0, b.wireEndNs), p.y + 12), kWire);
    if (b.exposedNs > 0 && b.wireEndNs)
      draw->AddRectFilled(ImVec2(x(x0, b.wireEndNs - b.exposedNs), p.y + 2),
                          ImVec2(x(x0, b.wireEndNs), p.y + 12), kExposed);
    if (b.readyNs)
      draw->AddLine(ImVec2(x(x0, b.readyNs), p.y), ImVec2(x(x0, b.readyNs), p.y + 14),
                    IM_COL32(255, 255, 255, 220), 2);
  }
}

}  // namespace ringx::viewer
