// Every key and mouse move the viewer answers, in one table: the `?` window lists it, the
// docs and the tests read it, and the code that handles a key names its entry here. The
// conventions are the ones people bring from Perfetto and Tracy (W/S/A/D, `.`/`,`, F, M).
#pragma once

#include <vector>

namespace ringx::viewer {

struct KeyBinding {
  const char* keys;  // "W / S", "Ctrl+F"
  const char* does;
};

const std::vector<KeyBinding>& keyBindings();

// The `?` window: every binding, until closed (`?` again, Esc or its close box).
void drawKeyHelp(bool* open);

// GLFW's codes for the keys that are not letters (ImGui 1.86's io.KeysDown is indexed by them).
inline constexpr int kKeyComma = 44, kKeyPeriod = 46, kKeyEscape = 256;

}  // namespace ringx::viewer
