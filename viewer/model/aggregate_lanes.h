// Aggregate lanes: a thousand-rank trace drawn as one lane per host (or per
// block of ranks where the trace names no hosts), each expanding into its ranks
// on demand. Two rows per lane:
//
//   compute  the share of the group's rank-time its compute tracks were busy,
//   comm     the same for its collective tracks (comm:<group>),
//
// per pixel column, shaded like a folded block; and straggler marks on the
// comm row where a rank of the group was the last to arrive at a collective
// (matched by group and seq, point-to-point excluded, as everywhere else).
//
// Busy time is binned once, at load, into a few thousand buckets over the
// trace per group and kind (only the top level of each track: nested spans
// are inside their parents), and kept as prefix sums, so any column of any
// zoom is O(1): the integral of the bucketed busy time over the column's
// extent. Zoomed in below a bucket the shading is the bucket's average; the
// ranks' own rows, one click away, are exact. The buckets take a fixed budget
// (kBudgetBytes) whatever the trace's size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "viewer/model/trace_store.h"

namespace ringx::viewer {

// Above this many ranks the timeline shows aggregate lanes (ViewerSettings).
inline constexpr size_t kAggregateAboveRanks = 32;

// The last rank to arrive at a collective, at its arrival.
struct StragglerMark {
  int64_t timeNs = 0;  // its begin (aligned)
  int32_t rank = 0;
  uint32_t name = 0;   // the op (store string id)
  uint32_t group = 0;  // the process group (store string id)
  int64_t seq = 0;
  int64_t skewNs = 0;  // last begin minus first begin
};

struct RankGroup {
  std::string label;                 // the host, or "ranks 0-7"
  std::vector<int32_t> ranks;        // RankData::rank, ascending
  std::vector<StragglerMark> marks;  // sorted by time
};

class AggregateLanes {
 public:
  enum Kind { kCompute = 0, kComm = 1 };
  static constexpr int kKinds = 2;
  static constexpr size_t kBudgetBytes = 32u << 20;
  static constexpr int kBlockRanks = 8;  // ranks per group when the trace names no hosts

  AggregateLanes() = default;
  // Groups the store's ranks by host (blocks of kBlockRanks when it has only one
  // host name), bins their busy time and finds each collective's last arrival.
  explicit AggregateLanes(const TraceStore& store);

  const std::vector<RankGroup>& groups() const { return groups_; }
  // The group of `rank` (RankData::rank), or -1.
  int groupOf(int32_t rank) const;
  // Busy share (0 to 1) of the group's ranks over [t0, t1) for each of `columns`
  // equal columns.
  void busyShares(size_t group, Kind kind, int64_t t0, int64_t t1, int columns, float* out) const;
  // The store's generation when built (stale when the store has changed since).
  uint64_t generation() const { return generation_; }
  int64_t bucketNs() const { return bucketNs_; }
  size_t buckets() const { return buckets_; }

 private:
  double integral(size_t group, Kind kind, int64_t t) const;

  std::vector<RankGroup> groups_;
  std::vector<int32_t> groupOfRank_;  // by position in the store's ranks
  std::vector<int32_t> rankIds_;      // RankData::rank by position
  int64_t beginNs_ = 0;
  int64_t bucketNs_ = 1;
  size_t buckets_ = 0;
  // [group][kind] -> prefix[i] = busy ns of buckets [0, i), summed over the group's ranks.
  std::vector<std::vector<double>> prefix_;
  uint64_t generation_ = 0;
};

}  // namespace ringx::viewer
