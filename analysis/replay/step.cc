#include "analysis/replay/step.h"

#include <algorithm>
#include <cmath>

#include "analysis/figures.h"

namespace ringx::replay {

const char* pathKindName(PathSegment::Kind kind) {
  switch (kind) {
    case PathSegment::Kind::kForward:
      return "forward";
    case PathSegment::Kind::kBackward:
      return "backward";
    case PathSegment::Kind::kAllreduce:
      return "allreduce";
    case PathSegment::Kind::kCopyBack:
      return "copy back";
    case PathSegment::Kind::kOptimizer:
      return "optimizer";
    case PathSegment::Kind::kAllGather:
      return "all_gather";
    case PathSegment::Kind::kReduceScatter:
      return "reduce_scatter";
    case PathSegment::Kind::kHost:
      return "host";
    case PathSegment::Kind::kKernel:
      return "kernel";
    case PathSegment::Kind::kCollective:
      return "collective";
  }
  return "?";
}

int64_t medianNs(const std::vector<int64_t>& v) {
  if (v.empty()) return 0;
  std::vector<double> d(v.begin(), v.end());
  return static_cast<int64_t>(std::llround(analysis::median(d)));
}

void RecordedSteps::add(int64_t step, int64_t forwardBeginNs, int64_t nextForwardBeginNs) {
  if (forwardBeginNs <= 0 || nextForwardBeginNs <= forwardBeginNs) return;
  int64_t& slowest = slowest_[step];
  slowest = std::max(slowest, nextForwardBeginNs - forwardBeginNs);
}

int64_t RecordedSteps::medianNs() const {
  std::vector<int64_t> periods;
  for (const auto& [step, ns] : slowest_) periods.push_back(ns);
  return replay::medianNs(periods);
}

}  // namespace ringx::replay
