// The memory panel (see memory_panel.h). Each series is decimated to one
// min/max pair per pixel column (decimateCounter), so a counter sampled a million
// times costs as much to draw as one sampled a thousand times.
#include "viewer/ui/memory_panel.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "analysis/trace_analyses.h"
#include "viewer/ui/style.h"

namespace ringx::viewer {
namespace {
constexpr float kChartHeight = 54.0f;
constexpr float kGap = 6.0f;
constexpr ImU32 kChartBackground = IM_COL32(30, 32, 36, 255);
}  // namespace

void MemoryPanel::draw(const TraceStore& store, ViewState& view) {
  charts_.clear();
  int series = 0;
  for (const RankData& rank : store.ranks()) series += int(rank.counters.size());
  if (series == 0) {
    ImGui::TextWrapped(
        "No memory counters in this trace. ringx records rss_bytes when tracing is on, ringx.ddp "
        "its bucket bytes and ringx.fsdp its sharded, unsharded and gradient bytes.");
    return;
  }
  ImGui::BeginChild("##memory", ImVec2(0, 0), false);
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const float width = ImGui::GetContentRegionAvail().x;
  const float labelWidth = view.settings.labelWidth;
  const float plotWidth = std::max(width - labelWidth, 10.0f);
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  int colorIndex = 0;
  for (const RankData& rank : store.ranks()) {
    ImGui::Text("rank %d%s%s", rank.rank, rank.host.empty() ? "" : "  ", rank.host.c_str());
    for (const CounterSeries& c : rank.counters) {
      const ImVec2 p = ImGui::GetCursorScreenPos();
      ImGui::InvisibleButton(
          ("##c" + std::to_string(rank.rank) + "_" + std::to_string(c.name)).c_str(),
          ImVec2(width, kChartHeight));
      const bool hovered = ImGui::IsItemHovered();
      Chart chart{rank.rank,         c.name, p.x + labelWidth, p.y, p.x + labelWidth + plotWidth,
                  p.y + kChartHeight};
      const ImU32 color = seriesColor(colorIndex++);
      draw->AddRectFilled(ImVec2(chart.x0, chart.y0), ImVec2(chart.x1, chart.y1), kChartBackground);
      const std::string_view name = store.str(c.name);
      const bool isBytes = name.find("bytes") != std::string_view::npos;
      const std::string peakText = isBytes ? formatBytes(c.maxValue) : std::to_string(c.maxValue);
      draw->AddText(ImVec2(p.x + 4, p.y + 2), color, std::string(name).c_str());
      draw->AddText(ImVec2(p.x + 4, p.y + 18), IM_COL32(200, 200, 200, 255),
                    ("peak " + peakText).c_str());
      // Columns of min/max; the scale is the series' own peak (counters differ by
      // orders of magnitude: RSS against a bucket).
      const int columns = std::max(1, int(plotWidth));
      const auto cols = decimateCounter(c, view.time.t0, view.time.t1, columns);
      const double top = c.maxValue > 0 ? c.maxValue * 1.08 : 1;
      auto yOf = [&](double v) { return chart.y1 - float(v / top) * (kChartHeight - 4); };
      float lastY = 0;
      bool haveLast = false;
      for (int i = 0; i < columns; ++i) {
        const CounterColumn& col = cols[size_t(i)];
        if (!col.valid) {
          haveLast = false;
          continue;
        }
        const float x = chart.x0 + float(i);
        const float yMax = yOf(col.max), yMin = yOf(col.min);
        draw->AddRectFilled(ImVec2(x, yMax), ImVec2(x + 1, chart.y1),
                            (color & 0x00ffffff) | 0x50000000);
        draw->AddLine(ImVec2(x, yMax), ImVec2(x, yMin + 1), color);
        if (haveLast) draw->AddLine(ImVec2(x - 1, lastY), ImVec2(x, yMin), color);
        lastY = yMin;
        haveLast = true;
      }
      // The peak mark.
      chart.peakX = view.time.toX(c.maxTime, chart.x0, plotWidth);
      chart.peakY = yOf(c.maxValue);
      if (chart.peakX >= chart.x0 && chart.peakX <= chart.x1) {
        draw->AddCircleFilled(ImVec2(chart.peakX, chart.peakY), 4, IM_COL32(229, 57, 53, 255));
        if (hovered && std::fabs(mouse.x - chart.peakX) < 6 &&
            std::fabs(mouse.y - chart.peakY) < 8) {
          ImGui::BeginTooltip();
          ImGui::Text("peak %s of %.*s on rank %d at %s", peakText.c_str(), int(name.size()),
                      name.data(), rank.rank, formatNs(c.maxTime - store.beginNs()).c_str());
          const auto alive = analysis::aliveAt(store, rank.rank, c.maxTime);
          if (alive.empty()) ImGui::TextUnformatted("no DDP bucket or FSDP unit was active");
          for (const auto& a : alive) ImGui::BulletText("%s", a.c_str());
          ImGui::EndTooltip();
        }
      }
      if (view.hasCursor) {
        const float x = view.time.toX(view.cursorTime, chart.x0, plotWidth);
        if (x >= chart.x0 && x <= chart.x1)
          draw->AddLine(ImVec2(x, chart.y0), ImVec2(x, chart.y1), IM_COL32(255, 255, 255, 110));
      }
      if (hovered && mouse.x >= chart.x0) {
        // Share the cursor with the timeline; the wheel zooms the shared axis.
        view.hasCursor = true;
        view.cursorTime = view.time.toTime(mouse.x, chart.x0, plotWidth);
        if (ImGui::GetIO().MouseWheel != 0)
          view.time.zoomAt(view.cursorTime, std::pow(0.8, double(ImGui::GetIO().MouseWheel)));
      }
      charts_.push_back(chart);
      ImGui::Dummy(ImVec2(0, kGap));
    }
  }
  ImGui::EndChild();
}

}  // namespace ringx::viewer
