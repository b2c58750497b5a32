// The platform layer: a GLFW window with an OpenGL 3 context, ImGui's GLFW and
// OpenGL3 backends, the frame loop's begin/end, and screenshots of the back
// buffer. Everything else in the viewer is platform-free.
#pragma once

#include <string>
#include <vector>

struct GLFWwindow;

namespace ringx::viewer {

class Window {
 public:
  // Opens a window of width x height (pixels) and initialises ImGui on it.
  // Throws Error when there is no display or no OpenGL 3.3 context (the message
  // says to run under xvfb-run when DISPLAY is unset).
  Window(int width, int height, const std::string& title, bool vsync);
  ~Window();
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;

  bool shouldClose() const;
  void requestClose();
  // Takes input and starts an ImGui frame. With `waitForInput` it first sleeps
  // until an event arrives or 50 ms pass, so an idle viewer does not redraw at
  // full speed (software OpenGL costs a core); otherwise it only polls.
  void beginFrame(bool waitForInput = false);
  // Renders ImGui's draw data into the back buffer; present() swaps it.
  void render();
  void present();
  // Writes the back buffer (after render(), before present()) as a PNG.
  // Throws IoError when the file cannot be written.
  void screenshot(const std::string& path) const;
  // The back buffer as RGBA rows, top row first (after render(), before present()).
  std::vector<unsigned char> readPixels() const;
  int framebufferWidth() const;
  int framebufferHeight() const;
  void setTitle(const std::string& title);

 private:
  GLFWwindow* window_ = nullptr;
};

}  // namespace ringx::viewer
