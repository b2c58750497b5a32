// The DDP replay model fitted from recorded steps (see ddp_fit.h for what comes from where).
#include "analysis/replay/ddp_fit.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>

#include "analysis/figures.h"

namespace ringx::replay {
namespace {

bool complete(const DdpStepRecord& s) {
  return s.forwardBeginNs > 0 && s.backwardBeginNs > 0 && s.computeEndNs >= s.backwardBeginNs &&
         s.finalizeEndNs >= s.computeEndNs;
}

}  // namespace

DdpFit fitDdpModel(const DdpRecording& rec) {
  if (rec.params.empty() || rec.ranks.empty()) {
    throw std::runtime_error("no parameters or no ranks were recorded: nothing to model");
  }
  DdpFit fit;
  DdpModel& m = fit.model;
  m.params = rec.params;
  m.limits = rec.limits;
  m.gradientAsBucketView = rec.gradientAsBucketView;
  m.worldSize = rec.worldSize;

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
        recorded.add(s.step, s.forwardBeginNs, r.steps[i + 1].forwardBeginNs);
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
  m.link = fit.wire.link;
  m.copyNsPerByte = m.gradientAsBucketView || copyBytes <= 0 ? -1 : copyNs / copyBytes;
  return fit;
}

}  // namespace ringx::replay
