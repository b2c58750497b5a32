// Statistics of an area of the timeline (area_stats.h).
#include "analysis/area_stats.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "analysis/figures.h"
#include "analysis/store_reading.h"
#include "base/error.h"

namespace ringx::analysis {
using namespace store_reading;

const char* areaGroupByName(AreaGroupBy by) {
  switch (by) {
    case AreaGroupBy::kName:
      return "name";
    case AreaGroupBy::kTrack:
      return "track";
    case AreaGroupBy::kRank:
      return "rank";
    case AreaGroupBy::kGroup:
      return "group";
    case AreaGroupBy::kBucketOrUnit:
      return "bucket/unit";
    case AreaGroupBy::kOp:
      return "op";
    case AreaGroupBy::kSizeClass:
      return "size class";
  }
  return "";
}

namespace {

struct AreaAccumulator {
  std::vector<int64_t> durations;
  uint64_t failed = 0;
  int64_t selfNs = 0, bytes = 0;
  std::vector<double> busbw;
};

// Each span's self time on one level: its duration less the spans one level deeper inside it.
std::vector<int64_t> selfTimes(const Track& track, size_t level) {
  const std::vector<Span>& spans = track.levels[level];
  std::vector<int64_t> self(spans.size());
  for (size_t i = 0; i < spans.size(); ++i) self[i] = spans[i].duration();
  if (level + 1 >= track.levels.size()) return self;
  const std::vector<Span>& children = track.levels[level + 1];
  size_t p = 0;
  for (const Span& c : children) {
    while (p < spans.size() && spans[p].end < c.begin) ++p;
    if (p < spans.size() && spans[p].begin <= c.begin && c.end <= spans[p].end) {
      self[p] -= c.duration();
    }
  }
  return self;
}

}  // namespace

std::vector<AreaRow> areaStats(const TraceStore& store, const Area& area, AreaGroupBy by) {
  const Keys keys(store.strings());
  const uint32_t unitKey = store.strings().find(trace::arg::kUnit);
  const uint32_t opKey = store.strings().find(trace::arg::kOp);
  const int64_t worldSize = static_cast<int64_t>(store.ranks().size());
  std::set<std::pair<int32_t, uint32_t>> chosen(area.tracks.begin(), area.tracks.end());
  // Groups by a number, their text made once at the end: a string per span would cost more
  // than the rest at ten million spans. What the number is depends on the grouping: a string
  // id (name, track, group, op, unit), a rank, a bucket, a size class; `tag` tells kinds apart.
  enum Tag : uint64_t { kNone, kString, kNumber, kBucket, kUnitTrack, kBucketTrack };
  auto key = [](Tag tag, int64_t value) {
    return uint64_t{tag} << 56 | (uint64_t(value) & ((uint64_t{1} << 56) - 1));
  };
  std::unordered_map<uint64_t, AreaAccumulator> groups;
  AreaAccumulator* last = nullptr;  // groups[lastKey] (an unordered_map's values stay put)
  uint64_t lastKey = 0;
  uint32_t factorName = 0;  // busBandwidthFactor(factorName, factorGroupSize)
  int64_t factorGroupSize = -1;
  double factor = 0;
  for (const RankData& rank : store.ranks()) {
    for (uint32_t t = 0; t < rank.tracks.size(); ++t) {
      if (!chosen.empty() && !chosen.count({rank.rank, t})) continue;
      const Track& track = rank.tracks[t];
      const std::string_view trackName = store.str(track.name);
      const bool commTrack = trackName.rfind("comm:", 0) == 0;
      const bool unitTrack = trackName.rfind("fsdp:", 0) == 0;
      const bool bucketTrack = trackName.rfind("ddp:bucket", 0) == 0;
      for (size_t l = 0; l < track.levels.size(); ++l) {
        std::vector<int64_t> self;  // only once a span of the level is in the area
        forOverlapping(track.levels[l], area.t0, area.t1, [&](const Span& s, uint32_t index) {
          if (self.empty()) self = selfTimes(track, l);
          const ArgRange args(rank, s);
          const int64_t bytes = args.integer(keys.bytes, -1);
          uint64_t k = 0;
          switch (by) {
            case AreaGroupBy::kName:
              k = key(kString, s.name);
              break;
            case AreaGroupBy::kTrack:
              k = key(kString, track.name);
              break;
            case AreaGroupBy::kRank:
              k = key(kNumber, rank.rank);
              break;
            case AreaGroupBy::kGroup: {
              const uint32_t group = args.string(keys.group);
              k = group ? key(kString, group) : commTrack ? key(kUnitTrack, track.name) : 0;
              break;
            }
            case AreaGroupBy::kBucketOrUnit: {
              const int64_t bucket = args.integer(keys.bucket, -1);
              const uint32_t unit = unitKey ? args.string(unitKey) : 0;
              k = bucket >= 0   ? key(kBucket, bucket)
                  : unit        ? key(kString, unit)
                  : unitTrack   ? key(kUnitTrack, track.name)
                  : bucketTrack ? key(kBucketTrack, track.name)
                                : 0;
              break;
            }
            case AreaGroupBy::kOp: {
              const uint32_t op = opKey ? args.string(opKey) : 0;
              k = key(kString, op ? op : s.name);
              break;
            }
            case AreaGroupBy::kSizeClass:
              k = key(kNumber, sizeClass(bytes));
              break;
          }
          // Neighbouring spans mostly share a group and an op: the last of each is kept.
          if (!last || k != lastKey) {
            last = &groups[k];
            lastKey = k;
          }
          AreaAccumulator& a = *last;
          a.durations.push_back(s.duration());
          a.selfNs += self[index];
          if (s.flags & model::kSpanFailed) ++a.failed;
          if (bytes > 0) {
            a.bytes += bytes;
            const int64_t groupSize = args.integer(keys.groupSize, worldSize);
            if (s.name != factorName || groupSize != factorGroupSize) {
              factorName = s.name;
              factorGroupSize = groupSize;
              factor = busBandwidthFactor(store.str(s.name), groupSize);
            }
            const double bw = busBandwidthWithFactor(factor, bytes, s.duration());
            if (bw > 0) a.busbw.push_back(bw);
          }
        });
      }
    }
  }
  // A group's text.
  auto textOf = [&](uint64_t k) -> std::string {
    const Tag tag = Tag(k >> 56);
    const int64_t raw = int64_t(k & ((uint64_t{1} << 56) - 1));
    const int64_t value = raw >= (int64_t{1} << 55) ? raw - (int64_t{1} << 56) : raw;  // signed
    const std::string_view text = store.str(uint32_t(value));
    switch (tag) {
      case kNone:
        return "(none)";
      case kString:
        return std::string(text);
      case kNumber:
        return by == AreaGroupBy::kRank ? strCat("rank ", value) : sizeClassLabel(int(value));
      case kBucket:
        return strCat("bucket ", value);
      case kUnitTrack:
        // a "comm:<group>" track (grouping by group) or an "fsdp:<unit>" one
        return by == AreaGroupBy::kGroup ? std::string(text.substr(5))
                                         : strCat("unit ", text.substr(5));
      case kBucketTrack:
        return strCat("bucket ", text.substr(10));
    }
    return "";
  };
  std::vector<AreaRow> rows;
  for (auto& [k, a] : groups) {
    AreaRow r;
    r.key = textOf(k);
    r.count = a.durations.size();
    r.failed = a.failed;
    for (int64_t d : a.durations) {
      r.totalNs += d;
      r.maxNs = std::max(r.maxNs, d);
    }
    r.meanNs = r.totalNs / static_cast<int64_t>(r.count);
    std::tie(r.p50Ns, r.p99Ns) = p50p99(a.durations);
    r.selfNs = a.selfNs;
    r.bytes = a.bytes;
    r.busbwGBps = median(a.busbw);
    rows.push_back(std::move(r));
  }
  std::sort(rows.begin(), rows.end(), [](const AreaRow& a, const AreaRow& b) {
    return a.totalNs != b.totalNs ? a.totalNs > b.totalNs : a.key < b.key;
  });
  return rows;
}

namespace {

// f(rank, track index, level, index, span) for the spans named `nameId` (0: all) in the area.
template <typename F>
void forAreaSpans(const TraceStore& store, const Area& area, uint32_t nameId, F&& f) {
  std::set<std::pair<int32_t, uint32_t>> chosen(area.tracks.begin(), area.tracks.end());
  for (const RankData& rank : store.ranks()) {
    for (uint32_t t = 0; t < rank.tracks.size(); ++t) {
      if (!chosen.empty() && !chosen.count({rank.rank, t})) continue;
      const Track& track = rank.tracks[t];
      for (uint32_t l = 0; l < track.levels.size(); ++l) {
        forOverlapping(track.levels[l], area.t0, area.t1, [&](const Span& s, uint32_t index) {
          if (nameId == 0 || s.name == nameId) f(rank, t, l, index, s);
        });
      }
    }
  }
}

}  // namespace

DurationHistogram durationHistogram(const TraceStore& store, const Area& area, uint32_t nameId,
                                    int binsPerDecade) {
  DurationHistogram h;
  forAreaSpans(store, area, nameId,
               [&](const RankData&, uint32_t, uint32_t, uint32_t, const Span& s) {
                 const int64_t d = std::max<int64_t>(s.duration(), 1);
                 h.minNs = h.spans == 0 ? d : std::min(h.minNs, d);
                 h.maxNs = h.spans == 0 ? d : std::max(h.maxNs, d);
                 ++h.spans;
               });
  if (h.spans == 0) return h;
  // Bin edges at 10^(k / binsPerDecade) ns, from the one at or below the shortest.
  const double step = 1.0 / std::max(binsPerDecade, 1);
  const double first = std::floor(std::log10(double(h.minNs)) / step) * step;
  for (double e = first;; e += step) {
    DurationBin bin;
    bin.lowNs = std::llround(std::pow(10.0, e));
    bin.highNs = std::llround(std::pow(10.0, e + step));
    if (bin.highNs <= bin.lowNs) bin.highNs = bin.lowNs + 1;
    if (!h.bins.empty()) bin.lowNs = h.bins.back().highNs;
    h.bins.push_back(bin);
    if (bin.highNs > h.maxNs) break;
  }
  forAreaSpans(
      store, area, nameId, [&](const RankData&, uint32_t, uint32_t, uint32_t, const Span& s) {
        const int64_t d = std::max<int64_t>(s.duration(), 1);
        auto it = std::upper_bound(h.bins.begin(), h.bins.end(), d,
                                   [](int64_t v, const DurationBin& b) { return v < b.highNs; });
        if (it == h.bins.end()) --it;
        ++it->count;
      });
  return h;
}

std::vector<SpanRef> spansWithDuration(const TraceStore& store, const Area& area, uint32_t nameId,
                                       int64_t lowNs, int64_t highNs, size_t limit) {
  std::vector<std::pair<int64_t, SpanRef>> found;
  forAreaSpans(store, area, nameId,
               [&](const RankData& rank, uint32_t t, uint32_t l, uint32_t index, const Span& s) {
                 const int64_t d = std::max<int64_t>(s.duration(), 1);
                 if (d >= lowNs && d < highNs) {
                   found.emplace_back(d, SpanRef{rank.rank, t, l, index});
                 }
               });
  std::stable_sort(found.begin(), found.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<SpanRef> out;
  for (size_t i = 0; i < found.size() && i < limit; ++i) out.push_back(found[i].second);
  return out;
}

void writeAreaTable(const std::vector<AreaRow>& rows, AreaGroupBy by, std::ostream& out,
                    Delimiter delimiter) {
  DelimitedWriter w(out, delimiter);
  w.field(areaGroupByName(by));
  for (const char* h : {"count", "failed", "total_ns", "self_ns", "mean_ns", "p50_ns", "p99_ns",
                        "max_ns", "bytes", "busbw_gbps"}) {
    w.field(h);
  }
  w.endRow();
  for (const AreaRow& r : rows) {
    w.field(r.key).field(static_cast<int64_t>(r.count)).field(static_cast<int64_t>(r.failed));
    w.field(r.totalNs).field(r.selfNs).field(r.meanNs).field(r.p50Ns).field(r.p99Ns);
    w.field(r.maxNs).field(r.bytes);
    if (r.busbwGBps > 0) {
      w.field(r.busbwGBps);
    } else {
      w.empty();
    }
    w.endRow();
  }
}

}  // namespace ringx::analysis
