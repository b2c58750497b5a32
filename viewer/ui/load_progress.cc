// The loading frame (see load_progress.h).
#include "viewer/ui/load_progress.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace ringx::viewer {

void LoadProgressView::frame(const BackgroundLoad& load, double elapsedMs) {
  const ImGuiIO& io = ImGui::GetIO();
  ImGui::SetNextWindowPos(ImVec2(0, 0));
  ImGui::SetNextWindowSize(io.DisplaySize);
  ImGui::Begin("ringx-viewer: loading", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove |
                   ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoBringToFrontOnFocus);
  const LoadProgress& p = load.progress();
  const uint32_t files = p.filesDone.load(), total = p.filesTotal.load();
  // By files, not bytes: a file is the unit of work, and the count is what the
  // person can check against the job's size.
  fraction_ = total > 0 ? std::clamp(float(files) / float(total), 0.0f, 1.0f) : 0.0f;
  std::string what;
  for (const std::string& path : load.paths()) what += (what.empty() ? "" : ", ") + path;
  ImGui::SetCursorPos(ImVec2(io.DisplaySize.x * 0.2f, io.DisplaySize.y * 0.4f));
  ImGui::Text("Loading %s", what.c_str());
  const float width = io.DisplaySize.x * 0.6f;
  ImGui::SetCursorPosX(io.DisplaySize.x * 0.2f);
  const ImVec2 at = ImGui::GetCursorScreenPos();
  const float height = ImGui::GetFrameHeight();
  ImDrawList* draw = ImGui::GetWindowDrawList();
  draw->AddRectFilled(at, ImVec2(at.x + width, at.y + height), kBarBackground);
  draw->AddRectFilled(at, ImVec2(at.x + width * fraction_, at.y + height), kBarColor);
  barX0_ = at.x;
  barX1_ = at.x + width;
  barY_ = at.y + height / 2;
  ImGui::Dummy(ImVec2(width, height));
  char line[256];
  std::snprintf(line, sizeof line, "%u of %u files, %.2fM events, %.1f of %.1f MB, %.1f s", files,
                total, double(p.events.load()) / 1e6, double(p.bytesDone.load()) / 1e6,
                double(p.bytesTotal.load()) / 1e6, elapsedMs / 1e3);
  ImGui::SetCursorPosX(io.DisplaySize.x * 0.2f);
  ImGui::TextUnformatted(line);
  ImGui::End();
}

}  // namespace ringx::viewer
