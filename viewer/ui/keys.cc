#include "viewer/ui/keys.h"

#include <imgui.h>

namespace ringx::viewer {

const std::vector<KeyBinding>& keyBindings() {
  static const std::vector<KeyBinding> kBindings = {
      {"Wheel", "zoom at the cursor"},
      {"W / S", "zoom in / out (at the cursor, else the centre)"},
      {"A / D", "pan left / right"},
      {"Drag on the rows", "pan time and scroll the rows"},
      {"Drag on the ruler", "select a time range (the Statistics panel counts it)"},
      {"Click", "select the event under the cursor (the Statistics panel counts its name)"},
      {"Double click", "zoom to the event"},
      {". / ,", "next / previous event on the selected event's track"},
      {"F", "focus: zoom to the selected event, else to the selected range"},
      {"M", "mark the selected event's time as the selected range"},
      {"Ctrl+F", "search event names; Enter / F3 next match, Shift+F3 previous"},
      {"Ctrl+P", "find a track or rank by name and scroll to it"},
      {"Right-click a track's name", "pin it to the top, move it among the pinned, hide it"},
      {"Shift+drag over rows", "select an area: those rows' tracks over the dragged time"},
      {"Shift+click a rank's header", "add its tracks to the area (again: take them out)"},
      {"End", "follow a live job again"},
      {"?", "this list"},
      {"Esc", "close this list"},
  };
  return kBindings;
}

void drawKeyHelp(bool* open) {
  if (!*open) return;
  ImGui::SetNextWindowSize(ImVec2(560, 0), ImGuiCond_Appearing);
  if (ImGui::Begin("Keys", open, ImGuiWindowFlags_NoCollapse)) {
    if (ImGui::BeginTable("##keys", 2, ImGuiTableFlags_RowBg)) {
      for (const KeyBinding& k : keyBindings()) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(k.keys);
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(k.does);
      }
      ImGui::EndTable();
    }
  }
  ImGui::End();
  if (ImGui::IsKeyPressed(kKeyEscape, false)) *open = false;
}

}  // namespace ringx::viewer
