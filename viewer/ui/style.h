// Colours and number formatting shared by the panels.
//
// Events are coloured by category (schema.h's categories keep fixed colours so a
// collective is the same blue in every screenshot; categories from Chrome traces
// get a colour hashed from their name). Panels format times with ringx-trace's
// formatDuration so the viewer and the text summary print the same figures.
#pragma once

#include <imgui.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace ringx::viewer {

// The fill colour of events of a category (by name).
ImU32 categoryColor(std::string_view category);
// A darker shade for borders and folded "N events" blocks.
ImU32 darker(ImU32 color, float factor = 0.6f);
// A colour for counter series and per-rank lines, by index.
ImU32 seriesColor(int index);
// Black or white, whichever reads better on `background`.
ImU32 textColorOn(ImU32 background);

// "512 B", "4.0 KiB", "1.50 MiB", "2.00 GiB".
std::string formatBytes(double bytes);
// "850 ns", "12.3 us", "4.56 ms", "1.23 s" (ringx-trace's formatDuration).
std::string formatNs(int64_t ns);
// "12.3 GB/s".
std::string formatBandwidth(double gbps);

}  // namespace ringx::viewer
