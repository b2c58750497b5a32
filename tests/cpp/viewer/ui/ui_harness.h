// Runs the viewer's UI headless: an ImGui context with a built font atlas and a
// display size, no window and no GL. Input is fed the way ImGui 1.86 takes it
// (io.MousePos, io.MouseDown, io.MouseWheel, io.KeysDown), and frames end in
// ImGui::Render(), so draw lists can be inspected like pixels.
#pragma once

#include <imgui.h>

#include <algorithm>
#include <functional>

#include "tests/cpp/trace/model/sample_store.h"

namespace ringx::viewer::testing {

// The model fixtures (tests/cpp/trace/model/sample_store.h), as testing:: names here too.
using namespace ringx::model::testing;

class HeadlessImGui {
 public:
  explicit HeadlessImGui(float width = 1600, float height = 900) {
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;
    io.DisplaySize = ImVec2(width, height);
    io.DeltaTime = 1.0f / 60;
    // As the OpenGL3 backend does: big draw lists split with vertex offsets.
    io.BackendFlags |= ImGuiBackendFlags_RendererHasVtxOffset;
    // Named keys as imgui_impl_glfw maps them: io.KeysDown is indexed by GLFW's
    // key codes, so key(kEnter, true) is what pressing Enter in the window does.
    io.KeyMap[ImGuiKey_Tab] = 258;
    io.KeyMap[ImGuiKey_LeftArrow] = 263;
    io.KeyMap[ImGuiKey_RightArrow] = 262;
    io.KeyMap[ImGuiKey_UpArrow] = 265;
    io.KeyMap[ImGuiKey_DownArrow] = 264;
    io.KeyMap[ImGuiKey_Home] = 268;
    io.KeyMap[ImGuiKey_End] = kEnd;
    io.KeyMap[ImGuiKey_Backspace] = 259;
    io.KeyMap[ImGuiKey_Escape] = 256;
    io.KeyMap[ImGuiKey_Enter] = kEnter;
    unsigned char* pixels;
    int w, h;
    io.Fonts->GetTexDataAsRGBA32(&pixels, &w, &h);
    io.Fonts->SetTexID(ImTextureID(1));
  }
  ~HeadlessImGui() { ImGui::DestroyContext(); }

  // One frame: NewFrame, build(), Render. The wheel is consumed by the frame.
  void frame(const std::function<void()>& build) {
    ImGui::NewFrame();
    build();
    ImGui::Render();
    ImGui::GetIO().MouseWheel = 0;
  }
  void mouse(float x, float y) { ImGui::GetIO().MousePos = ImVec2(x, y); }
  void button(bool down) { ImGui::GetIO().MouseDown[0] = down; }
  void wheel(float w) { ImGui::GetIO().MouseWheel = w; }
  void key(int k, bool down) { ImGui::GetIO().KeysDown[k] = down; }
  // A key pressed in one frame and released in the next, with modifiers held.
  void press(int k, const std::function<void()>& build, bool ctrl = false, bool shift = false) {
    ImGuiIO& io = ImGui::GetIO();
    io.KeyCtrl = ctrl;
    io.KeyShift = shift;
    key(k, true);
    frame(build);
    key(k, false);
    frame(build);
    io.KeyCtrl = io.KeyShift = false;
  }
  // A click at (x, y): the mouse moves there in one frame, the left button goes
  // down in the next and up in the one after (no movement: not a drag).
  void click(float x, float y, const std::function<void()>& build) {
    mouse(x, y);
    frame(build);
    button(true);
    frame(build);
    button(false);
    frame(build);
  }
  // Characters typed into whichever text field has the keyboard.
  void type(const char* text, const std::function<void()>& build) {
    for (const char* c = text; *c; ++c) ImGui::GetIO().AddInputCharacter(static_cast<unsigned>(*c));
    frame(build);
  }

  static constexpr int kEnter = 257;  // GLFW_KEY_ENTER
  static constexpr int kEnd = 269;    // GLFW_KEY_END

  // Whether some filled triangle of the last frame has colour `color` and covers
  // the point (x, y): a headless stand-in for reading a pixel.
  static bool colorAt(ImU32 color, float x, float y) {
    return anyTriangle(color, [&](float minX, float maxX, float minY, float maxY) {
      return x >= minX && x <= maxX && y >= minY && y <= maxY;
    });
  }
  // Whether the last frame filled anything in `color`.
  static bool drew(ImU32 color) {
    return anyTriangle(color, [](float, float, float, float) { return true; });
  }

 private:
  // Whether a triangle of the last frame all in `color` has a bounding box (minX, maxX, minY,
  // maxY) that `box` accepts.
  template <class Box>
  static bool anyTriangle(ImU32 color, const Box& box) {
    const ImDrawData* data = ImGui::GetDrawData();
    for (int l = 0; l < data->CmdListsCount; ++l) {
      const ImDrawList* list = data->CmdLists[l];
      for (const ImDrawCmd& cmd : list->CmdBuffer) {
        const ImDrawIdx* idx = list->IdxBuffer.Data + cmd.IdxOffset;
        const ImDrawVert* vtx = list->VtxBuffer.Data + cmd.VtxOffset;
        for (unsigned i = 0; i + 2 < cmd.ElemCount; i += 3) {
          const ImDrawVert& a = vtx[idx[i]];
          const ImDrawVert& b = vtx[idx[i + 1]];
          const ImDrawVert& c = vtx[idx[i + 2]];
          if (a.col != color || b.col != color || c.col != color) continue;
          if (box(std::min({a.pos.x, b.pos.x, c.pos.x}), std::max({a.pos.x, b.pos.x, c.pos.x}),
                  std::min({a.pos.y, b.pos.y, c.pos.y}), std::max({a.pos.y, b.pos.y, c.pos.y})))
            return true;
        }
      }
    }
    return false;
  }
};

}  // namespace ringx::viewer::testing
