// Clock alignment: mapping each rank's steady-clock times onto rank 0's clock.
//
// Ranks on different hosts have unrelated steady clocks, and clocks drift apart
// by some microseconds per second. While the job runs, each rank measures its
// offset to rank 0 now and then (ClockSync records: at local time t, rank 0's
// clock read t + offset, give or take the uncertainty). A ClockModel turns those
// samples into a function: between two samples the offset is interpolated
// linearly (drift is close to linear over seconds); before the first sample and
// after the last it stays at that sample's offset, since extrapolating a slope
// measured over a short interval amplifies its error.
//
// Rank 0 is the reference (offset 0). A rank without samples gets offset 0 and
// is flagged unaligned: right when it shares rank 0's host (one steady clock),
// unknown otherwise. The viewer and the exporter both use this, so a collective
// lines up the same way in both.
#pragma once

#include <cstdint>
#include <vector>

#include "trace/format/codec.h"

namespace ringx::trace {

class ClockModel {
 public:
  // The identity: offset 0, no samples, not aligned (unless made the reference).
  ClockModel() = default;
  // From samples in any order; of samples taken at the same local time, the one
  // with the smallest uncertainty is kept.
  explicit ClockModel(std::vector<ClockSync> samples);
  // Rank 0's model: offset 0 by definition, aligned, its samples ignored.
  static ClockModel reference();
  // The model for a rank's trace (reference() for rank 0).
  static ClockModel forRank(const RankTrace& trace);

  // rank 0's clock at this rank's `localNs`.
  int64_t align(int64_t localNs) const { return localNs + offsetAt(localNs); }
  // Offset added to local time at `localNs`.
  int64_t offsetAt(int64_t localNs) const;
  // The uncertainty of offsetAt(localNs): interpolated like the offset. Drift
  // beyond the last sample is not included (no model of it is measured).
  int64_t uncertaintyAt(int64_t localNs) const;
  // The largest uncertainty of any sample used (0 for the reference or no samples).
  int64_t maxUncertaintyNs() const;

  // True for the reference and for models with at least one sample.
  bool aligned() const { return reference_ || !samples_.empty(); }
  bool isReference() const { return reference_; }
  // The samples used, sorted by localNs, one per local time.
  const std::vector<ClockSync>& samples() const { return samples_; }

 private:
  // Index of the last sample at or before localNs, or -1; samples_ is not empty.
  long segment(int64_t localNs) const;

  std::vector<ClockSync> samples_;
  bool reference_ = false;
};

// One model per trace, in the same order.
std::vector<ClockModel> clockModels(const std::vector<RankTrace>& ranks);

}  // namespace ringx::trace
