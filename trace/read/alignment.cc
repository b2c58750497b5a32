// Piecewise-linear clock offsets (see alignment.h for why this shape).
#include "trace/read/alignment.h"

#include <algorithm>
#include <cmath>

namespace ringx::trace {
namespace {

// Linear interpolation between (x0, y0) and (x1, y1) at x, x0 <= x <= x1, x0 < x1.
// In double: the product of an offset change and a time step can exceed int64,
// and the rounding error (well under a nanosecond) is far below any sample's
// uncertainty.
int64_t lerp(int64_t x0, int64_t y0, int64_t x1, int64_t y1, int64_t x) {
  const double t = static_cast<double>(x - x0) / static_cast<double>(x1 - x0);
  return y0 + static_cast<int64_t>(std::llround(t * static_cast<double>(y1 - y0)));
}

}  // namespace

ClockModel::ClockModel(std::vector<ClockSync> samples) : samples_(std::move(samples)) {
  std::sort(samples_.begin(), samples_.end(), [](const ClockSync& a, const ClockSync& b) {
    if (a.localNs != b.localNs) return a.localNs < b.localNs;
    return a.uncertaintyNs < b.uncertaintyNs;
  });
  // Equal local times would make a zero-width segment; keep the best of them.
  samples_.erase(
      std::unique(samples_.begin(), samples_.end(),
                  [](const ClockSync& a, const ClockSync& b) { return a.localNs == b.localNs; }),
      samples_.end());
}

ClockModel ClockModel::reference() {
  ClockModel model;
  model.reference_ = true;
  return model;
}

ClockModel ClockModel::forRank(const RankTrace& trace) {
  if (trace.header.rank == 0) return reference();
  return ClockModel(trace.clockSyncs);
}

long ClockModel::segment(int64_t localNs) const {
  const auto after = std::upper_bound(samples_.begin(), samples_.end(), localNs,
                                      [](int64_t t, const ClockSync& s) { return t < s.localNs; });
  return static_cast<long>(after - samples_.begin()) - 1;
}

int64_t ClockModel::offsetAt(int64_t localNs) const {
  if (samples_.empty() || reference_) return 0;
  const long i = segment(localNs);
  if (i < 0) return samples_.front().offsetNs;
  if (static_cast<size_t>(i) + 1 >= samples_.size()) return samples_.back().offsetNs;
  const ClockSync& a = samples_[i];
  const ClockSync& b = samples_[i + 1];
  return lerp(a.localNs, a.offsetNs, b.localNs, b.offsetNs, localNs);
}

int64_t ClockModel::uncertaintyAt(int64_t localNs) const {
  if (samples_.empty() || reference_) return 0;
  const long i = segment(localNs);
  if (i < 0) return samples_.front().uncertaintyNs;
  if (static_cast<size_t>(i) + 1 >= samples_.size()) return samples_.back().uncertaintyNs;
  const ClockSync& a = samples_[i];
  const ClockSync& b = samples_[i + 1];
  return lerp(a.localNs, a.uncertaintyNs, b.localNs, b.uncertaintyNs, localNs);
}

int64_t ClockModel::maxUncertaintyNs() const {
  if (reference_) return 0;
  int64_t most = 0;
  for (const ClockSync& s : samples_) most = std::max(most, s.uncertaintyNs);
  return most;
}

std::vector<ClockModel> clockModels(const std::vector<RankTrace>& ranks) {
  std::vector<ClockModel> models;
  models.reserve(ranks.size());
  for (const RankTrace& trace : ranks) models.push_back(ClockModel::forRank(trace));
  return models;
}

}  // namespace ringx::trace
