// GLFW + OpenGL3 + ImGui backends (see window.h). The frame shape follows
// Dear ImGui's example_glfw_opengl3: poll, new frames, build the UI, render, swap.
#include "viewer/app/window.h"

#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>
#include <stb/stb_image_write.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "base/error.h"

namespace ringx::viewer {
namespace {
std::string glfwError;
void onGlfwError(int code, const char* text) {
  glfwError = strCat(text, " (GLFW error ", code, ")");
}
}  // namespace

Window::Window(int width, int height, const std::string& title, bool vsync) {
  glfwSetErrorCallback(onGlfwError);
  const char* display = std::getenv("DISPLAY");
  // Under Xvfb an X connection was seen to fail ("Failed to open display") and the next
  // one to succeed (twice in local runs of the screen tests): with a DISPLAY set, try a few
  // times, 0.2 s apart, before giving up.
  bool initialised = glfwInit();
  for (int attempt = 1; !initialised && display && *display && attempt < 5; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    initialised = glfwInit();
  }
  if (!initialised) {
    throw Error(strCat("cannot open a window: ", glfwError,
                       display && *display ? ""
                                           : " (DISPLAY is not set: run under xvfb-run, e.g. "
                                             "`xvfb-run -a ringx-viewer ...`)"));
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  window_ = glfwCreateWindow(width, height, title.c_str(), nullptr, nullptr);
  if (!window_) {
    glfwTerminate();
    throw Error(strCat("cannot create a ", width, "x", height, " OpenGL 3.3 window: ", glfwError));
  }
  glfwMakeContextCurrent(window_);
  glfwSwapInterval(vsync ? 1 : 0);
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;  // the layout is ours, not a file next to the binary
  ImGui::StyleColorsDark();
  ImGui_ImplGlfw_InitForOpenGL(window_, true);
  ImGui_ImplOpenGL3_Init("#version 330");
}

Window::~Window() {
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window_);
  glfwTerminate();
}

bool Window::shouldClose() const { return glfwWindowShouldClose(window_); }
void Window::requestClose() { glfwSetWindowShouldClose(window_, 1); }
void Window::setTitle(const std::string& title) { glfwSetWindowTitle(window_, title.c_str()); }

void Window::beginFrame(bool waitForInput) {
  if (waitForInput)
    glfwWaitEventsTimeout(0.05);
  else
    glfwPollEvents();
  ImGui_ImplOpenGL3_NewFrame();
  ImGui_ImplGlfw_NewFrame();
  ImGui::NewFrame();
}

void Window::render() {
  ImGui::Render();
  int w = 0, h = 0;
  glfwGetFramebufferSize(window_, &w, &h);
  glViewport(0, 0, w, h);
  glClearColor(0.09f, 0.09f, 0.10f, 1.0f);
  glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
}

void Window::present() { glfwSwapBuffers(window_); }

int Window::framebufferWidth() const {
  int w = 0, h = 0;
  glfwGetFramebufferSize(window_, &w, &h);
  return w;
}
int Window::framebufferHeight() const {
  int w = 0, h = 0;
  glfwGetFramebufferSize(window_, &w, &h);
  return h;
}

std::vector<unsigned char> Window::readPixels() const {
  const int w = framebufferWidth(), h = framebufferHeight();
  std::vector<unsigned char> pixels(size_t(w) * size_t(h) * 4);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadBuffer(GL_BACK);
  glReadPixels(0, 0, w, h, GL_RGBA, GL_UNSIGNED_BYTE, pixels.data());
  // OpenGL's rows go bottom-up; images' top-down.
  const size_t stride = size_t(w) * 4;
  std::vector<unsigned char> flipped(pixels.size());
  for (int y = 0; y < h; ++y)
    std::copy_n(&pixels[size_t(h - 1 - y) * stride], stride, &flipped[size_t(y) * stride]);
  return flipped;
}

void Window::screenshot(const std::string& path) const {
  const int w = framebufferWidth(), h = framebufferHeight();
  const std::vector<unsigned char> pixels = readPixels();
  if (!stbi_write_png(path.c_str(), w, h, 4, pixels.data(), w * 4))
    throw IoError(strCat("cannot write the screenshot to '", path, "'"));
}

}  // namespace ringx::viewer
