// The DDP step replay (see ddp_replay.h for the model and why it is built this way).
#include "analysis/replay/ddp_replay.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "analysis/replay/program.h"
#include "base/format.h"

namespace ringx::replay {
namespace {

struct Choice {
  BucketLimits limits;
  bool view = false;
  int64_t worldSize = 1;
  LinkCost link;
};

Choice choose(const DdpModel& m, const DdpWhatIf& c) {
  Choice x;
  x.limits = changedLimits(m.limits, c.bucketCapBytes, c.firstBucketBytes);
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
  const bool recordedSteps = m.samples.size() >= 2;
  const size_t steps = recordedSteps ? m.samples.size() : kTypicalSteps;

  // The program: slots 0 forward, 1 the loss, 2 + k backward up to bucket k's launch, 2 + nb
  // the rest of backward, 3 + nb + k bucket k's copy back, 3 + 2 nb the rest of finalize, 4 +
  // 2 nb the optimizer.
  const size_t rest = 2 + nb, copy = 3 + nb, finalize = 3 + 2 * nb, optimizer = 4 + 2 * nb;
  using K = PathSegment::Kind;
  Program program;
  for (size_t step = 0; step < steps; ++step) {
    program.beginStep();
    program.compute(K::kForward, 0);
    program.compute(K::kForward, 1);
    std::vector<size_t> issued;
    for (size_t k = 0; k < nb; ++k) {
      program.compute(K::kBackward, 2 + k);
      issued.push_back(program.issue(K::kAllreduce, plan[k].bytes, 0, static_cast<int64_t>(k)));
    }
    program.compute(K::kBackward, rest);
    for (size_t k = 0; k < nb; ++k) {
      program.wait(issued[k]);
      program.compute(K::kCopyBack, copy + k, static_cast<int64_t>(k));
    }
    program.compute(K::kBackward, finalize);
    program.compute(K::kOptimizer, optimizer);
  }
  // Each allreduce: as it ran that step under the recorded plan, else the ring's fitted cost,
  // scaled by how that step's recorded allreduces compared with the fit (so that another plan
  // keeps the step's jitter and the fit's error cancels against the recorded plan's; not for
  // another wire, which is the question asked).
  std::vector<int64_t> planBytes;
  for (const BucketSpec& b : plan) planBytes.push_back(b.bytes);
  const bool recordedRing = recordedSteps && !change.modelledCollectives && !change.link;
  const bool asRecorded =
      recordedRing && x.worldSize == m.worldSize && planBytes == m.recordedBucketBytes;
  std::vector<double> stepScale(steps, 1.0);
  for (size_t step = 0; recordedRing && step < steps && step < m.recordedAllreduceNs.size();
       ++step) {
    const std::vector<int64_t>& ran = m.recordedAllreduceNs[step];
    double recorded = 0, fitted = 0;
    for (size_t k = 0; k < ran.size() && k < m.recordedBucketBytes.size(); ++k) {
      if (ran[k] < 0) {
        recorded = fitted = 0;
        break;
      }
      recorded += static_cast<double>(ran[k]);
      fitted += static_cast<double>(
          collectiveNs(m.link, "allreduce", m.recordedBucketBytes[k], m.worldSize));
    }
    if (recorded > 0 && fitted > 0) stepScale[step] = recorded / fitted;
  }
  // Another world size on the same hosts shares their cores out differently (cost_model.h).
  const double share = hostShareRatio(m.host, m.worldSize, x.worldSize);
  for (ProgramCollective& c : program.collectives) {
    const size_t k = static_cast<size_t>(c.owner);
    const std::vector<int64_t>* ran = asRecorded && c.step < m.recordedAllreduceNs.size()
                                          ? &m.recordedAllreduceNs[c.step]
                                          : nullptr;
    if (change.commFree) {
      c.ns = 0;
    } else if (ran && k < ran->size() && (*ran)[k] >= 0) {
      c.ns = (*ran)[k];
      if (c.step < m.recordedAllreduceLostNs.size() &&
          k < m.recordedAllreduceLostNs[c.step].size()) {
        c.lostNs = m.recordedAllreduceLostNs[c.step][k];
      }
    } else {
      c.ns = std::llround(
          static_cast<double>(collectiveNs(x.link, "allreduce", c.bytes, x.worldSize)) *
          stepScale[c.step] * share);
      c.lostNs = static_cast<double>(c.ns) * m.ringLossShare;
    }
  }

  // Per rank and step: the slots' durations, and backward's recorded overlap with the rank's
  // allreduces in flight, for this plan's cuts.
  ProgramTimes times;
  times.contention = recordedSteps && !change.computeFree ? m.contention : 0;
  times.computeScale = share;
  // The host's cores shared by this schedule (core_shares.h), where the steps recorded how
  // they were shared.
  const bool canShare = recordedSteps && !change.computeFree && m.host.cores > 0;
  const bool sharing = canShare && change.sharedCores && x.worldSize == m.worldSize;
  if (sharing) {
    times.host = m.host;
    times.world = x.worldSize;
    times.computeScale = 1;
    times.lost.resize(nr);
  }
  // Another, larger world: its every rank (program.h's replayedRanks).
  const size_t ranks =
      recordedSteps && x.worldSize > m.worldSize ? replayedRanks(nr, x.worldSize) : nr;
  for (size_t r = 0; r < ranks; ++r) {
    times.ranks.push_back(r < nr ? m.ranks[r].rank : static_cast<int32_t>(r));
    times.durations.emplace_back();
    times.overlaps.emplace_back();
    for (size_t step = 0; step < steps; ++step) {
      const RecordedSource from = recordedSourceOf(r, step, nr, steps);
      const DdpRankProfile& p = recordedSteps && from.rank < m.samples[from.step].size()
                                    ? m.samples[from.step][from.rank]
                                    : m.ranks[from.rank];
      const Offsets o = offsetsFor(m, p, change.computeFree);
      std::vector<int64_t> d(optimizer + 1, 0), over(optimizer + 1, 0);
      const auto flights = mergeIntervals(p.flightNs);
      int64_t previous = 0;  // in bucket order: a bucket launches once every one before it did
      for (size_t k = 0; k < nb; ++k) {
        int64_t ready = 0;
        for (size_t q : plan[k].params) ready = std::max(ready, o.ready[q]);
        const int64_t launch = std::max(previous, ready);
        d[2 + k] = launch - previous;
        over[2 + k] = coveredNs(flights, previous, launch);
        previous = launch;
      }
      d[rest] = std::max<int64_t>(0, o.computeNs - previous);
      over[rest] = coveredNs(flights, previous, o.computeNs);
      if (!change.computeFree) {
        d[0] = p.forwardNs;
        d[1] = p.toBackwardNs;
        d[optimizer] = p.optimizerNs;
        d[finalize] = p.finalizeRestNs;
        // The step's own copies back where it timed them (shared out by bytes), else one pass
        // per byte.
        int64_t planBytesTotal = 0;
        for (const BucketSpec& b : plan) planBytesTotal += b.bytes;
        for (size_t k = 0; k < nb && !x.view; ++k) {
          d[copy + k] = p.copyBackNs >= 0 && !m.gradientAsBucketView && planBytesTotal > 0
                            ? std::llround(static_cast<double>(p.copyBackNs) *
                                           static_cast<double>(plan[k].bytes) /
                                           static_cast<double>(planBytesTotal))
                            : std::llround(static_cast<double>(plan[k].bytes) * copyNsPerByte);
        }
      }
      if (sharing) {
        // Each slot's loss where it ran in the recorded step: forward and the loss before
        // backward, backward between this plan's launches, finalize's and the optimizer's.
        const std::vector<LossRate>& rates = p.lossRates;
        std::vector<double> lost(d.size(), 0);
        lost[0] = lostIn(rates, -(p.toBackwardNs + p.forwardNs), -p.toBackwardNs);
        lost[1] = lostIn(rates, -p.toBackwardNs, 0);
        int64_t at = 0;
        for (size_t k = 0; k < nb; ++k) {
          lost[2 + k] = lostIn(rates, at, at + d[2 + k]);
          at += d[2 + k];
        }
        lost[rest] = lostIn(rates, at, at + d[rest]);
        // Copies and the rest of finalize: the recorded finalize's rate, over this plan's.
        const int64_t finalizeNs = std::max<int64_t>(0, p.copyBackNs) + p.finalizeRestNs;
        const double rate = finalizeNs > 0
                                ? lostIn(rates, p.finalizeFromNs, p.finalizeFromNs + finalizeNs) /
                                      static_cast<double>(finalizeNs)
                                : 0;
        for (size_t k = 0; k < nb; ++k) lost[copy + k] = rate * static_cast<double>(d[copy + k]);
        lost[finalize] = rate * static_cast<double>(d[finalize]);
        const int64_t optimizerFrom = p.finalizeFromNs + finalizeNs;
        lost[optimizer] = lostIn(rates, optimizerFrom, optimizerFrom + d[optimizer]);
        times.lost[r].push_back(std::move(lost));
      }
      times.durations[r].push_back(std::move(d));
      times.overlaps[r].push_back(std::move(over));
    }
  }
  const ProgramRun run = runProgram(program, times);

  DdpReplay out;
  if (canShare && change.sharedCores && !sharing) {
    DdpWhatIf unchanged;
    unchanged.sharedCores = false;
    out.referenceNs = replayDdp(m, unchanged).stepNs;
  }
  out.stepNs = run.stepNs;
  out.stepLowNs = run.stepLowNs;
  out.stepHighNs = run.stepHighNs;
  out.slowestRank = run.slowestRank;
  out.criticalPath = run.criticalPath;
  // Communication after backward's compute: the slowest rank's waits in finalize.
  out.exposedCommNs = run.exposedCommNs;
  for (size_t c = 0; c < program.collectives.size(); ++c) {
    const ProgramCollective& ar = program.collectives[c];
    if (ar.step != run.typical) continue;
    const size_t k = static_cast<size_t>(ar.owner);
    out.buckets.push_back(
        {plan[k].bytes, plan[k].params.size(), run.issuedNs[c], run.startNs[c], run.endNs[c]});
    out.commNs += ar.ns;
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
    c.modelledCollectives = true;  // the default on the same footing as the others
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
