// Colours and formatting (see style.h).
#include "viewer/ui/style.h"

#include <cstdio>
#include <functional>

#include "analysis/figures.h"

namespace ringx::viewer {

ImU32 categoryColor(std::string_view category) {
  // Fixed colours for ringx's own categories (schema.h), chosen to stay apart
  // from each other and readable with white text.
  if (category == "collective") return IM_COL32(66, 133, 244, 255);  // blue
  if (category == "ddp") return IM_COL32(52, 168, 83, 255);          // green
  if (category == "fsdp") return IM_COL32(171, 71, 188, 255);        // purple
  if (category == "memory") return IM_COL32(251, 140, 0, 255);       // orange
  if (category == "step") return IM_COL32(120, 144, 156, 255);       // grey blue
  if (category == "user") return IM_COL32(0, 172, 193, 255);         // cyan
  const size_t h = std::hash<std::string_view>{}(category);
  const int r = 70 + int(h & 0x7f), g = 70 + int((h >> 8) & 0x7f), b = 70 + int((h >> 16) & 0x7f);
  return IM_COL32(r, g, b, 255);
}

ImU32 darker(ImU32 color, float factor) {
  const auto ch = [&](int shift) {
    return ImU32(float((color >> shift) & 0xff) * factor) << shift;
  };
  return ch(IM_COL32_R_SHIFT) | ch(IM_COL32_G_SHIFT) | ch(IM_COL32_B_SHIFT) |
         (color & IM_COL32_A_MASK);
}

ImU32 seriesColor(int index) {
  static const ImU32 kColors[] = {
      IM_COL32(66, 133, 244, 255), IM_COL32(234, 67, 53, 255),  IM_COL32(251, 188, 4, 255),
      IM_COL32(52, 168, 83, 255),  IM_COL32(171, 71, 188, 255), IM_COL32(0, 172, 193, 255),
      IM_COL32(255, 112, 67, 255), IM_COL32(158, 157, 36, 255),
  };
  return kColors[unsigned(index) % (sizeof kColors / sizeof kColors[0])];
}

ImU32 textColorOn(ImU32 background) {
  const float r = float((background >> IM_COL32_R_SHIFT) & 0xff),
              g = float((background >> IM_COL32_G_SHIFT) & 0xff),
              b = float((background >> IM_COL32_B_SHIFT) & 0xff);
  return 0.299f * r + 0.587f * g + 0.114f * b > 150 ? IM_COL32(0, 0, 0, 255)
                                                    : IM_COL32(255, 255, 255, 255);
}

std::string formatBytes(double bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, unit == 0 ? "%.0f %s" : "%.2f %s", bytes, kUnits[unit]);
  return buf;
}

std::string formatNs(int64_t ns) { return ringx::formatDuration(ns); }

std::string formatBandwidth(double gbps) {
  char buf[32];
  std::snprintf(buf, sizeof buf, gbps >= 10 ? "%.1f GB/s" : "%.2f GB/s", gbps);
  return buf;
}

}  // namespace ringx::viewer
