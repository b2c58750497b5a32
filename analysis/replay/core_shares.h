// The host's cores as a shared resource: how much of a core a rank's compute got, moment by
// moment, from which threads of the job were runnable then.
//
// Every rank's compute threads are runnable while it computes; its communication thread while
// a collective runs on the ring (from when every rank has issued it to its end: before, a rank
// that issued early waits for the others asleep, transport/doorbell.h). Each runnable thread
// gets min(1, cores / runnable) of a core (the kernel's fair share; the ranks spread evenly
// over the hosts). Compute that ran at share s for dt did s dt of work and lost (1 - s) dt.
//
// The same load answers both directions: from a recording's timelines, how much of each
// stretch of compute was lost to sharing (its work is the rest); from a replay's timelines,
// how long a stretch of that much work takes where it runs now. A recorded rank may stand for
// several (another world size on the same hosts): each of its threads counts that many times.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "analysis/replay/cost_model.h"

namespace ringx::replay {

// Time lost to sharing per ns of compute over [begin, end).
struct LossRate {
  int64_t begin = 0, end = 0;
  double rate = 0;
};
// The ns lost over [begin, end) at those rates (none outside them).
double lostIn(const std::vector<LossRate>& rates, int64_t begin, int64_t end);

class CoreShares {
 public:
  using Intervals = std::vector<std::pair<int64_t, int64_t>>;  // [begin, end)
  // `compute`: per rank, when it computed; `collectives`: when each ran on the ring (every
  // rank's communication thread busy). `ranksPerRank`: how many ranks each stands for (>= 1).
  // Cores unknown (host.cores <= 0): every share is 1, nothing is lost.
  CoreShares(const HostCores& host, double ranksPerRank, const std::vector<Intervals>& compute,
             const Intervals& collectives);
  // `ranksPerRank` for `recorded` ranks of a world of `worldSize` (the ranks alike: rank 0
  // alone, as ringx.ddp's bucket_cap_mb="auto" records itself, stands for all); 1 where either
  // is unknown.
  static double ranksPerRecordedRank(int64_t worldSize, size_t recorded);

  // Where a rank is asked for, kRing asks for the ring's threads: every rank's communication
  // thread while a collective runs on the ring.
  static constexpr size_t kRing = static_cast<size_t>(-1);
  // The time `rank` lost to sharing while computing over [begin, end).
  double lostNs(size_t rank, int64_t begin, int64_t end) const;
  // The same as rates over [begin, end), each interval shifted by -origin.
  std::vector<LossRate> lossRates(size_t rank, int64_t begin, int64_t end, int64_t origin) const;
  // How long `rank` takes for `work` ns of a core's work from `begin`, computing throughout;
  // past the last recorded moment, alone with its own threads.
  int64_t durationNs(size_t rank, int64_t begin, double work) const;
  // The share of the ring's time over `ring` (intervals) that its threads lost to sharing.
  double ringLossShare(const Intervals& ring) const;

 private:
  // The share of a core `rank`'s compute thread gets in segment i (it computes there), or the
  // ring's threads (kRing: a collective runs there).
  double share(size_t rank, size_t i) const;
  double shareAlone(size_t rank) const;
  // The share in the segment that ends at at_[i] (before the first and after the last: alone).
  double shareBefore(size_t rank, size_t i) const;

  HostCores host_;
  double copies_ = 1;
  size_t ranks_ = 0;
  std::vector<int64_t> at_;  // segment i: [at_[i], at_[i + 1]); the last one is open
  std::vector<uint32_t> computing_, running_;  // per segment: ranks computing, collectives
  std::vector<std::vector<uint8_t>> own_;      // [segment][rank]: that rank computing
};

}  // namespace ringx::replay
