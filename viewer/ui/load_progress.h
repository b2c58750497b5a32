// What the window shows while a trace loads in the background
// (trace/model/loader.h's BackgroundLoad): the inputs, a bar of the files
// read, and the events and megabytes so far, so that a person opening a
// 1,000-rank trace sees at once that it is coming and how fast.
#pragma once

#include <imgui.h>

#include "trace/model/loader.h"

namespace ringx::viewer {
// The viewer draws the trace model (trace/model/); its names are used unqualified here.
using namespace ringx::model;

class LoadProgressView {
 public:
  // The bar's filled part (tests look for it).
  static constexpr ImU32 kBarColor = IM_COL32(66, 150, 250, 255);
  static constexpr ImU32 kBarBackground = IM_COL32(52, 56, 64, 255);

  // Draws a whole-window frame for `load`, `elapsedMs` after it began.
  void frame(const BackgroundLoad& load, double elapsedMs);

  // The bar of the last frame (screen coordinates).
  float barX0() const { return barX0_; }
  float barX1() const { return barX1_; }
  float barY() const { return barY_; }
  float fraction() const { return fraction_; }

 private:
  float barX0_ = 0, barX1_ = 0, barY_ = 0, fraction_ = 0;
};

}  // namespace ringx::viewer
