// Aggregate lanes (see aggregate_lanes.h).
#include "viewer/model/aggregate_lanes.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "analysis/figures.h"
#include "backend/common/error.h"

namespace ringx::viewer {
namespace {

int kindOf(TrackKind kind) {
  switch (kind) {
    case TrackKind::kComm:
      return AggregateLanes::kComm;
    case TrackKind::kCompute:
    case TrackKind::kUser:
    case TrackKind::kOther:
      return AggregateLanes::kCompute;
    default:
      return -1;  // engine phases, buckets, steps: they contain compute and comm
  }
}

// A collective's first and last arrival, while matching.
struct Arrivals {
  int64_t first = 0;
  int64_t last = 0;
  int32_t lastRank = 0;
  uint32_t name = 0;
  int count = 0;
};

}  // namespace

AggregateLanes::AggregateLanes(const TraceStore& store) : generation_(store.generation()) {
  const std::vector<RankData>& ranks = store.ranks();
  // Groups: hosts, in the order of their first rank; blocks of ranks without them.
  std::unordered_map<std::string, int32_t> hostGroup;
  for (const RankData& r : ranks) hostGroup.emplace(r.host, int32_t(hostGroup.size()));
  const bool byHost = hostGroup.size() > 1;
  groupOfRank_.resize(ranks.size());
  rankIds_.resize(ranks.size());
  if (byHost) {
    groups_.resize(hostGroup.size());
    for (size_t i = 0; i < ranks.size(); ++i) {
      const int32_t g = hostGroup[ranks[i].host];
      groups_[size_t(g)].label = ranks[i].host.empty() ? "(no host)" : ranks[i].host;
      groups_[size_t(g)].ranks.push_back(ranks[i].rank);
      groupOfRank_[i] = g;
    }
  } else {
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (i % kBlockRanks == 0) groups_.emplace_back();
      groups_.back().ranks.push_back(ranks[i].rank);
      groupOfRank_[i] = int32_t(groups_.size() - 1);
    }
    for (RankGroup& g : groups_) g.label = strCat("ranks ", g.ranks.front(), "-", g.ranks.back());
  }
  for (size_t i = 0; i < ranks.size(); ++i) rankIds_[i] = ranks[i].rank;

  // Buckets: as many as the budget allows for every group and kind.
  beginNs_ = store.beginNs();
  const int64_t span = std::max<int64_t>(store.endNs() - store.beginNs(), 1);
  const size_t perSeries =
      kBudgetBytes / sizeof(double) / std::max<size_t>(groups_.size() * kKinds, 1);
  buckets_ = std::clamp<size_t>(perSeries, 256, 65536);
  bucketNs_ = std::max<int64_t>(1, (span + int64_t(buckets_) - 1) / int64_t(buckets_));
  prefix_.assign(groups_.size() * kKinds, std::vector<double>(buckets_ + 1, 0.0));

  const uint32_t seqKey = store.strings().find("seq");
  const uint32_t groupKey = store.strings().find("group");
  std::unordered_map<uint64_t, Arrivals> collectives;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankData& rank = ranks[i];
    for (const Track& track : rank.tracks) {
      const int kind = kindOf(track.kind);
      if (kind < 0 || track.levels.empty()) continue;
      std::vector<double>& bins = prefix_[size_t(groupOfRank_[i]) * kKinds + size_t(kind)];
      // Bucket i's busy time goes to bins[i + 1]; the prefix sums come after.
      for (const Span& s : track.levels[0]) {
        int64_t t = s.begin;
        while (t < s.end) {
          const int64_t b = std::min<int64_t>((t - beginNs_) / bucketNs_, int64_t(buckets_) - 1);
          const int64_t bucketEnd = beginNs_ + (b + 1) * bucketNs_;
          const int64_t until = std::min(s.end, bucketEnd);
          bins[size_t(b) + 1] += double(until - t);
          if (until == t) break;  // the trace's last nanosecond
          t = until;
        }
      }
      if (track.kind != TrackKind::kComm || seqKey == 0) continue;
      // The group of a collective: its "group" argument, else the track's suffix.
      const std::string_view trackName = store.str(track.name);
      const uint32_t trackGroup = store.strings().find(trackName.substr(trackName.find(':') + 1));
      for (const auto& level : track.levels)
        for (const Span& s : level) {
          const ArgList args(rank, s);
          const ArgValue* seq = args.find(seqKey);
          if (!seq || seq->kind != ArgKind::kInt || analysis::isPointToPoint(store.str(s.name)))
            continue;
          const ArgValue* group = args.find(groupKey);
          const uint32_t g =
              group && group->kind == ArgKind::kString ? group->stringId : trackGroup;
          Arrivals& a = collectives[uint64_t(g) << 40 ^ uint64_t(seq->intValue)];
          if (a.count++ == 0) {
            a = Arrivals{s.begin, s.begin, rank.rank, s.name, 1};
          } else {
            a.first = std::min(a.first, s.begin);
            if (s.begin > a.last || (s.begin == a.last && rank.rank > a.lastRank)) {
              a.last = s.begin;
              a.lastRank = rank.rank;
            }
          }
        }
    }
  }
  for (std::vector<double>& p : prefix_)
    for (size_t b = 1; b <= buckets_; ++b) p[b] += p[b - 1];
  for (const auto& [key, a] : collectives) {
    if (a.count < 2) continue;
    const int g = groupOf(a.lastRank);
    if (g < 0) continue;
    groups_[size_t(g)].marks.push_back(
        StragglerMark{a.last, a.lastRank, a.name, uint32_t(key >> 40),
                      int64_t(key & ((uint64_t(1) << 40) - 1)), a.last - a.first});
  }
  for (RankGroup& g : groups_)
    std::sort(g.marks.begin(), g.marks.end(),
              [](const StragglerMark& a, const StragglerMark& b) { return a.timeNs < b.timeNs; });
}

int AggregateLanes::groupOf(int32_t rank) const {
  auto it = std::lower_bound(rankIds_.begin(), rankIds_.end(), rank);
  if (it == rankIds_.end() || *it != rank) return -1;
  return groupOfRank_[size_t(it - rankIds_.begin())];
}

double AggregateLanes::integral(size_t group, Kind kind, int64_t t) const {
  const std::vector<double>& p = prefix_[group * kKinds + size_t(kind)];
  const double x = std::clamp(double(t - beginNs_) / double(bucketNs_), 0.0, double(buckets_));
  const size_t i = std::min(size_t(x), buckets_ - 1);
  return p[i] + (x - double(i)) * (p[i + 1] - p[i]);
}

void AggregateLanes::busyShares(size_t group, Kind kind, int64_t t0, int64_t t1, int columns,
                                float* out) const {
  if (columns <= 0) return;
  const double width = double(t1 - t0) / columns;
  const double ranks = double(groups_[group].ranks.size());
  double previous = integral(group, kind, t0);
  for (int c = 0; c < columns; ++c) {
    const double next = integral(group, kind, t0 + int64_t(width * (c + 1)));
    out[c] = width > 0 ? float(std::clamp((next - previous) / (ranks * width), 0.0, 1.0)) : 0.0f;
    previous = next;
  }
}

}  // namespace ringx::viewer
