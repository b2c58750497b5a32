// Aggregate lanes (see aggregate_lanes.h).
#include "trace/model/aggregate_lanes.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "base/error.h"
#include "trace/format/schema.h"

namespace ringx::model {
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
      // Engine phases, buckets, steps: they contain compute and comm. Device lanes: the GPU
      // side of collectives the comm lanes already count.
      return -1;
  }
}

}  // namespace

std::vector<RankGroup> AggregateLanes::groupRanks(
    std::vector<std::pair<int32_t, std::string>> ranks) {
  std::sort(ranks.begin(), ranks.end());
  std::vector<RankGroup> groups;
  std::unordered_map<std::string, size_t> hostGroup;
  for (const auto& [rank, host] : ranks) hostGroup.emplace(host, hostGroup.size());
  if (hostGroup.size() > 1) {
    // Hosts in the order of their lowest rank.
    groups.resize(hostGroup.size());
    for (const auto& [rank, host] : ranks) {
      RankGroup& g = groups[hostGroup[host]];
      g.label = host.empty() ? "(no host)" : host;
      g.ranks.push_back(rank);
    }
    return groups;
  }
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i % kBlockRanks == 0) groups.emplace_back();
    groups.back().ranks.push_back(ranks[i].first);
  }
  for (RankGroup& g : groups) g.label = strCat("ranks ", g.ranks.front(), "-", g.ranks.back());
  return groups;
}

AggregateLanes::AggregateLanes(std::vector<RankGroup> groups) : groups_(std::move(groups)) {
  for (size_t g = 0; g < groups_.size(); ++g)
    for (int32_t r : groups_[g].ranks) groupOfRank_.emplace_back(r, int32_t(g));
  std::sort(groupOfRank_.begin(), groupOfRank_.end());
  capacity_ = std::clamp<size_t>(
      kBudgetBytes / sizeof(double) / std::max<size_t>(groups_.size() * kKinds, 1), 256, 65536);
  series_.resize(groups_.size() * kKinds);
  summaryRanks_.assign(groups_.size(), 0);
}

AggregateLanes::AggregateLanes(const TraceStore& store)
    : AggregateLanes([&] {
        std::vector<std::pair<int32_t, std::string>> ranks;
        for (const RankData& r : store.ranks()) ranks.emplace_back(r.rank, r.host);
        return groupRanks(std::move(ranks));
      }()) {
  for (const RankData& r : store.ranks()) add(store, r);
  finish();
  generation_ = store.generation();
}

void AggregateLanes::cover(int64_t lo, int64_t hi) {
  if (length_ == 0) {
    first_ = lo;
    length_ = 1;
    for (auto& s : series_) s.assign(1, 0.0);
  }
  for (;;) {
    const int64_t newFirst = std::min(first_, lo);
    const int64_t newEnd = std::max(first_ + int64_t(length_), hi + 1);
    if (size_t(newEnd - newFirst) <= capacity_) {
      const size_t front = size_t(first_ - newFirst), back = size_t(newEnd - first_) - length_;
      for (auto& s : series_) {
        s.insert(s.begin(), front, 0.0);
        s.insert(s.end(), back, 0.0);
      }
      first_ = newFirst;
      length_ = size_t(newEnd - newFirst);
      return;
    }
    // Twice as wide: bucket i goes into i / 2 (times are positive, so this is floor).
    const int64_t halvedFirst = first_ / 2;
    const size_t halvedLength = size_t((first_ + int64_t(length_) - 1) / 2 - halvedFirst + 1);
    for (auto& s : series_) {
      std::vector<double> merged(halvedLength, 0.0);
      for (size_t i = 0; i < length_; ++i)
        merged[size_t((first_ + int64_t(i)) / 2 - halvedFirst)] += s[i];
      s.swap(merged);
    }
    first_ = halvedFirst;
    length_ = halvedLength;
    widthNs_ *= 2;
    lo /= 2;
    hi /= 2;
  }
}

void AggregateLanes::add(const TraceStore& store, const RankData& rank) {
  const int group = groupOf(rank.rank);
  if (group < 0) return;
  const uint32_t seqKey = store.strings().find("seq");
  const uint32_t groupKey = store.strings().find("group");
  // Collectives on other producers' lanes: a profiler trace's NCCL kernels, on a GPU stream,
  // are spans of this category (chrome_nccl.cc), as a comm lane's are.
  const int collective = store.findCategory(trace::categoryName(trace::Category::kCollective));
  auto isCollective = [&](const Track& track, const Span& s) {
    return track.kind == TrackKind::kComm ||
           (track.kind == TrackKind::kOther && s.category == collective);
  };
  std::unordered_map<trace::CollectiveKey, Arrivals, trace::CollectiveKeyHash>
      seen;  // this rank's collectives
  for (const Track& track : rank.tracks) {
    if (seqKey == 0 ||
        (track.kind != TrackKind::kComm && (track.kind != TrackKind::kOther || collective < 0))) {
      continue;
    }
    // The group of a collective without a "group" argument (trace::collectiveGroup).
    const std::string_view trackName = store.str(track.name);
    const std::string_view trackGroup = trace::collectiveGroup({}, trackName);
    const uint32_t trackGroupId = store.strings().find(trackGroup);
    for (const auto& level : track.levels)
      for (const Span& s : level) {
        if (!isCollective(track, s)) continue;
        const ArgList args(rank, s);
        const ArgValue* seq = args.find(seqKey);
        if (!seq || seq->kind != ArgKind::kInt) continue;
        const ArgValue* g = args.find(groupKey);
        const uint32_t groupArg = g && g->kind == ArgKind::kString ? g->stringId : 0;
        const std::string_view group = trace::collectiveGroup(store.str(groupArg), trackName);
        const auto key = trace::collectiveKeyOf(
            store.str(s.name), seq->intValue, group,
            [&](std::string_view name) { return name == trackGroup ? trackGroupId : groupArg; });
        if (key) seen.emplace(*key, Arrivals{s.begin, s.begin, rank.rank, s.name, 1});
      }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (rank.summaryOnly) ++summaryRanks_[size_t(group)];
  for (const Track& track : rank.tracks) {
    const int kind = kindOf(track.kind);
    if (kind < 0 || track.levels.empty() || track.levels[0].empty()) continue;
    const std::vector<Span>& spans = track.levels[0];
    cover(spans.front().begin / widthNs_,
          std::max(spans.back().end - 1, spans.front().begin) / widthNs_);
    for (const Span& s : spans) {
      const Kind spanKind = isCollective(track, s) ? kComm : Kind(kind);
      std::vector<double>& bins = series_[size_t(group) * kKinds + size_t(spanKind)];
      int64_t t = s.begin;
      while (t < s.end) {
        const int64_t index = t / widthNs_;
        const int64_t until = std::min(s.end, (index + 1) * widthNs_);
        bins[size_t(index - first_)] += double(until - t);
        t = until;
      }
    }
  }
  for (const auto& [key, mine] : seen) {
    Arrivals& a = collectives_[key];
    if (a.count == 0) {
      a = mine;
      continue;
    }
    ++a.count;
    a.first = std::min(a.first, mine.first);
    if (mine.last > a.last || (mine.last == a.last && mine.lastRank > a.lastRank)) {
      a.last = mine.last;
      a.lastRank = mine.lastRank;
    }
  }
}

void AggregateLanes::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (length_ == 0) cover(0, 0);
  for (std::vector<double>& s : series_) {
    // Prefix sums: p[i] = busy ns of buckets [0, i).
    std::vector<double> p(length_ + 1, 0.0);
    for (size_t i = 0; i < length_; ++i) p[i + 1] = p[i] + s[i];
    s.swap(p);
  }
  for (const auto& [key, a] : collectives_) {
    if (a.count < 2) continue;
    const int g = groupOf(a.lastRank);
    if (g < 0) continue;
    groups_[size_t(g)].marks.push_back(
        StragglerMark{a.last, a.lastRank, a.name, key.group, key.seq, a.last - a.first});
  }
  collectives_.clear();
  for (RankGroup& g : groups_)
    std::sort(g.marks.begin(), g.marks.end(),
              [](const StragglerMark& a, const StragglerMark& b) { return a.timeNs < b.timeNs; });
}

int AggregateLanes::groupOf(int32_t rank) const {
  auto it = std::lower_bound(groupOfRank_.begin(), groupOfRank_.end(), std::make_pair(rank, -1));
  return it != groupOfRank_.end() && it->first == rank ? it->second : -1;
}

double AggregateLanes::integral(size_t group, Kind kind, int64_t t) const {
  const std::vector<double>& p = series_[group * kKinds + size_t(kind)];
  const double x =
      std::clamp(double(t - first_ * widthNs_) / double(widthNs_), 0.0, double(length_));
  const size_t i = std::min(size_t(x), length_ - 1);
  return p[i] + (x - double(i)) * (p[i + 1] - p[i]);
}

void AggregateLanes::busyShares(size_t group, Kind kind, int64_t t0, int64_t t1, int columns,
                                float* out) const {
  if (columns <= 0) return;
  const double width = double(t1 - t0) / columns;
  const double ranks =
      kind == kCompute ? double(computeRanks(group)) : double(groups_[group].ranks.size());
  if (ranks <= 0) {
    std::fill(out, out + columns, 0.0f);
    return;
  }
  double previous = integral(group, kind, t0);
  for (int c = 0; c < columns; ++c) {
    const double next = integral(group, kind, t0 + int64_t(width * (c + 1)));
    out[c] = width > 0 ? float(std::clamp((next - previous) / (ranks * width), 0.0, 1.0)) : 0.0f;
    previous = next;
  }
}

}  // namespace ringx::model
