// The DDP step replay (see ddp_replay.h for the model and why it is built this way).
#include "analysis/replay/ddp_replay.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "base/format.h"

namespace ringx::replay {
namespace {

// Steps replayed: the first starts every rank at 0; by the last, a rank that is faster than
// the others has been held back by the ring as often as it would be in a long run.
constexpr int kSteps = 4;

struct Choice {
  BucketLimits limits;
  bool view = false;
  int64_t worldSize = 1;
  LinkCost link;
};

Choice choose(const DdpModel& m, const DdpWhatIf& c) {
  Choice x;
  x.limits = m.limits;
  if (c.bucketCapBytes) x.limits = limitsForCap(*c.bucketCapBytes);  // the engine's rule
  if (c.firstBucketBytes) x.limits.firstBucketBytes = std::max<int64_t>(1, *c.firstBucketBytes);
  x.view = c.gradientAsBucketView.value_or(m.gradientAsBucketView);
  x.worldSize = c.worldSize.value_or(m.worldSize);
  x.link = c.link.value_or(m.link);
  return x;
}

// A gradient's bucket slot is filled in its hook, on the autograd thread: copied and scaled by
// 1/world, or with gradient_as_bucket_view scaled in place, the same memory traffic. Either
// way the recorded offsets of later gradients include it; the bucket is ready once its last
// gradient's pass is done. The view only saves the copy back at the end.
struct Offsets {
  std::vector<int64_t> ready;  // per parameter: when its slot is filled
  int64_t computeNs = 0;
};

Offsets offsetsFor(const DdpModel& m, const DdpRankProfile& r, bool computeFree) {
  const size_t n = m.params.size();
  Offsets o;
  o.ready.assign(n, 0);
  if (computeFree) return o;
  o.computeNs = r.backwardComputeNs;
  const double fill = std::max(0.0, m.copyNsPerByte);
  for (size_t p = 0; p < n; ++p) {
    const int64_t hook =
        p < r.gradReadyNs.size() && r.gradReadyNs[p] >= 0 ? r.gradReadyNs[p] : r.backwardComputeNs;
    const int64_t pass =
        static_cast<int64_t>(std::llround(fill * static_cast<double>(m.params[p].bytes)));
    o.ready[p] = std::min(o.computeNs, hook + pass);
  }
  return o;
}

}  // namespace

std::vector<BucketSpec> plannedBuckets(const DdpModel& m, const DdpWhatIf& change) {
  const Choice x = choose(m, change);
  std::vector<size_t> order = completeOrder(m.order, m.params.size());
  return assignBuckets(m.params, order, x.limits);
}

DdpReplay replayDdp(const DdpModel& m, const DdpWhatIf& change) {
  if (m.params.empty() || m.ranks.empty()) {
    throw std::invalid_argument(
        "the DDP model has no parameters or no ranks: the trace holds no "
        "DDP iteration with gradient readiness");
  }
  const Choice x = choose(m, change);
  if (x.view != m.gradientAsBucketView && m.copyNsPerByte < 0) {
    throw std::invalid_argument(
        "this recording timed no gradient copy (it ran with gradient_as_bucket_view=True), so "
        "the copies that gradient_as_bucket_view=False adds cannot be predicted; record a run "
        "without it");
  }
  const double copyNsPerByte = std::max(0.0, m.copyNsPerByte);
  const std::vector<BucketSpec> plan = plannedBuckets(m, change);
  const size_t nb = plan.size(), nr = m.ranks.size();

  std::vector<Offsets> offsets;
  for (const DdpRankProfile& r : m.ranks) offsets.push_back(offsetsFor(m, r, change.computeFree));
  std::vector<int64_t> wire(nb), copyBack(nb);
  for (size_t k = 0; k < nb; ++k) {
    wire[k] = change.commFree ? 0 : collectiveNs(x.link, "allreduce", plan[k].bytes, x.worldSize);
    copyBack[k] = x.view ? 0
                         : static_cast<int64_t>(
                               std::llround(static_cast<double>(plan[k].bytes) * copyNsPerByte));
    if (change.computeFree) copyBack[k] = 0;
  }
  auto compute = [&](int64_t ns) { return change.computeFree ? int64_t{0} : ns; };

  // Per step and rank: when it starts, and the times the last step's critical path needs.
  std::vector<int64_t> start(nr, 0), next(nr, 0);
  DdpReplay out;
  for (int step = 0; step < kSteps; ++step) {
    const bool last = step == kSteps - 1;
    std::vector<int64_t> backwardBegin(nr), computeEnd(nr);
    std::vector<std::vector<int64_t>> launch(nr, std::vector<int64_t>(nb));
    std::vector<std::vector<int64_t>> ready(nr, std::vector<int64_t>(nb));
    for (size_t r = 0; r < nr; ++r) {
      const DdpRankProfile& p = m.ranks[r];
      backwardBegin[r] = start[r] + compute(p.forwardNs) + compute(p.toBackwardNs);
      computeEnd[r] = backwardBegin[r] + offsets[r].computeNs;
      int64_t previous = backwardBegin[r];
      for (size_t k = 0; k < nb; ++k) {
        int64_t t = backwardBegin[r];
        for (size_t q : plan[k].params) t = std::max(t, backwardBegin[r] + offsets[r].ready[q]);
        ready[r][k] = t;
        // In bucket order: a bucket launches once it and every bucket before it are ready.
        previous = std::max(previous, t);
        launch[r][k] = previous;
      }
    }
    // The ring: collective k starts when every rank launched it and k-1 is done.
    std::vector<int64_t> ringStart(nb), ringEnd(nb);
    std::vector<size_t> lastLauncher(nb, 0);
    int64_t previousEnd = 0;
    for (size_t k = 0; k < nb; ++k) {
      int64_t arrive = 0;
      for (size_t r = 0; r < nr; ++r) {
        if (launch[r][k] >= arrive) {
          arrive = launch[r][k];
          lastLauncher[k] = r;
        }
      }
      ringStart[k] = std::max(arrive, previousEnd);
      ringEnd[k] = ringStart[k] + wire[k];
      previousEnd = ringEnd[k];
    }
    // Finalize on each rank: after its compute, wait for each bucket and copy it back (the
    // copy-backs' ends stay for the critical path).
    std::vector<int64_t> finalizeEnd(nr);
    std::vector<std::vector<int64_t>> copyEnds(nr, std::vector<int64_t>(nb));
    for (size_t r = 0; r < nr; ++r) {
      int64_t t = computeEnd[r];
      for (size_t k = 0; k < nb; ++k) copyEnds[r][k] = t = std::max(t, ringEnd[k]) + copyBack[k];
      finalizeEnd[r] = t;
      next[r] = t + compute(m.ranks[r].optimizerNs);
    }
    if (last) {
      // Coupled by the ring, the ranks settle into one period; the slowest is the one the
      // others wait for: the longest step, and of equal ones the last to start.
      size_t slow = 0;
      for (size_t r = 1; r < nr; ++r) {
        const int64_t period = next[r] - start[r], best = next[slow] - start[slow];
        if (period > best || (period == best && start[r] > start[slow])) slow = r;
      }
      const int64_t origin = start[slow];
      out.slowestRank = m.ranks[slow].rank;
      out.stepNs = next[slow] - start[slow];
      out.exposedCommNs = std::max<int64_t>(0, (nb ? ringEnd[nb - 1] : 0) - computeEnd[slow]);
      for (size_t k = 0; k < nb; ++k) {
        int64_t readyLast = 0;
        for (size_t r = 0; r < nr; ++r) readyLast = std::max(readyLast, ready[r][k]);
        out.buckets.push_back({plan[k].bytes, plan[k].params.size(), readyLast - origin,
                               ringStart[k] - origin, ringEnd[k] - origin});
        out.commNs += wire[k];
      }
      // The critical path, walked back from the slowest rank's next forward.
      using K = PathSegment::Kind;
      std::vector<PathSegment> path;
      auto add = [&](K kind, size_t r, int64_t bucket, int64_t b, int64_t e) {
        if (e > b) path.push_back({kind, m.ranks[r].rank, bucket, b - origin, e - origin});
      };
      add(K::kOptimizer, slow, -1, finalizeEnd[slow], next[slow]);
      // Finalize, backwards: each copy-back follows the later of the previous one and its
      // bucket's end; where the bucket's end decided, the ring is on the path.
      const std::vector<int64_t>& copyEnd = copyEnds[slow];
      size_t k = nb;
      size_t onRing = nb;  // the bucket where the path leaves finalize for the ring
      while (k > 0) {
        --k;
        add(K::kCopyBack, slow, static_cast<int64_t>(k), copyEnd[k] - copyBack[k], copyEnd[k]);
        const int64_t before = k ? copyEnd[k - 1] : computeEnd[slow];
        if (ringEnd[k] >= before && ringEnd[k] > computeEnd[slow]) {
          onRing = k;
          break;
        }
      }
      size_t computeRank = slow;
      int64_t computeUntil = computeEnd[slow];
      if (onRing < nb) {
        // Back along the ring: a collective started either after its predecessor or when its
        // last rank launched it (that rank's backward is then the path).
        size_t j = onRing;
        while (true) {
          add(K::kAllreduce, lastLauncher[j], static_cast<int64_t>(j), ringStart[j], ringEnd[j]);
          if (j > 0 && ringEnd[j - 1] >= launch[lastLauncher[j]][j]) {
            --j;
            continue;
          }
          computeRank = lastLauncher[j];
          computeUntil = ringStart[j];
          break;
        }
      }
      add(K::kBackward, computeRank, -1, backwardBegin[computeRank], computeUntil);
      add(K::kForward, computeRank, -1, start[computeRank], backwardBegin[computeRank]);
      std::reverse(path.begin(), path.end());
      out.criticalPath = std::move(path);
    }
    start = next;
  }
  return out;
}

namespace {

std::string capText(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

}  // namespace

CapChoice chooseBucketCap(const DdpModel& m, const std::vector<int64_t>& candidates,
                          int64_t defaultCap, double margin) {
  auto replayCap = [&](int64_t cap) {
    DdpWhatIf c;
    c.bucketCapBytes = cap;
    return replayDdp(m, c);
  };
  const DdpReplay atDefault = replayCap(defaultCap);
  CapChoice best{defaultCap, atDefault.stepNs, atDefault.stepNs, atDefault.buckets.size(), ""};
  const double bar = static_cast<double>(atDefault.stepNs) * (1 - margin);
  for (int64_t cap : candidates) {
    if (cap <= 0 || cap == defaultCap) continue;
    const DdpReplay r = replayCap(cap);
    if (static_cast<double>(r.stepNs) < bar && r.stepNs < best.predictedNs) {
      best = {cap, r.stepNs, atDefault.stepNs, r.buckets.size(), ""};
    }
  }
  best.reason = "bucket_cap_mb=" + capText(best.capBytes) + " (" + std::to_string(best.buckets) +
                (best.buckets == 1 ? " bucket" : " buckets") +
                "): " + formatDuration(best.predictedNs) + " a step predicted, against " +
                formatDuration(best.defaultNs) + " at " + capText(defaultCap);
  if (best.capBytes == defaultCap) {
    best.reason +=
        " (no cap predicted more than " + std::to_string(std::lround(margin * 100)) + "% faster)";
  }
  return best;
}

}  // namespace ringx::replay
