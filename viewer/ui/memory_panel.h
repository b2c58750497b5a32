// Memory: every counter of every rank (RSS, FSDP sharded / unsharded / gradient
// bytes, DDP bucket bytes, and any counter a Chrome trace carries) as a step
// chart drawn with ImDrawList, on the timeline's time axis and cursor. Each
// series' peak is marked; hovering the mark names the DDP buckets and FSDP
// units alive at that moment.
#pragma once

#include <vector>

#include "trace/model/trace_store.h"
#include "viewer/ui/view_state.h"

namespace ringx::viewer {
// The viewer draws the trace model (trace/model/); its names are used unqualified here.
using namespace ringx::model;

class MemoryPanel {
 public:
  struct Chart {  // last frame's layout, for tests
    int32_t rank = 0;
    uint32_t counter = 0;  // StringPool id
    float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
    float peakX = 0, peakY = 0;
  };
  void draw(const TraceStore& store, ViewState& view);
  const std::vector<Chart>& charts() const { return charts_; }

 private:
  std::vector<Chart> charts_;
};

}  // namespace ringx::viewer
