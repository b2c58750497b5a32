// The FSDP replay model fitted from recorded steps (see fsdp_fit.h for what comes from where).
#include "analysis/replay/fsdp_fit.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <tuple>

#include "analysis/replay/core_shares.h"
#include "analysis/replay/program.h"

namespace ringx::replay {
namespace {

struct TimedHook {
  int64_t time = 0;
  FsdpHook hook;
};

// A step's hooks in time order: a span's begin opens its unit, its end closes it. At one
// instant, an enclosing span opens before and closes after the spans inside it.
std::vector<TimedHook> hooksOf(const std::vector<FsdpStepRecord::Span>& spans) {
  std::vector<std::tuple<int64_t, int, int64_t, size_t, bool>> keyed;  // time, close, order
  for (const FsdpStepRecord::Span& s : spans) {
    const int64_t length = s.endNs - s.beginNs;
    keyed.emplace_back(s.beginNs, 0, -length, s.unit, true);
    keyed.emplace_back(s.endNs, 1, length, s.unit, false);
  }
  std::sort(keyed.begin(), keyed.end());
  std::vector<TimedHook> out;
  for (const auto& [time, close, order, unit, open] : keyed) out.push_back({time, {unit, open}});
  return out;
}

bool sameOrder(const std::vector<TimedHook>& a, const std::vector<FsdpHook>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].hook.unit != b[i].unit || a[i].hook.open != b[i].open) return false;
  }
  return true;
}

struct Interval {
  int64_t begin = 0, end = 0;
};

int64_t overlap(const std::vector<Interval>& busy, int64_t begin, int64_t end) {
  int64_t total = 0;
  for (const Interval& i : busy)
    total += std::max<int64_t>(0, std::min(end, i.end) - std::max(begin, i.begin));
  return total;
}

// The compute before each hook: the time since the previous one (the first: since `from`)
// less the engine's non-compute time in it.
std::vector<int64_t> gaps(const std::vector<TimedHook>& hooks, int64_t from,
                          const std::vector<Interval>& busy) {
  std::vector<int64_t> out;
  int64_t previous = from;
  for (const TimedHook& h : hooks) {
    out.push_back(std::max<int64_t>(0, h.time - previous - overlap(busy, previous, h.time)));
    previous = h.time;
  }
  return out;
}

// How much of each gap's compute (the time between hooks outside `busy`) ran while one of
// the rank's collectives was in flight (`flights`).
std::vector<int64_t> gapOverlaps(const std::vector<TimedHook>& hooks, int64_t from,
                                 const std::vector<Interval>& busy,
                                 const std::vector<Interval>& flights) {
  // The flights' union less the busy time, as disjoint intervals.
  std::vector<Interval> merged;
  std::vector<Interval> sorted = flights;
  std::sort(sorted.begin(), sorted.end(),
            [](const Interval& a, const Interval& b) { return a.begin < b.begin; });
  for (const Interval& f : sorted) {
    if (!merged.empty() && f.begin <= merged.back().end) {
      merged.back().end = std::max(merged.back().end, f.end);
    } else {
      merged.push_back(f);
    }
  }
  std::vector<int64_t> out;
  int64_t previous = from;
  for (const TimedHook& h : hooks) {
    int64_t total = 0;
    for (const Interval& f : merged) {
      const int64_t b = std::max(previous, f.begin), e = std::min(h.time, f.end);
      if (e > b) total += (e - b) - overlap(busy, b, e);
    }
    out.push_back(std::max<int64_t>(0, total));
    previous = h.time;
  }
  return out;
}

// The engine's own work at each hook (fsdp_fit.h), outside `busy`. `end`: the phase's end,
// where the last post-hook's window closes.
std::vector<int64_t> hookWork(const FsdpStepRecord& s, const std::vector<TimedHook>& hooks,
                              int64_t from, int64_t end, const std::vector<Interval>& busy,
                              bool blocking) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < hooks.size(); ++i) {
    const TimedHook& h = hooks[i];
    const int64_t previous = i == 0 ? from : hooks[i - 1].time;
    const int64_t next = i + 1 < hooks.size() ? hooks[i + 1].time : std::max(end, h.time);
    int64_t begin = h.time, until = h.time;
    if (h.hook.open) {
      // The pre-hook began where compute began to wait for the unit's gather, ready there.
      for (const FsdpStepRecord::Gather& g : s.gathers) {
        const int64_t waited = g.readyNs - std::max<int64_t>(0, g.exposedNs);
        if (g.unit == h.hook.unit && g.readyNs > 0 && g.readyNs <= h.time && waited >= previous) {
          begin = std::min(begin, waited);
        }
      }
    } else {
      for (const FsdpStepRecord::Span& r : s.reshards) {
        if (r.unit == h.hook.unit && r.beginNs >= h.time && r.beginNs < next) {
          until = std::max(until, std::min(r.endNs, next));
        }
      }
      for (const FsdpStepRecord::Reduction& x : s.reductions) {
        const int64_t last = blocking ? x.doneNs : x.launchNs;
        if (x.unit == h.hook.unit && x.launchNs >= h.time && x.launchNs < next && last > 0) {
          until = std::max(until, std::min(last, next));
        }
      }
    }
    out.push_back(std::max<int64_t>(0, until - begin - overlap(busy, begin, until)));
  }
  return out;
}

bool complete(const FsdpStepRecord& s) {
  return s.forwardBeginNs > 0 && s.forwardEndNs >= s.forwardBeginNs &&
         s.backwardBeginNs >= s.forwardEndNs && s.backwardEndNs >= s.backwardBeginNs &&
         !s.forward.empty() && !s.backward.empty();
}

// What the engine spent not computing in a step: waiting for gathers, freeing, waiting for
// reductions (after each post-backward with the limiter; after the last hook always).
std::vector<Interval> busyOf(const FsdpStepRecord& s, const std::vector<TimedHook>& backward,
                             bool limiter, bool blocking) {
  std::vector<Interval> busy;
  // Compute waits for a gather from when it needs it until it is ready (what of that wait
  // follows the wire end is the gather's copy out, a slot of its own); a blocking collective
  // (FSDP2 on CPU) also holds the thread that issued it until it ends there.
  for (const FsdpStepRecord::Gather& g : s.gathers) {
    if (g.exposedNs > 0 && g.readyNs > 0) busy.push_back({g.readyNs - g.exposedNs, g.readyNs});
    if (blocking && g.issueNs > 0 && g.wireEndNs > g.issueNs) {
      busy.push_back({g.issueNs, g.wireEndNs});
    }
  }
  for (const FsdpStepRecord::Reduction& x : s.reductions) {
    if (blocking && x.launchNs > 0 && x.wireEndNs > x.launchNs) {
      busy.push_back({x.launchNs, x.wireEndNs});
    }
  }
  for (const FsdpStepRecord::Span& r : s.reshards) busy.push_back({r.beginNs, r.endNs});
  for (size_t i = 0; i < backward.size(); ++i) {
    const bool last = i + 1 == backward.size();
    if (backward[i].hook.open || (!limiter && !last)) continue;
    const int64_t closed = backward[i].time;
    const int64_t until = last ? s.backwardEndNs : backward[i + 1].time;
    int64_t from = closed;  // after this unit's free
    for (const FsdpStepRecord::Span& r : s.reshards) {
      if (r.unit == backward[i].hook.unit && r.beginNs >= closed && r.beginNs <= until) {
        from = std::max(from, r.endNs);
      }
    }
    // The limiter keeps the unit's own reduction in flight; the end waits for every one.
    int64_t done = from;
    for (const FsdpStepRecord::Reduction& r : s.reductions) {
      if (!last && r.unit == backward[i].hook.unit) continue;
      if (r.launchNs <= closed && r.doneNs > from && r.doneNs <= until) {
        done = std::max(done, r.doneNs);
      }
    }
    if (done > from) busy.push_back({from, done});
  }
  // Disjoint, so that what they cover is counted once (a blocking gather's hold and its wait
  // overlap).
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const Interval& b : busy) spans.emplace_back(b.begin, b.end);
  busy.clear();
  for (const auto& [b, e] : mergeIntervals(std::move(spans))) busy.push_back({b, e});
  return busy;
}

// When a rank computed within [begin, end): all of it but what the engine spent not computing
// (busyOf), as the gaps count it (gaps: the replay runs each gap as compute).
CoreShares::Intervals computeIn(int64_t begin, int64_t end, const std::vector<Interval>& busy) {
  std::vector<std::pair<int64_t, int64_t>> holes;
  for (const Interval& b : busy) holes.emplace_back(b.begin, b.end);
  CoreShares::Intervals out;
  int64_t t = begin;
  for (const auto& [b, e] : mergeIntervals(std::move(holes))) {
    if (e <= t) continue;
    if (b >= end) break;
    if (b > t) out.emplace_back(t, b);
    t = std::max(t, e);
  }
  if (end > t) out.emplace_back(t, end);
  return out;
}

}  // namespace

// A step's collectives on one rank, in issue order, each from when its lane could start it on
// this rank (issued, and the lane's previous collective done) to its wire end; `occurrence`
// counts a (kind, unit)'s collectives within the step (FULL_SHARD gathers a unit twice).
struct Issued {
  int64_t issue = 0, start = 0, wireEnd = 0;
  int kind = 0;  // 0 all-gather, 1 reduce-scatter, 2 allreduce
  size_t unit = 0;
  int occurrence = 0;
  int64_t bytes = 0;
  bool prefetched = false;
};
// The lane a collective of `kind` (0: a gather) ran on: gathers on a group of their own where
// the engine gives them one.
size_t laneOf(int kind, bool gatherLane) { return kind == 0 && gatherLane ? 1 : 0; }

std::vector<Issued> issuedOf(const FsdpStepRecord& s, bool gatherLane) {
  std::vector<Issued> out;
  for (const FsdpStepRecord::Gather& g : s.gathers) {
    out.push_back({g.issueNs, 0, g.wireEndNs, 0, g.unit, 0, g.bytes, g.prefetched});
  }
  for (const FsdpStepRecord::Reduction& x : s.reductions) {
    out.push_back({x.launchNs, 0, x.wireEndNs, x.allreduce ? 2 : 1, x.unit, 0, x.bytes, false});
  }
  std::sort(out.begin(), out.end(),
            [](const Issued& a, const Issued& b) { return a.issue < b.issue; });
  std::map<size_t, int64_t> laneFree;          // lane -> the previous collective's wire end
  std::map<std::pair<int, size_t>, int> seen;  // (kind, unit) -> occurrences so far
  for (Issued& c : out) {
    c.occurrence = seen[{c.kind, c.unit}]++;
    const size_t lane = laneOf(c.kind, gatherLane);
    c.start = std::max(c.issue, laneFree[lane]);
    laneFree[lane] = std::max(laneFree[lane], c.wireEnd);
  }
  return out;
}

FsdpFit fitFsdpModel(const FsdpRecording& rec) {
  if (rec.units.empty() || rec.ranks.empty()) {
    throw std::runtime_error("no FSDP units or no ranks were recorded: nothing to model");
  }
  // The reference order: the lowest rank's first complete step.
  const FsdpStepRecord* reference = nullptr;
  for (const FsdpStepRecord& s : rec.ranks.front().steps) {
    if (complete(s)) {
      reference = &s;
      break;
    }
  }
  if (!reference) {
    throw std::runtime_error("rank " + std::to_string(rec.ranks.front().rank) +
                             " has no complete FSDP step (forward, backward and unit spans)");
  }
  const std::vector<TimedHook> refForward = hooksOf(reference->forward);
  const std::vector<TimedHook> refBackward = hooksOf(reference->backward);
  // The root first: the unit that opens first; the others keep their order.
  const size_t n = rec.units.size();
  std::vector<size_t> index(n);
  const size_t root = refForward.front().hook.unit;
  for (size_t u = 0, next = 1; u < n; ++u) index[u] = u == root ? 0 : next++;

  FsdpFit fit;
  FsdpModel& m = fit.model;
  m.runtime = rec.runtime;
  m.worldSize = rec.worldSize;
  m.host = rec.host;
  m.units.resize(n);
  for (size_t u = 0; u < n; ++u) m.units[index[u]].name = rec.units[u];
  for (const TimedHook& h : refForward) m.forward.push_back({index[h.hook.unit], h.hook.open});
  for (const TimedHook& h : refBackward) m.backward.push_back({index[h.hook.unit], h.hook.open});
  std::vector<FsdpHook> origForward, origBackward;
  for (const TimedHook& h : refForward) origForward.push_back(h.hook);
  for (const TimedHook& h : refBackward) origBackward.push_back(h.hook);

  fit.steps = UINT64_MAX;
  RecordedSteps recorded;
  // (kind, unit, step, occurrence) -> ns: a unit gathers twice a step under FULL_SHARD
  std::map<std::tuple<int, size_t, int64_t, int>, int64_t> shortest;
  struct Span {
    int64_t start = INT64_MIN, end = INT64_MIN;
    size_t ranks = 0;
  };
  std::map<std::tuple<int, size_t, int64_t, int>, Span> spans;
  std::set<std::tuple<int, size_t, int64_t, int>> prefetchedKeys;
  std::map<std::pair<int, size_t>, int64_t> bytesOf;  // (kind, unit) -> bytes
  std::map<int64_t, std::vector<FsdpRankProfile>> byStep;
  // (rank, 0 forward | 1 backward, gap) -> (compute, overlap) per step
  ContentionSamples contention;
  // Each collective as the ring ran it: from the last rank's start to the last rank's end.
  for (const FsdpRankRecord& r : rec.ranks) {
    for (const FsdpStepRecord& s : r.steps) {
      for (const Issued& c : issuedOf(s, rec.runtime.gatherLane)) {
        int64_t& b = bytesOf[{c.kind, c.unit}];
        b = std::max(b, c.bytes);
        if (c.issue <= 0 || c.wireEnd <= c.start) continue;
        const auto key = std::make_tuple(c.kind, c.unit, s.step, c.occurrence);
        if (c.prefetched) prefetchedKeys.insert(key);
        auto [at, fresh] = shortest.emplace(key, c.wireEnd - c.start);
        if (!fresh) at->second = std::min(at->second, c.wireEnd - c.start);
        Span& sp = spans[key];
        sp.start = std::max(sp.start, c.start);
        sp.end = std::max(sp.end, c.wireEnd);
        ++sp.ranks;
      }
    }
  }
  // The host's cores as the recording shared them (core_shares.h), over every step at once:
  // each rank computes from a step's forward begin to its next one, but while the engine waits
  // or frees (and a blocking collective holds its thread); the ring runs each collective every
  // rank recorded from the last rank's start to the last end.
  std::vector<CoreShares::Intervals> computing(rec.ranks.size());
  auto stepEnd = [](const FsdpRankRecord& r, size_t i) {
    const FsdpStepRecord& s = r.steps[i];
    return i + 1 < r.steps.size() && r.steps[i + 1].step == s.step + 1
               ? std::max(s.backwardEndNs, r.steps[i + 1].forwardBeginNs)
               : s.backwardEndNs + std::max<int64_t>(0, s.optimizerNs);
  };
  // Per rank and step (complete ones): the engine's busy time, and the compute around it.
  std::vector<std::vector<std::vector<Interval>>> busyAt(rec.ranks.size());
  std::vector<std::vector<CoreShares::Intervals>> computeAt(rec.ranks.size());
  for (size_t ri = 0; ri < rec.ranks.size(); ++ri) {
    const FsdpRankRecord& r = rec.ranks[ri];
    busyAt[ri].resize(r.steps.size());
    computeAt[ri].resize(r.steps.size());
    for (size_t i = 0; i < r.steps.size(); ++i) {
      const FsdpStepRecord& s = r.steps[i];
      if (!complete(s)) continue;
      busyAt[ri][i] =
          busyOf(s, hooksOf(s.backward), rec.runtime.limitAllGathers, rec.runtime.blocking);
      computeAt[ri][i] = computeIn(s.forwardBeginNs, stepEnd(r, i), busyAt[ri][i]);
      computing[ri].insert(computing[ri].end(), computeAt[ri][i].begin(), computeAt[ri][i].end());
    }
  }
  CoreShares::Intervals ring;
  for (const auto& [key, sp] : spans) {
    if (sp.ranks == rec.ranks.size() && sp.end > sp.start) ring.emplace_back(sp.start, sp.end);
  }
  const CoreShares shares(m.host, CoreShares::ranksPerRecordedRank(m.worldSize, rec.ranks.size()),
                          computing, ring);
  m.ringLossShare = shares.ringLossShare(ring);
  // What `rank` lost over the compute in [begin, end).
  auto lostOver = [&](size_t rank, const CoreShares::Intervals& compute, int64_t begin,
                      int64_t end) {
    double lost = 0;
    for (const auto& [b, e] : compute) {
      lost += shares.lostNs(rank, std::max(b, begin), std::min(e, end));
    }
    return lost;
  };

  for (const FsdpRankRecord& r : rec.ranks) {
    FsdpRankProfile p;
    p.rank = r.rank;
    std::vector<std::vector<int64_t>> fwd(m.forward.size()), bwd(m.backward.size());
    std::vector<std::vector<int64_t>> fwdHook(m.forward.size()), bwdHook(m.backward.size());
    std::vector<int64_t> toBackward, finalize, optimizer;
    std::vector<std::vector<int64_t>> reshard(n), copyOut(n);
    uint64_t used = 0;
    for (size_t i = 0; i < r.steps.size(); ++i) {
      const FsdpStepRecord& s = r.steps[i];
      if (i + 1 < r.steps.size() && r.steps[i + 1].step == s.step + 1) {
        recorded.add(r.rank, s.step, s.forwardBeginNs, r.steps[i + 1].forwardBeginNs);
      }
      // Its collectives in flight on this rank: from when the ring started each (every rank
      // had issued it: before, the communication thread waits for a late peer asleep,
      // transport/doorbell.h) to its wire end here.
      std::vector<Interval> flights;
      for (const Issued& c : issuedOf(s, rec.runtime.gatherLane)) {
        if (c.issue <= 0 || c.wireEnd <= c.start) continue;
        const Span& sp = spans[std::make_tuple(c.kind, c.unit, s.step, c.occurrence)];
        const int64_t start = sp.ranks == rec.ranks.size() ? sp.start : c.start;
        if (c.wireEnd > start) flights.push_back({start, c.wireEnd});
      }
      if (!complete(s)) continue;
      const std::vector<TimedHook> forward = hooksOf(s.forward), backward = hooksOf(s.backward);
      if (!sameOrder(forward, origForward) || !sameOrder(backward, origBackward)) continue;
      ++used;
      const size_t rankIndex = static_cast<size_t>(&r - rec.ranks.data());
      const std::vector<Interval>& busy = busyAt[rankIndex][i];
      FsdpRankProfile one;
      one.rank = r.rank;
      one.forwardGapNs = gaps(forward, s.forwardBeginNs, busy);
      one.backwardGapNs = gaps(backward, s.backwardBeginNs, busy);
      // FSDP2's hooks are Python, much of their work per call. ringx.fsdp's are C++: what its
      // trace shows in them (a backward pre-hook's 0.7 ms for a 2 MiB unit) is the buffers'
      // allocation and copies, as much for a merged unit (by bytes), so none is dropped.
      if (rec.runtime.fsdp2) {
        one.forwardHookNs =
            hookWork(s, forward, s.forwardBeginNs, s.forwardEndNs, busy, rec.runtime.blocking);
        one.backwardHookNs =
            hookWork(s, backward, s.backwardBeginNs, s.backwardEndNs, busy, rec.runtime.blocking);
        for (size_t k = 0; k < forward.size(); ++k) fwdHook[k].push_back(one.forwardHookNs[k]);
        for (size_t k = 0; k < backward.size(); ++k) bwdHook[k].push_back(one.backwardHookNs[k]);
      }
      {
        // Each gap's loss to sharing the cores, and the rest of the step's rate.
        const CoreShares::Intervals& compute = computeAt[rankIndex][i];
        double inGaps = 0, gapNs = 0;
        auto gapLosses = [&](const std::vector<TimedHook>& hooks, int64_t from,
                             std::vector<int64_t>* out) {
          int64_t previous = from;
          for (const TimedHook& h : hooks) {
            const double lost = lostOver(rankIndex, compute, previous, h.time);
            out->push_back(std::llround(lost));
            inGaps += lost;
            for (const auto& [b, e] : compute) {
              gapNs += static_cast<double>(
                  std::max<int64_t>(0, std::min(e, h.time) - std::max(b, previous)));
            }
            previous = h.time;
          }
        };
        gapLosses(forward, s.forwardBeginNs, &one.forwardLostNs);
        gapLosses(backward, s.backwardBeginNs, &one.backwardLostNs);
        double all = 0, allNs = 0;
        for (const auto& [b, e] : compute) {
          all += shares.lostNs(rankIndex, b, e);
          allNs += static_cast<double>(e - b);
        }
        one.otherLossRate =
            allNs > gapNs ? std::clamp((all - inGaps) / (allNs - gapNs), 0.0, 1.0) : 0;
      }
      one.forwardOverlapNs = gapOverlaps(forward, s.forwardBeginNs, busy, flights);
      one.backwardOverlapNs = gapOverlaps(backward, s.backwardBeginNs, busy, flights);
      const std::vector<int64_t>& f = one.forwardGapNs;
      const std::vector<int64_t>& b = one.backwardGapNs;
      for (size_t k = 0; k < f.size(); ++k) {
        contention[{rankIndex, 0, k}].emplace_back(f[k], one.forwardOverlapNs[k]);
      }
      for (size_t k = 0; k < b.size(); ++k) {
        contention[{rankIndex, 1, k}].emplace_back(b[k], one.backwardOverlapNs[k]);
      }
      for (size_t k = 0; k < f.size(); ++k) fwd[k].push_back(f[k]);
      for (size_t k = 0; k < b.size(); ++k) bwd[k].push_back(b[k]);
      const int64_t forwardTail =
          std::max<int64_t>(0, s.forwardEndNs - forward.back().time -
                                   overlap(busy, forward.back().time, s.forwardEndNs));
      toBackward.push_back(forwardTail + (s.backwardBeginNs - s.forwardEndNs));
      finalize.push_back(
          std::max<int64_t>(0, s.backwardEndNs - backward.back().time -
                                   overlap(busy, backward.back().time, s.backwardEndNs)));
      if (s.optimizerNs >= 0) optimizer.push_back(s.optimizerNs);
      std::vector<std::vector<int64_t>> frees(n);
      for (const FsdpStepRecord::Span& x : s.reshards) {
        reshard[x.unit].push_back(x.endNs - x.beginNs);
        frees[x.unit].push_back(x.endNs - x.beginNs);
      }
      one.toBackwardNs = toBackward.back();
      one.finalizeNs = finalize.back();
      one.optimizerNs = s.optimizerNs;  // < 0: the rank's median, below
      one.reshardNs.assign(n, 0);
      for (size_t u = 0; u < n; ++u) one.reshardNs[index[u]] = medianNs(frees[u]);
      std::vector<std::vector<int64_t>> copies(n);
      for (const FsdpStepRecord::Gather& g : s.gathers) {
        if (g.issueNs <= 0 || g.wireEndNs <= g.issueNs) continue;
        // From the later of its wire end and the wait's start to ready: a prefetched gather
        // ended on the wire long before it was needed, and is copied out when it is.
        copies[g.unit].push_back(std::max<int64_t>(
            0, g.readyNs - std::max(g.wireEndNs, g.readyNs - std::max<int64_t>(0, g.exposedNs))));
        copyOut[g.unit].push_back(copies[g.unit].back());
      }
      one.copyOutNs.assign(n, 0);
      for (size_t u = 0; u < n; ++u) one.copyOutNs[index[u]] = medianNs(copies[u]);
      std::vector<FsdpRankProfile>& ranks = byStep[s.step];
      ranks.resize(rec.ranks.size());
      ranks[static_cast<size_t>(&r - rec.ranks.data())] = std::move(one);
    }
    if (used == 0) {
      throw std::runtime_error("rank " + std::to_string(r.rank) +
                               " has no complete FSDP step with the other ranks' hook order");
    }
    fit.steps = std::min(fit.steps, used);
    for (const auto& v : fwd) p.forwardGapNs.push_back(medianNs(v));
    for (const auto& v : bwd) p.backwardGapNs.push_back(medianNs(v));
    if (rec.runtime.fsdp2) {
      for (const auto& v : fwdHook) p.forwardHookNs.push_back(medianNs(v));
      for (const auto& v : bwdHook) p.backwardHookNs.push_back(medianNs(v));
    }
    p.toBackwardNs = medianNs(toBackward);
    p.finalizeNs = medianNs(finalize);
    p.optimizerNs = medianNs(optimizer);
    p.reshardNs.assign(n, 0);
    for (size_t u = 0; u < n; ++u) p.reshardNs[index[u]] = medianNs(reshard[u]);
    p.copyOutNs.assign(n, 0);
    for (size_t u = 0; u < n; ++u) p.copyOutNs[index[u]] = medianNs(copyOut[u]);
    m.ranks.push_back(std::move(p));
  }
  fit.recordedStepNs = recorded.medianNs();
  // A collective every rank recorded lasts from the last rank's start to the last rank's end:
  // a ring's ranks finish at different times, and the replay ends it for all at once, as the
  // rank that finished last did (at 3 ranks on 2 cores the last arrival's own time missed the
  // recorded step by a fifth).
  for (auto& [key, ns] : shortest) {
    const Span& sp = spans[key];
    if (sp.ranks == rec.ranks.size() && sp.end > sp.start) ns = sp.end - sp.start;
  }
  // Across hosts, gathers on their own group share the links with the reduce-scatters (a
  // network, program.h): each collective's time is its time alone, the recording's sharing
  // taken out, and the replay adds back its own schedule's.
  m.sharedLink = m.host.hosts > 1;
  if (m.sharedLink) {
    std::vector<LaneSpan> ran;
    std::vector<int64_t*> of;
    for (auto& [key, ns] : shortest) {
      const Span& sp = spans[key];
      if (sp.ranks != rec.ranks.size() || sp.end <= sp.start) continue;
      ran.push_back({laneOf(std::get<0>(key), rec.runtime.gatherLane), sp.start, sp.end});
      of.push_back(&ns);
    }
    const std::vector<double> shared = linkSharedNs(ran);
    for (size_t i = 0; i < of.size(); ++i) {
      *of[i] = std::max<int64_t>(1, *of[i] - std::llround(shared[i]));
    }
  }
  std::tie(m.contention, m.contentionFitted) = modelContention(contention, m.host, m.worldSize);
  for (size_t i = 0; i < m.ranks.size(); ++i) {  // the typical step's overlaps: medians
    for (int direction = 0; direction < 2; ++direction) {
      std::vector<int64_t>& out =
          direction ? m.ranks[i].backwardOverlapNs : m.ranks[i].forwardOverlapNs;
      const size_t hooks = direction ? m.backward.size() : m.forward.size();
      for (size_t k = 0; k < hooks; ++k) {
        std::vector<int64_t> values;
        for (const auto& [ns, over] : contention[{i, direction, k}]) values.push_back(over);
        out.push_back(medianNs(values));
      }
    }
  }
  // The steps every rank has, in order, for the replay to run as they ran, with their
  // collectives' times.
  static const PathSegment::Kind kinds[] = {PathSegment::Kind::kAllGather,
                                            PathSegment::Kind::kReduceScatter,
                                            PathSegment::Kind::kAllreduce};
  for (auto& [step, ranks] : byStep) {
    bool all = true;
    for (const FsdpRankProfile& p : ranks) all = all && !p.forwardGapNs.empty();
    if (!all) continue;
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (ranks[i].optimizerNs < 0) ranks[i].optimizerNs = m.ranks[i].optimizerNs;
    }
    for (auto it = shortest.lower_bound({0, 0, INT64_MIN, 0}); it != shortest.end(); ++it) {
      const auto& [kind, unit, at, occurrence] = it->first;
      if (at != step) continue;
      // What it lost to sharing the cores, from where the ring ran it.
      const Span& sp = spans[it->first];
      const double lost = sp.end > sp.start ? shares.lostNs(CoreShares::kRing, sp.start, sp.end) /
                                                  static_cast<double>(sp.end - sp.start) *
                                                  static_cast<double>(it->second)
                                            : 0;
      m.recordedCollectives.push_back({kinds[kind], index[unit], m.samples.size(),
                                       static_cast<size_t>(occurrence), it->second,
                                       prefetchedKeys.count(it->first) > 0, lost});
    }
    m.samples.push_back(std::move(ranks));
  }

  // Bytes: what the unit gathers and reduces (a unit never gathered gathers what it reduces:
  // the same parameters, in the same dtype without mixed precision).
  for (size_t u = 0; u < n; ++u) {
    FsdpUnitModel& unit = m.units[index[u]];
    auto find = [&](int kind) {
      auto it = bytesOf.find({kind, u});
      return it == bytesOf.end() ? int64_t{0} : it->second;
    };
    unit.gradBytes = std::max(find(1), find(2));
    unit.paramBytes = find(0) > 0 ? find(0) : unit.gradBytes;
  }

  // The wire, per kind: the median over steps of each (kind, unit)'s shortest time.
  std::map<std::pair<int, size_t>, std::vector<int64_t>> perUnit;
  for (const auto& [key, ns] : shortest) {
    perUnit[{std::get<0>(key), std::get<1>(key)}].push_back(ns);
  }
  const char* ops[] = {"all_gather", "reduce_scatter", "allreduce"};
  std::vector<CostSample> byKind[3], all;
  for (const auto& [key, times] : perUnit) {
    const CostSample c{ops[key.first], bytesOf[key], m.worldSize, medianNs(times)};
    byKind[key.first].push_back(c);
    all.push_back(c);
  }
  fit.all = fitLinkCost(all);
  fit.gather = fitLinkCost(byKind[0]);
  fit.reduceScatter = fitLinkCost(byKind[1]);
  fit.allreduce = fitLinkCost(byKind[2]);
  // A kind the recording lacks (NO_SHARD's allreduce) is priced from the job's calibration
  // where it ran one (measured, not composed from the other kinds), else from all kinds' fit.
  std::optional<LinkFit> calibrated[3];
  for (int k = 0; k < 3; ++k) {
    if (const LinkFit c = calibratedLink(rec.calibration, ops[k]); c.ok) calibrated[k] = c;
  }
  LinkFit* kindFit[3] = {&fit.gather, &fit.reduceScatter, &fit.allreduce};
  LinkCost* kindLink[3] = {&m.gather, &m.reduceScatter, &m.allreduce};
  auto kindOf = [&](PathSegment::Kind kind) {
    return kind == PathSegment::Kind::kAllGather       ? 0
           : kind == PathSegment::Kind::kReduceScatter ? 1
                                                       : 2;
  };
  auto bytesOfCollective = [&](const FsdpModel::RecordedCollective& c) {
    return c.kind == PathSegment::Kind::kAllGather ? m.units[c.unit].paramBytes
                                                   : m.units[c.unit].gradBytes;
  };
  // The fits are of typical times (medians); the replay of the recorded schedule uses each
  // collective's own, tails included. So that a change the fitted cost prices is compared
  // like with like, each fitted cost is scaled to sum to the recorded times of the
  // collectives it prices (a kind not recorded: by all of them; from the calibration, by how
  // the recorded collectives compare with the calibration's price of them, the load).
  auto ratio = [&](auto priceOf, std::optional<int> only) {
    double recordedNs = 0, pricedNs = 0;
    for (const FsdpModel::RecordedCollective& c : m.recordedCollectives) {
      const int k = kindOf(c.kind);
      if (only && k != *only) continue;
      const double priced = priceOf(k, bytesOfCollective(c));
      if (priced <= 0) continue;
      recordedNs += static_cast<double>(c.ns);
      pricedNs += priced;
    }
    return recordedNs > 0 && pricedNs > 0 ? recordedNs / pricedNs : 1.0;
  };
  auto scaled = [](LinkCost link, double by) {
    link.stepNs *= by;
    link.nsPerByte *= by;
    return link;
  };
  for (int k = 0; k < 3; ++k) {
    if (kindFit[k]->ok) {
      const LinkCost own = kindFit[k]->link;
      *kindLink[k] =
          scaled(own, ratio(
                          [&](int, int64_t b) {
                            return static_cast<double>(collectiveNs(own, ops[k], b, m.worldSize));
                          },
                          k));
    } else if (calibrated[k]) {
      *kindFit[k] = *calibrated[k];
      fit.calibrated = true;
      const double load = ratio(
          [&](int kind, int64_t b) {
            return calibrated[kind] ? static_cast<double>(collectiveNs(calibrated[kind]->link,
                                                                       ops[kind], b, m.worldSize))
                                    : 0.0;
          },
          std::nullopt);
      *kindLink[k] = scaled(calibrated[k]->link, load);
    } else {
      const LinkCost all = fit.all.link;
      *kindLink[k] = scaled(
          all, ratio(
                   [&](int kind, int64_t b) {
                     return static_cast<double>(collectiveNs(all, ops[kind], b, m.worldSize));
                   },
                   std::nullopt));
    }
  }
  return fit;
}

}  // namespace ringx::replay
