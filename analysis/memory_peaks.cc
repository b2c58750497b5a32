// Memory peaks, and what was alive at them (see trace_analyses.h for what each computes and why).
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

// ---- memory -----------------------------------------------------------------------

std::vector<MemoryPeak> memoryPeaks(const TraceStore& store) {
  std::vector<MemoryPeak> out;
  for (const RankData& rank : store.ranks()) {
    const size_t first = out.size();
    for (const CounterSeries& c : rank.counters) {
      if (c.values.empty()) continue;
      MemoryPeak p;
      p.rank = rank.rank;
      p.counter = std::string(store.str(c.name));
      p.peakValue = c.maxValue;  // finalize() keeps the first time the maximum was reached
      p.peakTimeNs = c.maxTime;
      p.samples = c.values.size();
      out.push_back(std::move(p));
    }
    std::sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
              [](const MemoryPeak& a, const MemoryPeak& b) { return a.counter < b.counter; });
  }
  return out;
}

namespace {

// What a DDP bucket was doing at t, from its time arguments.
const char* bucketState(const ArgRange& a, const Keys& keys, int64_t t) {
  const int64_t ready = a.integer(keys.ready, 0), wireStart = a.integer(keys.wireStart, 0),
                wireEnd = a.integer(keys.wireEnd, 0);
  if (ready > 0 && t < ready) return "filling";
  if (wireStart > 0 && t < wireStart) return "waiting to launch";
  if (wireEnd > 0 && t <= wireEnd) return "on the wire";
  if (wireEnd > 0) return "copy back";
  return nullptr;
}

// How far back a level is searched for a unit's last gather or reshard: a unit
// has a handful of spans per iteration, so the answer is always near.
constexpr size_t kGatherLookback = 256;

}  // namespace

std::vector<std::string> aliveAt(const TraceStore& store, int32_t rankId, int64_t t) {
  std::vector<std::string> out;
  const RankData* rank = store.findRank(rankId);
  if (!rank) return out;
  const Keys keys(store.strings());
  const uint32_t allGather = store.strings().find("all_gather");
  const uint32_t reshard = store.strings().find("reshard");
  const std::string_view bucketPrefix = trace::track::kDdpBucketPrefix;
  const std::string_view unitPrefix = trace::track::kFsdpUnitPrefix;

  for (const Track& track : rank->tracks) {
    const std::string_view trackName = store.str(track.name);
    if (track.kind == TrackKind::kDdpBucket) {
      for (const auto& level : track.levels) {
        forOverlapping(level, t, t, [&](const Span& s, uint32_t) {
          const ArgRange a(*rank, s);
          const int64_t index = a.integer(keys.bucket, -1);
          std::string label = index >= 0 ? strCat("bucket ", index)
                                         : strCat("bucket ", trackName.substr(bucketPrefix.size()));
          if (const char* state = bucketState(a, keys, t)) label += strCat(" (", state, ")");
          out.push_back(std::move(label));
        });
      }
    } else if (track.kind == TrackKind::kFsdpUnit) {
      const std::string_view unit = trackName.substr(unitPrefix.size());
      std::vector<std::pair<int64_t, std::string_view>> covering;  // (begin, name)
      // The latest gather or reshard that began at or before t: the parameters
      // are held from a gather until the next reshard.
      const Span* latest = nullptr;
      for (const auto& level : track.levels) {
        forOverlapping(level, t, t, [&](const Span& s, uint32_t) {
          covering.emplace_back(s.begin, store.str(s.name));
        });
        size_t i = static_cast<size_t>(
            std::upper_bound(level.begin(), level.end(), t,
                             [](int64_t v, const Span& s) { return v < s.begin; }) -
            level.begin());
        for (size_t k = 0; i > 0 && k < kGatherLookback; ++k) {
          const Span& s = level[--i];
          if (s.name == 0 || (s.name != allGather && s.name != reshard)) continue;
          if (!latest || latest->begin < s.begin) latest = &s;
          break;
        }
      }
      if (!covering.empty()) {
        std::sort(covering.begin(), covering.end());
        std::vector<std::string_view> names;  // nested repeats once
        std::string text;
        for (const auto& [begin, name] : covering) {
          if (std::find(names.begin(), names.end(), name) != names.end()) continue;
          names.push_back(name);
          text += strCat(text.empty() ? "" : ", ", name);
        }
        out.push_back(strCat(unit, " (", text, ")"));
      } else if (latest && latest->name == allGather && latest->end <= t) {
        out.push_back(strCat(unit, " (gathered)"));
      }
    }
  }
  return out;
}

}  // namespace ringx::analysis
