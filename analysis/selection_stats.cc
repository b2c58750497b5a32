// Selection statistics (see trace_analyses.h for what each computes and why).
#include "analysis/trace_analyses.h"

#include <algorithm>
#include <map>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "analysis/store_reading.h"
#include "base/error.h"

namespace ringx::analysis {
using namespace store_reading;

namespace {

// ---- selection statistics -------------------------------------------------------

struct RankAccumulator {
  int32_t rank = 0;
  uint64_t count = 0;
  int64_t total = 0;
  std::vector<double> busbw;
};

struct NameAccumulator {
  uint32_t name = 0;
  std::vector<int64_t> durations;
  uint64_t failed = 0;
  int64_t bytes = 0;
  std::vector<RankAccumulator> ranks;  // appended as ranks are walked in order
};

class StatsCollector {
 public:
  explicit StatsCollector(const TraceStore& store)
      : store_(store),
        keys_(store.strings()),
        defaultGroupSize_(static_cast<int64_t>(store.ranks().size())) {}

  void add(NameAccumulator& acc, const RankData& rank, const Span& s) {
    if (acc.ranks.empty() || acc.ranks.back().rank != rank.rank) {
      acc.ranks.emplace_back();
      acc.ranks.back().rank = rank.rank;
    }
    RankAccumulator& r = acc.ranks.back();
    const int64_t d = s.duration();
    acc.durations.push_back(d);
    ++r.count;
    r.total += d;
    if (s.flags & kSpanFailed) ++acc.failed;
    if (s.argCount == 0 || keys_.bytes == 0) return;
    const ArgRange args(rank, s);
    const int64_t bytes = args.integer(keys_.bytes, -1);
    if (bytes <= 0) return;
    acc.bytes += bytes;
    if (d > 0) {
      const int64_t n = args.integer(keys_.groupSize, defaultGroupSize_);
      r.busbw.push_back(busbw(store_.str(s.name), bytes, d, n));
    }
  }

  EventStats finish(NameAccumulator& acc) const {
    EventStats e;
    e.nameId = acc.name;
    e.name = std::string(store_.str(acc.name));
    e.count = acc.durations.size();
    e.failed = acc.failed;
    e.bytes = acc.bytes;
    std::sort(acc.durations.begin(), acc.durations.end());
    for (int64_t d : acc.durations) e.totalNs += d;
    if (!acc.durations.empty()) {
      e.meanNs = meanOf(e.totalNs, e.count);
      e.p50Ns = percentile(acc.durations, 50);
      e.p99Ns = percentile(acc.durations, 99);
      e.minNs = acc.durations.front();
      e.maxNs = acc.durations.back();
    }
    std::vector<double> all;
    for (RankAccumulator& r : acc.ranks) {
      all.insert(all.end(), r.busbw.begin(), r.busbw.end());
      RankEventStats rs;
      rs.rank = r.rank;
      rs.count = r.count;
      rs.totalNs = r.total;
      rs.meanNs = meanOf(r.total, r.count);
      rs.busbwGBps = median(r.busbw);
      e.perRank.push_back(rs);
    }
    e.busbwGBps = median(all);
    return e;
  }

 private:
  const TraceStore& store_;
  Keys keys_;
  int64_t defaultGroupSize_;
};

}  // namespace

EventStats statsForName(const TraceStore& store, uint32_t nameId, int64_t t0, int64_t t1) {
  StatsCollector collector(store);
  NameAccumulator acc;
  acc.name = nameId;
  for (const RankData& rank : store.ranks())
    for (const Track& track : rank.tracks)
      for (const auto& level : track.levels)
        forOverlapping(level, t0, t1, [&](const Span& s, uint32_t) {
          if (s.name == nameId) collector.add(acc, rank, s);
        });
  return collector.finish(acc);
}

std::vector<EventStats> statsForRange(const TraceStore& store, int64_t t0, int64_t t1) {
  StatsCollector collector(store);
  // Name id -> accumulator slot; a flat table beats hashing a million spans.
  std::vector<int32_t> slotOf(store.strings().size(), -1);
  std::vector<NameAccumulator> accs;
  for (const RankData& rank : store.ranks())
    for (const Track& track : rank.tracks)
      for (const auto& level : track.levels)
        forOverlapping(level, t0, t1, [&](const Span& s, uint32_t) {
          if (s.name >= slotOf.size()) slotOf.resize(s.name + 1, -1);
          int32_t& slot = slotOf[s.name];
          if (slot < 0) {
            slot = static_cast<int32_t>(accs.size());
            accs.emplace_back();
            accs.back().name = s.name;
          }
          collector.add(accs[static_cast<size_t>(slot)], rank, s);
        });
  std::vector<EventStats> out;
  out.reserve(accs.size());
  for (NameAccumulator& acc : accs) out.push_back(collector.finish(acc));
  std::sort(out.begin(), out.end(), [](const EventStats& a, const EventStats& b) {
    return a.totalNs != b.totalNs ? a.totalNs > b.totalNs : a.name < b.name;
  });
  return out;
}

}  // namespace ringx::analysis
