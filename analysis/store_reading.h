// Helpers shared by the trace analyses (selection_stats.cc, collective_matching.cc,
// engine_analyses.cc, memory_peaks.cc, summary.cc): argument keys resolved to
// string ids once per pass, a span's args as a range, and walks over a level's
// spans. Internal to analysis/. The figures themselves come from
// analysis/figures.h.
//
// Argument keys are resolved once per call and each span's args are scanned
// directly: the store's intArg() looks the key text up in the pool on every
// call, which would dominate a pass over a million spans.
#pragma once

#include <algorithm>
#include <string_view>
#include <vector>

#include "analysis/figures.h"
#include "base/text.h"
#include "trace/format/schema.h"
#include "trace/model/trace_store.h"

namespace ringx::analysis::store_reading {

namespace targ = trace::arg;
// The store's types, which every analysis walks.
using model::ArgKind;
using model::ArgValue;
using model::CounterSeries;
using model::Instant;
using model::kSpanFailed;
using model::RankData;
using model::Span;
using model::StringPool;
using model::Track;
using model::TrackKind;

// The well-known argument keys as string ids (0: no event carries that key).
struct Keys {
  explicit Keys(const StringPool& p)
      : bytes(p.find(targ::kBytes)),
        seq(p.find(targ::kSeq)),
        group(p.find(targ::kGroup)),
        groupRank(p.find(targ::kGroupRank)),
        groupSize(p.find(targ::kGroupSize)),
        error(p.find(targ::kError)),
        step(p.find(targ::kStep)),
        bucket(p.find(targ::kBucket)),
        params(p.find(targ::kParams)),
        firstGrad(p.find(targ::kFirstGradNs)),
        ready(p.find(targ::kReadyNs)),
        launch(p.find(targ::kLaunchNs)),
        wireStart(p.find(targ::kWireStartNs)),
        wireEnd(p.find(targ::kWireEndNs)),
        copyBack(p.find(targ::kCopyBackNs)),
        exposed(p.find(targ::kExposedNs)),
        phase(p.find(targ::kPhase)),
        prefetched(p.find(targ::kPrefetched)) {}
  uint32_t bytes, seq, group, groupRank, groupSize, error, step, bucket, params, firstGrad, ready,
      launch, wireStart, wireEnd, copyBack, exposed, phase, prefetched;
};

// A span's args, unpacked once, with typed lookups by key id.
struct ArgRange {
  model::ArgList list;
  ArgRange(const RankData& rank, uint32_t first, uint16_t count) : list(rank, first, count) {}
  ArgRange(const RankData& rank, const Span& s) : list(rank, s) {}

  const ArgValue* begin() const { return list.begin(); }
  const ArgValue* end() const { return list.end(); }
  const ArgValue* find(uint32_t key) const { return list.find(key); }
  int64_t integer(uint32_t key, int64_t fallback) const {
    const ArgValue* a = find(key);
    if (!a) return fallback;
    if (a->kind == ArgKind::kInt) return a->intValue;
    if (a->kind == ArgKind::kDouble) return static_cast<int64_t>(a->doubleValue);
    return fallback;
  }
  double number(uint32_t key, double fallback) const {
    const ArgValue* a = find(key);
    if (!a) return fallback;
    if (a->kind == ArgKind::kDouble) return a->doubleValue;
    if (a->kind == ArgKind::kInt) return static_cast<double>(a->intValue);
    return fallback;
  }
  uint32_t string(uint32_t key) const {
    const ArgValue* a = find(key);
    return a && a->kind == ArgKind::kString ? a->stringId : 0;
  }
};

// Bus bandwidth in GB/s (analysis/figures.h).
inline double busbw(std::string_view op, int64_t bytes, int64_t durationNs, int64_t groupSize) {
  return analysis::busBandwidthGBps(op, bytes, durationNs, groupSize);
}

// Visits the spans of `level` that overlap [t0, t1]: f(const Span&, uint32_t index).
template <typename F>
void forOverlapping(const std::vector<Span>& level, int64_t t0, int64_t t1, F&& f) {
  // Within a level spans are disjoint, so ends are sorted like begins.
  size_t i =
      static_cast<size_t>(std::lower_bound(level.begin(), level.end(), t0,
                                           [](const Span& s, int64_t t) { return s.end < t; }) -
                          level.begin());
  for (; i < level.size() && level[i].begin <= t1; ++i) f(level[i], static_cast<uint32_t>(i));
}

// The profiler steps every rank recorded: the numbers (ProfilerStep#N's N) of the first rank's
// `steps` map that every other rank's holds too, ascending.
template <typename Ranks>
std::vector<int64_t> stepsEveryRankHas(const Ranks& ranks) {
  std::vector<int64_t> numbers;
  if (ranks.empty()) return numbers;
  for (const auto& step : ranks.front().steps) {
    bool all = true;
    for (const auto& r : ranks) all = all && r.steps.count(step.first) > 0;
    if (all) numbers.push_back(step.first);
  }
  return numbers;
}

// Each launch's wire: the first of `wires` not yet taken that begins at or after it (both in
// begin order; null: none). A CPU backend runs a rank's collectives in the order they were
// issued, each after its c10d op began (profiler_ddp.h, profiler_fsdp.h).
template <typename Launch, typename Wire>
std::vector<const Wire*> wiresInIssueOrder(const std::vector<Launch>& launches,
                                           const std::vector<Wire>& wires) {
  std::vector<const Wire*> out(launches.size(), nullptr);
  size_t next = 0;
  for (size_t i = 0; i < launches.size(); ++i) {
    while (next < wires.size() && wires[next].begin < launches[i].begin) ++next;
    if (next < wires.size()) out[i] = &wires[next++];
  }
  return out;
}

// Visits every span of a track: f(levelIndex, spanIndex, span).
template <typename F>
void forAllSpans(const Track& track, F&& f) {
  for (size_t l = 0; l < track.levels.size(); ++l) {
    const auto& level = track.levels[l];
    for (size_t i = 0; i < level.size(); ++i)
      f(static_cast<uint32_t>(l), static_cast<uint32_t>(i), level[i]);
  }
}

// Whether profiler traces (no ringx rank stream) hold a span named `name` on some rank.
inline bool profiledSpanNamed(const model::TraceStore& store, std::string_view name) {
  const uint32_t id = store.strings().find(name);
  if (id == 0) return false;
  for (const RankData& r : store.ranks()) {
    if (r.clockKnown) return false;  // a ringx rank stream: its own engine events are read
  }
  for (const RankData& r : store.ranks()) {
    for (const Track& t : r.tracks) {
      bool found = false;
      forAllSpans(t, [&](uint32_t, uint32_t, const Span& s) { found = found || s.name == id; });
      if (found) return true;
    }
  }
  return false;
}

}  // namespace ringx::analysis::store_reading
