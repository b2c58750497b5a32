// FSDP (ringx.fsdp): per unit, in execution order — gathers (forward and
// backward), how many were prefetched in time and how long compute waited for
// the others, forward and backward compute, reshards, reduce-scatters and
// replica allreduces; a bar per unit shows gather wire time against the part of
// it compute waited for.
#pragma once

#include <string>

#include "analysis/trace_analyses.h"
#include "viewer/ui/view_state.h"

namespace ringx::viewer {

class FsdpPanel {
 public:
  void draw(const TraceStore& store, ViewState& view);
  const analysis::FsdpAnalysis& analysis() const { return analysis_; }
  const std::string& notRecovered() const { return notRecovered_; }

 private:
  analysis::FsdpAnalysis analysis_;
  uint64_t generation_ = ~0ull;
  std::string notRecovered_;  // why profiler traces of the engine gave no steps
};

}  // namespace ringx::viewer
