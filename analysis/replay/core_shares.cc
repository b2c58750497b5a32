// The host's cores shared by the job's runnable threads (see core_shares.h).
#include "analysis/replay/core_shares.h"

#include <algorithm>
#include <cmath>

#include "analysis/replay/program.h"

namespace ringx::replay {

CoreShares::CoreShares(const HostCores& host, double ranksPerRank,
                       const std::vector<Intervals>& compute, const Intervals& collectives)
    : host_(host), copies_(ranksPerRank > 0 ? ranksPerRank : 1.0), ranks_(compute.size()) {
  if (host_.cores <= 0) return;
  // A sweep over every begin and end: +1 / -1 per rank computing (its own intervals merged)
  // and per collective running.
  std::vector<std::tuple<int64_t, int, size_t>> events;  // time, delta, rank (npos: collective)
  const size_t collective = static_cast<size_t>(-1);
  for (size_t r = 0; r < compute.size(); ++r) {
    for (const auto& [b, e] : mergeIntervals(compute[r])) {
      events.emplace_back(b, 1, r);
      events.emplace_back(e, -1, r);
    }
  }
  for (const auto& [b, e] : collectives) {
    if (e <= b) continue;
    events.emplace_back(b, 1, collective);
    events.emplace_back(e, -1, collective);
  }
  std::sort(events.begin(), events.end());
  std::vector<uint8_t> own(ranks_, 0);
  int64_t computing = 0, running = 0;
  for (size_t i = 0; i < events.size();) {
    const int64_t t = std::get<0>(events[i]);
    for (; i < events.size() && std::get<0>(events[i]) == t; ++i) {
      const auto& [at, delta, r] = events[i];
      if (r == collective) {
        running += delta;
      } else {
        computing += delta;
        own[r] = delta > 0;
      }
    }
    at_.push_back(t);
    computing_.push_back(static_cast<uint32_t>(std::max<int64_t>(0, computing)));
    running_.push_back(static_cast<uint32_t>(std::max<int64_t>(0, running)));
    own_.push_back(own);
  }
}

double CoreShares::share(size_t rank, size_t i) const {
  const double threads = static_cast<double>(std::max<int64_t>(1, host_.threadsPerRank));
  const double hosts = static_cast<double>(std::max<int64_t>(1, host_.hosts));
  const double ranks = static_cast<double>(ranks_);
  // The ring's threads: every rank's, while a collective runs (it does here, whatever the
  // timelines it was given say); a rank's compute: its own threads with the others'.
  const double runnable = rank == kRing ? copies_ *
                                              (threads * static_cast<double>(computing_[i]) +
                                               ranks * std::max<double>(1, running_[i])) /
                                              hosts
                                        : copies_ *
                                              (threads * (static_cast<double>(computing_[i]) -
                                                          (rank < ranks_ && own_[i][rank]) + 1) +
                                               ranks * static_cast<double>(running_[i])) /
                                              hosts;
  return std::min(1.0, host_.cores / runnable);
}

double CoreShares::shareAlone(size_t rank) const {
  const double threads = rank == kRing
                             ? static_cast<double>(ranks_)
                             : static_cast<double>(std::max<int64_t>(1, host_.threadsPerRank));
  return std::min(1.0, host_.cores * static_cast<double>(std::max<int64_t>(1, host_.hosts)) /
                           (copies_ * threads));
}

double CoreShares::ranksPerRecordedRank(int64_t worldSize, size_t recorded) {
  return worldSize > 0 && recorded > 0
             ? static_cast<double>(worldSize) / static_cast<double>(recorded)
             : 1.0;
}

double CoreShares::shareBefore(size_t rank, size_t i) const {
  return i == 0 || i >= at_.size() ? shareAlone(rank) : share(rank, i - 1);
}

double CoreShares::ringLossShare(const Intervals& ring) const {
  double ns = 0, lost = 0;
  for (const auto& [b, e] : ring) {
    ns += static_cast<double>(e - b);
    lost += lostNs(kRing, b, e);
  }
  return ns > 0 ? lost / ns : 0;
}

double lostIn(const std::vector<LossRate>& rates, int64_t begin, int64_t end) {
  double lost = 0;
  for (const LossRate& x : rates) {
    lost += x.rate * static_cast<double>(
                         std::max<int64_t>(0, std::min(end, x.end) - std::max(begin, x.begin)));
  }
  return lost;
}

std::vector<LossRate> CoreShares::lossRates(size_t rank, int64_t begin, int64_t end,
                                            int64_t origin) const {
  std::vector<LossRate> out;
  if (host_.cores <= 0) return out;
  // Segment i covers [at_[i], at_[i + 1]); before the first and after the last, the rank is
  // alone.
  size_t i = static_cast<size_t>(std::upper_bound(at_.begin(), at_.end(), begin) - at_.begin());
  int64_t t = begin;
  while (t < end) {
    const int64_t next = i < at_.size() ? std::min(end, at_[i]) : end;
    const double s = shareBefore(rank, i);
    if (s < 1 && next > t) {
      if (!out.empty() && out.back().end == t - origin && out.back().rate == 1 - s) {
        out.back().end = next - origin;
      } else {
        out.push_back({t - origin, next - origin, 1 - s});
      }
    }
    t = next;
    ++i;
  }
  return out;
}

double CoreShares::lostNs(size_t rank, int64_t begin, int64_t end) const {
  return lostIn(lossRates(rank, begin, end, 0), begin, end);
}

int64_t CoreShares::durationNs(size_t rank, int64_t begin, double work) const {
  if (work <= 0) return 0;
  if (host_.cores <= 0) return std::llround(work);
  size_t i = static_cast<size_t>(std::upper_bound(at_.begin(), at_.end(), begin) - at_.begin());
  int64_t t = begin;
  for (;;) {
    const double s = shareBefore(rank, i);
    if (i >= at_.size()) return t - begin + std::llround(work / s);
    const double can = s * static_cast<double>(at_[i] - t);
    if (can >= work) return t - begin + std::llround(work / s);
    work -= can;
    t = at_[i];
    ++i;
  }
}

}  // namespace ringx::replay
