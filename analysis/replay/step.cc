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

std::vector<int64_t> stepTimesNs(const std::vector<std::vector<int64_t>>& periods) {
  size_t steps = 0;
  for (const std::vector<int64_t>& rank : periods) steps = std::max(steps, rank.size());
  std::vector<int64_t> out(steps, 0);
  for (const std::vector<int64_t>& rank : periods) {
    for (size_t k = 0; k < rank.size(); ++k) {
      if (rank[k] < 0) continue;
      const bool pair = rank.size() >= kPairedStepsFrom && k + 1 < rank.size() && rank[k + 1] >= 0;
      out[k] = std::max(out[k], pair ? (rank[k] + rank[k + 1] + 1) / 2 : rank[k]);
    }
  }
  return out;
}

void RecordedSteps::add(int32_t rank, int64_t step, int64_t forwardBeginNs,
                        int64_t nextForwardBeginNs) {
  if (forwardBeginNs <= 0 || nextForwardBeginNs <= forwardBeginNs) return;
  periods_[step][rank] = nextForwardBeginNs - forwardBeginNs;
}

int64_t RecordedSteps::medianNs() const {
  // periods[rank][step] over the steps any rank recorded, in order.
  std::map<int32_t, std::vector<int64_t>> byRank;
  for (const auto& [step, ranks] : periods_) {
    for (const auto& [rank, ns] : ranks) byRank[rank];
  }
  for (const auto& [step, ranks] : periods_) {
    for (auto& [rank, row] : byRank) {
      const auto it = ranks.find(rank);
      row.push_back(it == ranks.end() ? -1 : it->second);
    }
  }
  std::vector<std::vector<int64_t>> periods;
  for (auto& [rank, row] : byRank) periods.push_back(std::move(row));
  return replay::medianNs(stepTimesNs(periods));
}

}  // namespace ringx::replay
