// DDP (ringx.ddp): per iteration, a breakdown bar (forward, backward, exposed
// communication, optimizer); per bucket, the averages over iterations (wait to
// launch, wire time, exposed vs hidden) and, for one chosen iteration, each
// bucket's ready / launch / wire interval against backward.
#pragma once

#include <string>

#include "analysis/trace_analyses.h"
#include "viewer/ui/view_state.h"

namespace ringx::viewer {

class DdpPanel {
 public:
  void draw(const TraceStore& store, ViewState& view);
  const analysis::DdpAnalysis& analysis() const { return analysis_; }
  const std::string& notRecovered() const { return notRecovered_; }

 private:
  void drawIterations(ViewState& view);
  void drawBucketTimeline(const analysis::DdpIteration& it);
  analysis::DdpAnalysis analysis_;
  uint64_t generation_ = ~0ull;
  std::string notRecovered_;  // why profiler traces of the engine gave no steps
  int chosen_ = -1;           // index into analysis_.iterations
};

}  // namespace ringx::viewer
