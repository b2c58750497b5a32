// The DDP replay model fitted from recorded steps (see ddp_fit.h for what comes from where).
#include "analysis/replay/ddp_fit.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>

#include "analysis/figures.h"
#include "analysis/replay/core_shares.h"
#include "analysis/replay/program.h"

namespace ringx::replay {
namespace {

bool complete(const DdpStepRecord& s) {
  return s.forwardBeginNs > 0 && s.backwardBeginNs > 0 && s.computeEndNs >= s.backwardBeginNs &&
         s.finalizeEndNs >= s.computeEndNs;
}

// The buckets of a step in launch order (by index: the engine launches in index order).
std::vector<const DdpStepRecord::Bucket*> launched(const DdpStepRecord& s) {
  std::vector<const DdpStepRecord::Bucket*> out;
  for (const DdpStepRecord::Bucket& b : s.buckets) out.push_back(&b);
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->index < b->index; });
  return out;
}

// One rank's step as the replay takes it: its own durations; its gradients' offsets where the
// step sampled them, else the median's scaled to the step's backward; its allreduces in flight
// during backward, each from when the ring started it (`starts`, by launch order: every rank
// had launched it and the previous one was done) to its wire end on this rank. Before the
// start the communication thread waits for a late peer asleep (transport/doorbell.h), so it
// takes no core from compute.
DdpRankProfile profileOf(const DdpStepRecord& s, const DdpRankProfile& median,
                         const std::vector<int64_t>& starts) {
  DdpRankProfile p;
  p.rank = median.rank;
  p.forwardNs = std::max<int64_t>(0, s.forwardEndNs - s.forwardBeginNs);
  p.toBackwardNs = std::max<int64_t>(0, s.backwardBeginNs - s.forwardEndNs);
  p.backwardComputeNs = s.computeEndNs - s.backwardBeginNs;
  p.optimizerNs = s.optimizerNs >= 0 ? s.optimizerNs : median.optimizerNs;
  const double scale =
      median.backwardComputeNs > 0
          ? static_cast<double>(p.backwardComputeNs) / static_cast<double>(median.backwardComputeNs)
          : 1.0;
  p.gradReadyNs.assign(median.gradReadyNs.size(), -1);
  for (size_t q = 0; q < median.gradReadyNs.size(); ++q) {
    if (median.gradReadyNs[q] >= 0) {
      p.gradReadyNs[q] = std::llround(static_cast<double>(median.gradReadyNs[q]) * scale);
    }
  }
  for (const auto& [param, ns] : s.grads) {
    if (param < p.gradReadyNs.size()) p.gradReadyNs[param] = ns - s.backwardBeginNs;
  }
  int64_t copies = 0, lastWireEnd = 0;
  for (const DdpStepRecord::Bucket& b : s.buckets) {
    copies = copies >= 0 && b.copyBackNs >= 0 ? copies + b.copyBackNs : -1;
    lastWireEnd = std::max(lastWireEnd, b.wireEndNs);
  }
  p.copyBackNs = s.buckets.empty() ? -1 : copies;
  p.finalizeRestNs = std::max<int64_t>(
      0, s.finalizeEndNs - std::max(s.computeEndNs, lastWireEnd) - std::max<int64_t>(0, copies));
  size_t i = 0;
  for (const DdpStepRecord::Bucket* b : launched(s)) {
    const int64_t from = i < starts.size() ? starts[i] : -1;
    ++i;
    if (b->launchNs <= 0 || b->wireEndNs <= 0 || from < 0) continue;
    if (b->wireEndNs > from) {
      p.flightNs.emplace_back(from - s.backwardBeginNs, b->wireEndNs - s.backwardBeginNs);
    }
  }
  return p;
}

// The recorded steps every rank has, their allreduces as they ran, and contention (ddp_fit.h).
void fitSteps(const DdpRecording& rec, DdpModel* m) {
  std::map<int64_t, std::vector<const DdpStepRecord*>> byStep;
  for (size_t r = 0; r < rec.ranks.size(); ++r) {
    for (const DdpStepRecord& s : rec.ranks[r].steps) {
      if (!complete(s)) continue;
      std::vector<const DdpStepRecord*>& at = byStep[s.step];
      at.resize(rec.ranks.size(), nullptr);
      at[r] = &s;
    }
  }
  // Per step every rank has: when each allreduce started on the ring (by launch order), and
  // when each rank's finalize compute began and its step ended.
  struct Shared {
    const std::vector<const DdpStepRecord*>* records;
    std::vector<int64_t> starts, finalizeFrom, stepEnd;
  };
  std::vector<Shared> shared;
  // The host's cores as the recording shared them (core_shares.h), over every step at once (a
  // rank's step overlaps its neighbours' on the others): each rank computes from forward begin
  // to backward's compute end, and from finalize's compute (after its last allreduce) to its
  // next forward (the optimizer, and the training loop's own work around it); the ring runs
  // each allreduce from its start to the last wire end.
  std::vector<CoreShares::Intervals> compute(rec.ranks.size());
  CoreShares::Intervals ring;
  for (const auto& [step, records] : byStep) {
    if (std::find(records.begin(), records.end(), nullptr) != records.end()) continue;
    Shared& x = shared.emplace_back();
    x.records = &records;
    // Each bucket's allreduce as the ring ran it: from the last rank's start (launched, and
    // the previous one done) to the last wire end.
    std::vector<int64_t>& times = m->recordedAllreduceNs.emplace_back();
    std::vector<int64_t> bytes;
    std::vector<std::vector<const DdpStepRecord::Bucket*>> orders;
    for (const DdpStepRecord* s : records) orders.push_back(launched(*s));
    int64_t previousEnd = 0;
    for (size_t i = 0;; ++i) {
      int64_t launch = 0, end = 0;
      bool known = true, any = false;
      for (const std::vector<const DdpStepRecord::Bucket*>& order : orders) {
        if (i >= order.size()) {
          known = false;
          continue;
        }
        any = true;
        if (&order == &orders.front()) bytes.push_back(order[i]->bytes);
        known = known && order[i]->launchNs > 0 && order[i]->wireEndNs > 0;
        launch = std::max(launch, order[i]->launchNs);
        end = std::max(end, order[i]->wireEndNs);
      }
      if (!any) break;
      const int64_t start = std::max(launch, previousEnd);
      x.starts.push_back(known ? start : -1);
      if (known && end > start) ring.emplace_back(start, end);
      times.push_back(known && end >= start ? end - start : -1);
      previousEnd = std::max(previousEnd, end);
    }
    if (m->recordedBucketBytes.empty()) m->recordedBucketBytes = bytes;
    const auto next = byStep.find(step + 1);
    for (size_t r = 0; r < records.size(); ++r) {
      const DdpStepRecord& s = *records[r];
      int64_t lastWireEnd = 0;
      for (const DdpStepRecord::Bucket& b : s.buckets) {
        lastWireEnd = std::max(lastWireEnd, b.wireEndNs);
      }
      x.finalizeFrom.push_back(std::min(s.finalizeEndNs, std::max(s.computeEndNs, lastWireEnd)));
      x.stepEnd.push_back(
          next != byStep.end() && next->second.size() > r && next->second[r] != nullptr
              ? std::max(s.finalizeEndNs, next->second[r]->forwardBeginNs)
              : s.finalizeEndNs + std::max<int64_t>(0, s.optimizerNs >= 0
                                                           ? s.optimizerNs
                                                           : m->ranks[r].optimizerNs));
      compute[r].emplace_back(s.forwardBeginNs, s.computeEndNs);
      compute[r].emplace_back(x.finalizeFrom.back(), x.stepEnd.back());
    }
  }
  const CoreShares shares(m->host, CoreShares::ranksPerRecordedRank(m->worldSize, rec.ranks.size()),
                          compute, ring);
  m->ringLossShare = shares.ringLossShare(ring);
  // Each recorded allreduce's loss, from where the ring ran it.
  for (size_t i = 0; i < shared.size(); ++i) {
    std::vector<double>& lost = m->recordedAllreduceLostNs.emplace_back();
    for (size_t k = 0; k < shared[i].starts.size(); ++k) {
      const int64_t ns = m->recordedAllreduceNs[i][k], from = shared[i].starts[k];
      lost.push_back(ns > 0 && from >= 0 ? shares.lostNs(CoreShares::kRing, from, from + ns) : 0);
    }
  }

  ContentionSamples contention;
  for (const Shared& x : shared) {
    const std::vector<const DdpStepRecord*>& records = *x.records;
    std::vector<DdpRankProfile>& ranks = m->samples.emplace_back();
    for (size_t r = 0; r < records.size(); ++r) {
      const DdpStepRecord& s = *records[r];
      ranks.push_back(profileOf(s, m->ranks[r], x.starts));
      ranks.back().lossRates =
          shares.lossRates(r, s.forwardBeginNs, x.stepEnd[r], s.backwardBeginNs);
      ranks.back().finalizeFromNs = x.finalizeFrom[r] - s.backwardBeginNs;
      // Backward between two launches (and after the last), against its overlap.
      const auto merged = mergeIntervals(ranks.back().flightNs);
      int64_t previous = 0;
      size_t k = 0;
      for (const DdpStepRecord::Bucket* b : launched(s)) {
        if (b->launchNs <= 0) continue;
        const int64_t at =
            std::clamp(b->launchNs - s.backwardBeginNs, previous, ranks.back().backwardComputeNs);
        contention[{r, 1, k++}].emplace_back(at - previous, coveredNs(merged, previous, at));
        previous = at;
      }
      const int64_t end = ranks.back().backwardComputeNs;
      contention[{r, 1, k}].emplace_back(end - previous, coveredNs(merged, previous, end));
    }
  }
  std::tie(m->contention, m->contentionFitted) = modelContention(contention, m->host, m->worldSize);
  // The typical step's finalize: medians over the samples.
  for (size_t r = 0; r < m->ranks.size(); ++r) {
    std::vector<int64_t> copies, rest;
    for (const std::vector<DdpRankProfile>& step : m->samples) {
      if (step[r].copyBackNs >= 0) copies.push_back(step[r].copyBackNs);
      rest.push_back(step[r].finalizeRestNs);
    }
    m->ranks[r].copyBackNs = copies.empty() ? -1 : medianNs(copies);
    m->ranks[r].finalizeRestNs = medianNs(rest);
  }
}

}  // namespace

namespace {

std::vector<int64_t> bucketBytesOf(const DdpStepRecord& s) {
  std::vector<int64_t> out;
  for (const DdpStepRecord::Bucket* b : launched(s)) out.push_back(b->bytes);
  return out;
}

// The steps that ran the last recorded step's buckets: an earlier plan's (torch DDP's first
// iteration, before it rebuilds its buckets in readiness order, under the same limits) would
// time the wire and the collectives of another plan as this one's.
DdpRecording underLastPlan(const DdpRecording& rec) {
  const DdpStepRecord* last = nullptr;
  for (const DdpStepRecord& s : rec.ranks.front().steps) {
    if (!s.buckets.empty() && (last == nullptr || s.step > last->step)) last = &s;
  }
  if (last == nullptr) return rec;
  const std::vector<int64_t> plan = bucketBytesOf(*last);
  DdpRecording out = rec;
  for (DdpRankRecord& r : out.ranks) {
    r.steps.erase(std::remove_if(r.steps.begin(), r.steps.end(),
                                 [&](const DdpStepRecord& s) {
                                   return !s.buckets.empty() && bucketBytesOf(s) != plan;
                                 }),
                  r.steps.end());
  }
  return out;
}

}  // namespace

DdpFit fitDdpModel(const DdpRecording& input) {
  if (input.params.empty() || input.ranks.empty()) {
    throw std::runtime_error("no parameters or no ranks were recorded: nothing to model");
  }
  const DdpRecording rec = underLastPlan(input);
  DdpFit fit;
  DdpModel& m = fit.model;
  m.params = rec.params;
  m.limits = rec.limits;
  m.gradientAsBucketView = rec.gradientAsBucketView;
  m.worldSize = rec.worldSize;
  m.host = rec.host;

  fit.steps = UINT64_MAX;
  fit.gradSteps = UINT64_MAX;
  RecordedSteps recorded;
  for (const DdpRankRecord& r : rec.ranks) {
    DdpRankProfile prof;
    prof.rank = r.rank;
    std::vector<int64_t> fwd, toBwd, compute, opt;
    std::vector<std::vector<int64_t>> ready(m.params.size());
    uint64_t used = 0, withGrads = 0;
    for (size_t i = 0; i < r.steps.size(); ++i) {
      const DdpStepRecord& s = r.steps[i];
      if (!complete(s)) continue;
      ++used;
      fwd.push_back(std::max<int64_t>(0, s.forwardEndNs - s.forwardBeginNs));
      toBwd.push_back(std::max<int64_t>(0, s.backwardBeginNs - s.forwardEndNs));
      compute.push_back(s.computeEndNs - s.backwardBeginNs);
      if (s.optimizerNs >= 0) opt.push_back(s.optimizerNs);
      if (i + 1 < r.steps.size() && r.steps[i + 1].step == s.step + 1) {
        recorded.add(r.rank, s.step, s.forwardBeginNs, r.steps[i + 1].forwardBeginNs);
      }
      bool any = false;
      for (const auto& [param, ns] : s.grads) {
        if (param >= ready.size()) continue;
        ready[param].push_back(ns - s.backwardBeginNs);
        any = true;
      }
      withGrads += any ? 1 : 0;
    }
    if (used == 0) {
      throw std::runtime_error("rank " + std::to_string(r.rank) +
                               " has no complete DDP step under the recorded bucket plan");
    }
    prof.forwardNs = medianNs(fwd);
    prof.toBackwardNs = medianNs(toBwd);
    prof.backwardComputeNs = medianNs(compute);
    prof.optimizerNs = medianNs(opt);
    for (const auto& v : ready) prof.gradReadyNs.push_back(v.empty() ? -1 : medianNs(v));
    fit.steps = std::min(fit.steps, used);
    fit.gradSteps = std::min(fit.gradSteps, withGrads);
    m.ranks.push_back(std::move(prof));
  }
  if (fit.gradSteps == 0) {
    throw std::runtime_error(
        "no step under the recorded bucket plan recorded gradient readiness on every rank; "
        "run more steps");
  }
  fit.recordedStepNs = recorded.medianNs();

  // The build order: the lowest rank's first step with gradient readiness, by hook time.
  for (const DdpStepRecord& s : rec.ranks.front().steps) {
    if (s.grads.empty()) continue;
    std::vector<std::pair<int64_t, size_t>> seen;
    for (const auto& [param, ns] : s.grads) seen.emplace_back(ns, param);
    std::stable_sort(seen.begin(), seen.end());
    for (const auto& [ns, param] : seen) m.order.push_back(param);
    break;
  }
  m.order = completeOrder(m.order, m.params.size());

  // The wire, and one gradient pass per byte.
  std::map<std::pair<int64_t, int64_t>, int64_t> shortest;  // (bucket, step) -> ns
  std::map<int64_t, int64_t> bucketBytes;
  double copyNs = 0, copyBytes = 0;
  for (const DdpRankRecord& r : rec.ranks) {
    for (const DdpStepRecord& s : r.steps) {
      for (const DdpStepRecord::Bucket& b : s.buckets) {
        if (b.wireNs < 0 || b.index < 0) continue;
        auto [at, fresh] = shortest.emplace(std::make_pair(b.index, s.step), b.wireNs);
        if (!fresh) at->second = std::min(at->second, b.wireNs);
        bucketBytes[b.index] = b.bytes;
        if (b.copyBackNs >= 0) {
          copyNs += static_cast<double>(b.copyBackNs);
          copyBytes += static_cast<double>(b.bytes);
        }
      }
    }
  }
  std::map<int64_t, std::vector<int64_t>> perBucket;
  for (const auto& [key, ns] : shortest) perBucket[key.first].push_back(ns);
  std::vector<CostSample> samples;
  for (const auto& [bucket, times] : perBucket) {
    samples.push_back({"allreduce", bucketBytes[bucket], m.worldSize, medianNs(times)});
  }
  fit.wire = fitLinkCost(samples);
  if (const LinkFit calibrated = calibratedLink(rec.calibration, "allreduce"); calibrated.ok) {
    fit.wire = calibrated;
    fit.calibrated = true;
  }
  m.link = fit.wire.link;
  m.copyNsPerByte = m.gradientAsBucketView || copyBytes <= 0 ? -1 : copyNs / copyBytes;
  fitSteps(rec, &m);
  return fit;
}

}  // namespace ringx::replay
