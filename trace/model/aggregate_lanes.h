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
// A rank with only collective tracks (RankData::summaryOnly: a live attach that
// follows it through its SUMMARY stream) counts in its group's comm share and
// marks but not in the compute share, whose denominator is the group's ranks
// that sent compute (computeRanks()); a group with none has no compute share.
//
// Busy time is binned once, at load, into buckets per group and kind (only
// the top level of each track: nested spans are inside their parents), and
// kept as prefix sums, so any column of any zoom is O(1): the integral of the
// bucketed busy time over the column's extent. Zoomed in below a bucket the
// shading is the bucket's average; the ranks' own rows, one click away, are
// exact. The buckets take a fixed budget (kBudgetBytes) whatever the trace's
// size: ranks are added one at a time (a trace too big for memory streams
// through, loader.h), so the bucket width starts small and doubles, merging
// neighbours, whenever the time covered outgrows the budget.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "trace/format/collective_key.h"
#include "trace/model/trace_store.h"

namespace ringx::model {

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
  static constexpr size_t kBudgetBytes = 64u << 20;
  static constexpr int kBlockRanks = 8;  // ranks per group when the trace names no hosts

  // Groups of ranks given (rank, host) pairs: by host, or in blocks of
  // kBlockRanks when fewer than two host names appear.
  static std::vector<RankGroup> groupRanks(std::vector<std::pair<int32_t, std::string>> ranks);

  AggregateLanes() = default;
  // From a store: groups its ranks, adds every rank, finishes.
  explicit AggregateLanes(const TraceStore& store);
  // To be filled rank by rank (a trace opened without holding its events):
  // add() each rank (from any thread), then finish().
  explicit AggregateLanes(std::vector<RankGroup> groups);
  void add(const TraceStore& store, const RankData& rank);
  void finish();

  const std::vector<RankGroup>& groups() const { return groups_; }
  // The group of `rank` (RankData::rank), or -1.
  int groupOf(int32_t rank) const;
  // The group's ranks whose compute is known (not RankData::summaryOnly).
  int computeRanks(size_t group) const {
    return int(groups_[group].ranks.size()) - summaryRanks_[group];
  }
  // Busy share (0 to 1) of the group's ranks over [t0, t1) for each of `columns`
  // equal columns (for kCompute, of its computeRanks(); all 0 when it has none).
  void busyShares(size_t group, Kind kind, int64_t t0, int64_t t1, int columns, float* out) const;
  // The store's generation when built (stale when the store has changed since),
  // unless built from the files, which holds for the store whatever it loads.
  uint64_t generation() const { return generation_; }
  bool fromFiles() const { return fromFiles_; }
  void setFromFiles() { fromFiles_ = true; }
  int64_t bucketNs() const { return widthNs_; }
  size_t buckets() const { return length_; }

 private:
  struct Arrivals {
    int64_t first = 0;
    int64_t last = 0;
    int32_t lastRank = 0;
    uint32_t name = 0;
    int count = 0;
  };
  friend class TraceIndexCodec;  // trace_index.cc saves and reads the buckets
  double integral(size_t group, Kind kind, int64_t t) const;
  // Makes room for absolute bucket indexes [lo, hi]: grows the window, or
  // doubles the bucket width until it fits (callers hold mutex_).
  void cover(int64_t lo, int64_t hi);

  std::vector<RankGroup> groups_;
  std::vector<std::pair<int32_t, int32_t>> groupOfRank_;  // (rank, group), sorted
  // Buckets: absolute index i covers [i * widthNs_, (i + 1) * widthNs_); the
  // window holds [first_, first_ + length_). While building, series_ holds each
  // bucket's busy ns; finish() turns them into prefix sums (length_ + 1 each).
  int64_t widthNs_ = 1024;
  int64_t first_ = 0;
  size_t length_ = 0;
  size_t capacity_ = 0;
  std::vector<std::vector<double>> series_;  // [group * kKinds + kind]
  std::vector<int> summaryRanks_;            // per group: ranks added with summaryOnly
  std::unordered_map<trace::CollectiveKey, Arrivals, trace::CollectiveKeyHash> collectives_;
  std::mutex mutex_;
  uint64_t generation_ = 0;
  bool fromFiles_ = false;
};

}  // namespace ringx::model
