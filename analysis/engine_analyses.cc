// The DDP and FSDP engines' iterations, buckets and units (see trace_analyses.h for what each
// computes and why).
#include "analysis/trace_analyses.h"

#include <algorithm>
#include <map>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "analysis/profiler_ddp.h"
#include "analysis/profiler_fsdp.h"
#include "analysis/replay/bucket_plan.h"
#include "analysis/store_reading.h"
#include "base/error.h"

namespace ringx::analysis {
using namespace store_reading;

// ---- DDP --------------------------------------------------------------------------

namespace {

// Phase spans of one (rank, step) on the "ddp" or "fsdp" track.
struct Phases {
  int64_t forwardBegin = 0, forward = 0, backwardBegin = 0, backwardEnd = 0, backward = 0,
          optimizer = 0;
  bool hasBackward = false, hasForward = false, hasOptimizer = false;
};

// The names of the engines' phase spans as ids.
struct PhaseNames {
  explicit PhaseNames(const StringPool& p)
      : forward(p.find("forward")), backward(p.find("backward")), optimizer(p.find("optimizer")) {}
  uint32_t forward, backward, optimizer;
  // Adds a phase span to its step's phases; false when it is none of them.
  bool add(std::unordered_map<int64_t, Phases>& steps, const Span& s, int64_t step) const {
    if (s.name == 0) return false;
    if (s.name == forward) {
      Phases& p = steps[step];
      p.forwardBegin = p.hasForward ? std::min(p.forwardBegin, s.begin) : s.begin;
      p.forward += s.duration();
      p.hasForward = true;
    } else if (s.name == backward) {
      Phases& p = steps[step];
      p.backwardBegin = p.hasBackward ? std::min(p.backwardBegin, s.begin) : s.begin;
      p.backwardEnd = std::max(p.backwardEnd, s.end);
      p.backward += s.duration();
      p.hasBackward = true;
    } else if (s.name == optimizer) {
      Phases& p = steps[step];
      p.optimizer += s.duration();
      p.hasOptimizer = true;
    } else {
      return false;
    }
    return true;
  }
};

// The phase means of a DdpAnalysis or FsdpAnalysis (the same fields).
template <typename Analysis>
void setPhaseMeans(Analysis& a, const PhaseTotals& t, int64_t exposed, uint64_t iterations) {
  a.forwardMeanNs = meanOf(t.forward, t.forwards);
  a.backwardMeanNs = meanOf(t.backward, t.backwards);
  a.optimizerMeanNs = meanOf(t.optimizer, t.optimizers);
  a.exposedMeanNs = meanOf(exposed, iterations);
}

// Every iteration has a backward; forward and optimizer spans may be missing
// (the first step's optimizer, a trace cut off mid-step), so they keep counts
// of their own.
void addPhases(PhaseTotals& t, const Phases& p) {
  if (p.hasForward) {
    t.forward += p.forward;
    ++t.forwards;
  }
  t.backward += p.backward;
  ++t.backwards;
  if (p.hasOptimizer) {
    t.optimizer += p.optimizer;
    ++t.optimizers;
  }
}

// The steps that have a backward span (the iterations), ascending.
std::vector<int64_t> sortedSteps(const std::unordered_map<int64_t, Phases>& steps) {
  std::vector<int64_t> out;
  for (const auto& [step, p] : steps)
    if (p.hasBackward) out.push_back(step);
  std::sort(out.begin(), out.end());
  return out;
}

int64_t positive(int64_t v) { return std::max<int64_t>(0, v); }
int64_t difference(int64_t later, int64_t earlier) {
  return later > 0 && earlier > 0 ? positive(later - earlier) : 0;
}

}  // namespace

DdpAnalysis analyzeDdp(const TraceStore& store, std::string* notRecovered) {
  DdpBuilder builder;
  for (const RankData& rank : store.ranks()) builder.addRank(store, rank);
  DdpAnalysis d = builder.finish();
  if (d.iterationCount == 0 && holdsProfiledTorchDdp(store)) {
    // As analyzeFsdp: torch DDP as its profiler traces hold it.
    try {
      const replay::DdpRecording rec = profiledTorchDdp(store).recording;
      DdpBuilder recorded;
      for (size_t r = 0; r < rec.ranks.size(); ++r) recorded.addRecordedRank(rec, r);
      d = recorded.finish();
    } catch (const std::runtime_error& e) {
      if (notRecovered != nullptr) *notRecovered = e.what();
    }
  }
  return d;
}

void DdpBuilder::addRank(const TraceStore& store, const RankData& rank) {
  const Keys keys(store.strings());
  const PhaseNames phases(store.strings());
  const uint32_t bucketName = store.strings().find("bucket");
  const uint32_t rebuildName = store.strings().find("bucket_rebuild");
  const std::string_view bucketPrefix = trace::track::kDdpBucketPrefix;

  std::unordered_map<int64_t, Phases> steps;
  std::vector<std::pair<int64_t, DdpBucketSample>> samples;  // (step, sample)
  for (uint32_t t = 0; t < rank.tracks.size(); ++t) {
    const Track& track = rank.tracks[t];
    if (track.kind == TrackKind::kDdp) {
      forAllSpans(track, [&](uint32_t, uint32_t, const Span& s) {
        if (s.name != 0 && s.name == rebuildName) {
          ++rebuilds_;
          return;
        }
        phases.add(steps, s, ArgRange(rank, s).integer(keys.step, -1));
      });
    } else if (track.kind == TrackKind::kDdpBucket) {
      // The track's own index, should a span lack its bucket argument.
      const std::string_view suffix = store.str(track.name).substr(bucketPrefix.size());
      int64_t trackBucket = 0;
      for (char c : suffix) trackBucket = c >= '0' && c <= '9' ? trackBucket * 10 + (c - '0') : 0;
      forAllSpans(track, [&](uint32_t level, uint32_t index, const Span& s) {
        if (bucketName == 0 || s.name != bucketName) return;
        const ArgRange a(rank, s);
        DdpBucketSample b;
        b.bucket = a.integer(keys.bucket, trackBucket);
        b.bytes = a.integer(keys.bytes, 0);
        b.params = a.integer(keys.params, 0);
        b.seq = a.integer(keys.seq, -1);
        b.beginNs = s.begin;
        b.endNs = s.end;
        b.firstGradNs = a.integer(keys.firstGrad, 0);
        b.readyNs = a.integer(keys.ready, 0);
        b.launchNs = a.integer(keys.launch, 0);
        b.wireStartNs = a.integer(keys.wireStart, 0);
        b.wireEndNs = a.integer(keys.wireEnd, 0);
        b.copyBackNs = a.integer(keys.copyBack, 0);
        b.exposedNs = positive(a.integer(keys.exposed, 0));
        b.launchDelayNs = difference(b.launchNs, b.readyNs);
        b.wireNs = difference(b.wireEndNs, b.wireStartNs);
        analysis::CommOverlap one;
        one.add(b.wireNs, b.exposedNs);
        b.hiddenShare = one.hiddenShare();
        b.span = SpanRef{rank.rank, t, level, index};
        samples.emplace_back(a.integer(keys.step, -1), b);
      });
    }
  }

  // This rank's iterations, kept until its buckets are in (the exposed time of
  // an iteration is its most exposed bucket's).
  std::vector<DdpIteration> iterations;
  PhaseTotals totals;
  for (int64_t step : sortedSteps(steps)) {
    const Phases& p = steps[step];
    DdpIteration it;
    it.rank = rank.rank;
    it.step = step;
    it.forwardBeginNs = p.forwardBegin;
    it.forwardNs = p.forward;
    it.backwardBeginNs = p.backwardBegin;
    it.backwardEndNs = p.backwardEnd;
    it.backwardNs = p.backward;
    it.optimizerNs = p.optimizer;
    addPhases(totals, p);
    iterations.push_back(std::move(it));
  }
  addIterations(rank.rank, std::move(iterations), totals, samples);
}

void DdpBuilder::addRecordedRank(const replay::DdpRecording& rec, size_t rankIndex) {
  const replay::DdpRankRecord& rank = rec.ranks.at(rankIndex);
  std::vector<DdpIteration> iterations;
  std::vector<std::pair<int64_t, DdpBucketSample>> samples;
  PhaseTotals totals;
  for (const replay::DdpStepRecord& s : rank.steps) {
    DdpIteration& it = iterations.emplace_back();
    it.rank = rank.rank;
    it.step = s.step;
    it.forwardBeginNs = s.forwardBeginNs;
    it.forwardNs = s.forwardEndNs - s.forwardBeginNs;
    it.backwardBeginNs = s.backwardBeginNs;
    it.backwardEndNs = s.computeEndNs;
    it.backwardNs = s.computeEndNs - s.backwardBeginNs;
    it.optimizerNs = std::max<int64_t>(0, s.optimizerNs);
    totals.forward += it.forwardNs;
    ++totals.forwards;
    totals.backward += it.backwardNs;
    ++totals.backwards;
    if (s.optimizerNs >= 0) {
      totals.optimizer += s.optimizerNs;
      ++totals.optimizers;
    }
    // Each bucket's gradients, by the plan the steps ran under, in the order they were ready.
    std::vector<size_t> order;
    std::map<size_t, int64_t> readyAt;
    for (const auto& [param, ns] : s.grads) {
      order.push_back(param);
      readyAt[param] = ns;
    }
    const std::vector<replay::BucketSpec> plan =
        order.size() == rec.params.size() ? replay::assignBuckets(rec.params, order, rec.limits)
                                          : std::vector<replay::BucketSpec>{};
    for (const replay::DdpStepRecord::Bucket& bucket : s.buckets) {
      DdpBucketSample b;
      b.bucket = bucket.index;
      b.bytes = bucket.bytes;
      if (static_cast<size_t>(bucket.index) < plan.size()) {
        const replay::BucketSpec& spec = plan[static_cast<size_t>(bucket.index)];
        b.params = static_cast<int64_t>(spec.params.size());
        b.firstGradNs = INT64_MAX;
        for (size_t param : spec.params) {
          b.firstGradNs = std::min(b.firstGradNs, readyAt[param]);
          b.readyNs = std::max(b.readyNs, readyAt[param]);
        }
      }
      b.launchNs = bucket.launchNs;
      b.wireEndNs = bucket.wireEndNs;
      b.wireNs = std::max<int64_t>(0, bucket.wireNs);
      b.wireStartNs = bucket.wireEndNs - b.wireNs;
      b.copyBackNs = std::max<int64_t>(0, bucket.copyBackNs);
      b.beginNs = b.firstGradNs > 0 && b.firstGradNs < INT64_MAX ? b.firstGradNs : b.launchNs;
      b.endNs = std::max(b.beginNs, b.wireEndNs);
      // As the watch has it: the wire past backward's compute.
      b.exposedNs = positive(bucket.wireEndNs - s.computeEndNs);
      b.launchDelayNs = difference(b.launchNs, b.readyNs);
      analysis::CommOverlap one;
      one.add(b.wireNs, b.exposedNs);
      b.hiddenShare = one.hiddenShare();
      samples.emplace_back(s.step, b);
    }
  }
  addIterations(rank.rank, std::move(iterations), totals, samples);
}

void DdpBuilder::addIterations(int32_t rank, std::vector<DdpIteration> iterations,
                               const PhaseTotals& totals,
                               std::vector<std::pair<int64_t, DdpBucketSample>>& samples) {
  std::unordered_map<int64_t, size_t> iterationOf;
  for (size_t i = 0; i < iterations.size(); ++i) iterationOf[iterations[i].step] = i;
  for (auto& [step, b] : samples) {
    auto found = iterationOf.find(step);
    DdpIteration* it = found == iterationOf.end() ? nullptr : &iterations[found->second];
    if (it && b.readyNs > 0) b.readyOffsetNs = b.readyNs - it->backwardBeginNs;
    Bucket& bt = buckets_[b.bucket];
    bt.avg.bucket = b.bucket;
    ++bt.avg.samples;
    // "Of the last sample": the highest rank's, whatever order ranks come in.
    if (rank >= bt.lastRank) {
      bt.lastRank = rank;
      bt.avg.bytes = b.bytes;
      bt.avg.params = b.params;
    }
    if (it && b.readyNs > 0) {
      bt.readyOffset += b.readyOffsetNs;
      ++bt.withOffset;
    }
    bt.launchDelay += b.launchDelayNs;
    bt.exposed += b.exposedNs;
    bt.overlap.add(b.wireNs, b.exposedNs);
    bt.wires.add(static_cast<double>(b.wireNs));
    overlap_.add(b.wireNs, b.exposedNs);
    if (it) {
      it->exposedNs = std::max(it->exposedNs, b.exposedNs);
      it->wireNs += b.wireNs;
      if (keepIterations_) it->buckets.push_back(b);
    }
  }
  phases_.merge(totals);
  iterationCount_ += iterations.size();
  for (DdpIteration& it : iterations) {
    exposed_ += it.exposedNs;
    if (!keepIterations_) continue;
    std::sort(
        it.buckets.begin(), it.buckets.end(),
        [](const DdpBucketSample& a, const DdpBucketSample& b) { return a.bucket < b.bucket; });
    iterations_.push_back(std::move(it));
  }
}

void DdpBuilder::merge(DdpBuilder&& o) {
  for (DdpIteration& it : o.iterations_) iterations_.push_back(std::move(it));
  iterationCount_ += o.iterationCount_;
  for (auto& [index, ob] : o.buckets_) {
    Bucket& b = buckets_[index];
    b.avg.bucket = index;
    b.avg.samples += ob.avg.samples;
    if (ob.lastRank >= b.lastRank) {
      b.lastRank = ob.lastRank;
      b.avg.bytes = ob.avg.bytes;
      b.avg.params = ob.avg.params;
    }
    b.readyOffset += ob.readyOffset;
    b.launchDelay += ob.launchDelay;
    b.exposed += ob.exposed;
    b.withOffset += ob.withOffset;
    b.overlap.add(ob.overlap);
    b.wires.merge(ob.wires);
  }
  overlap_.add(o.overlap_);
  phases_.merge(o.phases_);
  exposed_ += o.exposed_;
  rebuilds_ += o.rebuilds_;
}

DdpAnalysis DdpBuilder::finish() {
  DdpAnalysis d;
  std::stable_sort(iterations_.begin(), iterations_.end(),
                   [](const DdpIteration& a, const DdpIteration& b) { return a.rank < b.rank; });
  d.iterations = std::move(iterations_);
  d.iterationCount = iterationCount_;
  setPhaseMeans(d, phases_, exposed_, iterationCount_);
  d.hiddenShare = overlap_.hiddenShare();
  d.rebuilds = rebuilds_;
  for (auto& [index, bt] : buckets_) {
    DdpBucketAverage a = bt.avg;
    a.readyOffsetMeanNs = meanOf(bt.readyOffset, bt.withOffset);
    a.launchDelayMeanNs = meanOf(bt.launchDelay, a.samples);
    a.wireMeanNs = meanOf(bt.overlap.wireNs(), a.samples);
    a.wireP50Ns = static_cast<int64_t>(bt.wires.percentile(50));
    a.exposedMeanNs = meanOf(bt.exposed, a.samples);
    a.hiddenShare = bt.overlap.hiddenShare();
    d.buckets.push_back(a);
  }
  return d;
}

// ---- FSDP -------------------------------------------------------------------------

FsdpAnalysis analyzeFsdp(const TraceStore& store, std::string* notRecovered) {
  FsdpBuilder builder;
  for (const RankData& rank : store.ranks()) builder.addRank(store, rank);
  FsdpAnalysis f = builder.finish();
  if (f.iterationCount == 0 && holdsProfiledTorchFsdp2(store)) {
    // A job that ran nothing of ringx: FSDP2 as its profiler traces hold it.
    try {
      const replay::FsdpRecording rec = profiledTorchFsdp2(store).recording;
      FsdpBuilder recorded;
      for (size_t r = 0; r < rec.ranks.size(); ++r) recorded.addRecordedRank(rec, r);
      f = recorded.finish();
    } catch (const std::runtime_error& e) {
      if (notRecovered != nullptr) *notRecovered = e.what();
    }
  }
  return f;
}

FsdpBuilder::Unit& FsdpBuilder::unitNamed(const std::string& name, int64_t beginNs) {
  auto [found, added] = units_.try_emplace(name);
  Unit& ut = found->second;
  if (added) {
    ut.u.unit = name;
    ut.u.firstBeginNs = INT64_MAX;
  }
  ut.u.firstBeginNs = std::min(ut.u.firstBeginNs, beginNs);
  return ut;
}

void FsdpBuilder::addGather(Unit& ut, FsdpIteration& it, bool backward, bool prefetched,
                            int64_t bytes, int64_t waitedNs, int64_t spanNs, int64_t wireNs) {
  FsdpUnitAnalysis& u = ut.u;
  ++u.gathers;
  if (backward) {
    ++u.backwardGathers;
  } else {
    ++u.forwardGathers;
  }
  u.prefetched += prefetched;
  u.gatherBytes = std::max(u.gatherBytes, bytes);
  u.gatherBytesTotal += bytes;
  u.exposedTotalNs += waitedNs;
  ut.gather += spanNs;
  ut.gatherWire += wireNs;
  ++it.gathers;
  it.prefetched += prefetched;
  it.gatherBytes += bytes;
  it.gatherWireNs += wireNs;
  it.exposedNs += waitedNs;
}

void FsdpBuilder::addReduction(Unit& ut, FsdpIteration& it, bool allreduce, int64_t bytes,
                               int64_t wireNs) {
  FsdpUnitAnalysis& u = ut.u;
  if (!allreduce) {
    ++u.reduceScatters;
    u.reduceScatterBytes = std::max(u.reduceScatterBytes, bytes);
    ut.reduceScatter += wireNs;
  } else {
    ++u.allreduces;
    ut.allreduce += wireNs;
  }
  ++it.reductions;
  it.reduceBytes += bytes;
  it.reduceWireNs += wireNs;
}

void FsdpBuilder::addIteration(const FsdpIteration& it, bool hasForward, bool hasOptimizer) {
  if (hasForward) {
    phases_.forward += it.forwardNs;
    ++phases_.forwards;
  }
  phases_.backward += it.backwardNs;
  ++phases_.backwards;
  if (hasOptimizer) {
    phases_.optimizer += it.optimizerNs;
    ++phases_.optimizers;
  }
  exposed_ += it.exposedNs;
  ++iterationCount_;
  if (keepIterations_) iterations_.push_back(it);
}

void FsdpBuilder::addRank(const TraceStore& store, const RankData& rank) {
  const StringPool& pool = store.strings();
  const Keys keys(pool);
  const PhaseNames phases(pool);
  const uint32_t allGather = pool.find("all_gather"), reshard = pool.find("reshard"),
                 reduceScatter = pool.find("reduce_scatter"), allreduce = pool.find("allreduce"),
                 backwardValue = pool.find("backward");
  const std::string_view unitPrefix = trace::track::kFsdpUnitPrefix;

  std::unordered_map<int64_t, Phases> steps;
  std::unordered_map<int64_t, FsdpIteration> perStep;
  for (const Track& track : rank.tracks) {
    if (track.kind == TrackKind::kFsdp) {
      forAllSpans(track, [&](uint32_t, uint32_t, const Span& s) {
        phases.add(steps, s, ArgRange(rank, s).integer(keys.step, -1));
      });
      continue;
    }
    if (track.kind != TrackKind::kFsdpUnit) continue;
    Unit& ut = unitNamed(std::string(store.str(track.name).substr(unitPrefix.size())), INT64_MAX);
    FsdpUnitAnalysis& u = ut.u;
    forAllSpans(track, [&](uint32_t, uint32_t, const Span& s) {
      u.firstBeginNs = std::min(u.firstBeginNs, s.begin);
      if (s.name == 0) return;
      const ArgRange a(rank, s);
      const int64_t wire = difference(a.integer(keys.wireEnd, 0), a.integer(keys.wireStart, 0));
      const int64_t bytes = a.integer(keys.bytes, 0);
      if (s.name == allGather) {
        addGather(ut, perStep[a.integer(keys.step, -1)],
                  a.string(keys.phase) == backwardValue && backwardValue != 0,
                  a.integer(keys.prefetched, 0) != 0, bytes, positive(a.integer(keys.exposed, 0)),
                  s.duration(), wire);
      } else if (s.name == phases.forward) {
        ++u.forwards;
        ut.forward += s.duration();
      } else if (s.name == phases.backward) {
        ++u.backwards;
        ut.backward += s.duration();
      } else if (s.name == reshard) {
        ++u.reshards;
      } else if (s.name == reduceScatter || s.name == allreduce) {
        addReduction(ut, perStep[a.integer(keys.step, -1)], s.name == allreduce, bytes, wire);
      }
    });
  }
  for (int64_t step : sortedSteps(steps)) {
    const Phases& p = steps[step];
    auto found = perStep.find(step);
    FsdpIteration it = found == perStep.end() ? FsdpIteration{} : found->second;
    it.rank = rank.rank;
    it.step = step;
    it.forwardBeginNs = p.forwardBegin;
    it.forwardNs = p.forward;
    it.backwardBeginNs = p.backwardBegin;
    it.backwardNs = p.backward;
    it.optimizerNs = p.optimizer;
    addIteration(it, p.hasForward, p.hasOptimizer);
  }
}

void FsdpBuilder::addRecordedRank(const replay::FsdpRecording& rec, size_t rankIndex) {
  const replay::FsdpRankRecord& rank = rec.ranks.at(rankIndex);
  for (const replay::FsdpStepRecord& s : rank.steps) {
    FsdpIteration it;
    it.rank = rank.rank;
    it.step = s.step;
    for (const replay::FsdpStepRecord::Gather& g : s.gathers) {
      addGather(unitNamed(rec.units[g.unit], g.issueNs), it, g.issueNs >= s.backwardBeginNs,
                g.prefetched, g.bytes, g.exposedNs, g.readyNs - g.issueNs,
                difference(g.wireEndNs, g.issueNs));
    }
    for (const replay::FsdpStepRecord::Reduction& r : s.reductions) {
      addReduction(unitNamed(rec.units[r.unit], r.launchNs), it, r.allreduce, r.bytes,
                   difference(r.wireEndNs, r.launchNs));
    }
    for (const auto* spans : {&s.forward, &s.backward}) {
      for (const replay::FsdpStepRecord::Span& x : *spans) {
        Unit& ut = unitNamed(rec.units[x.unit], x.beginNs);
        if (spans == &s.forward) {
          ++ut.u.forwards;
          ut.forward += x.endNs - x.beginNs;
        } else {
          ++ut.u.backwards;
          ut.backward += x.endNs - x.beginNs;
        }
      }
    }
    for (const replay::FsdpStepRecord::Span& x : s.reshards) {
      ++unitNamed(rec.units[x.unit], x.beginNs).u.reshards;
    }
    it.forwardBeginNs = s.forwardBeginNs;
    it.forwardNs = s.forwardEndNs - s.forwardBeginNs;
    it.backwardBeginNs = s.backwardBeginNs;
    it.backwardNs = s.backwardEndNs - s.backwardBeginNs;
    it.optimizerNs = std::max<int64_t>(0, s.optimizerNs);
    addIteration(it, s.forwardEndNs > s.forwardBeginNs, s.optimizerNs >= 0);
  }
}

void FsdpBuilder::merge(FsdpBuilder&& o) {
  for (FsdpIteration& it : o.iterations_) iterations_.push_back(it);
  iterationCount_ += o.iterationCount_;
  for (auto& [name, ou] : o.units_) {
    auto [found, added] = units_.try_emplace(name);
    Unit& ut = found->second;
    if (added) {
      ut = std::move(ou);
      continue;
    }
    FsdpUnitAnalysis &u = ut.u, &v = ou.u;
    u.firstBeginNs = std::min(u.firstBeginNs, v.firstBeginNs);
    u.gathers += v.gathers;
    u.forwardGathers += v.forwardGathers;
    u.backwardGathers += v.backwardGathers;
    u.prefetched += v.prefetched;
    u.gatherBytes = std::max(u.gatherBytes, v.gatherBytes);
    u.gatherBytesTotal += v.gatherBytesTotal;
    u.exposedTotalNs += v.exposedTotalNs;
    u.forwards += v.forwards;
    u.backwards += v.backwards;
    u.reshards += v.reshards;
    u.reduceScatters += v.reduceScatters;
    u.reduceScatterBytes = std::max(u.reduceScatterBytes, v.reduceScatterBytes);
    u.allreduces += v.allreduces;
    ut.gather += ou.gather;
    ut.gatherWire += ou.gatherWire;
    ut.forward += ou.forward;
    ut.backward += ou.backward;
    ut.reduceScatter += ou.reduceScatter;
    ut.allreduce += ou.allreduce;
  }
  phases_.merge(o.phases_);
  exposed_ += o.exposed_;
}

FsdpAnalysis FsdpBuilder::finish() {
  FsdpAnalysis f;
  std::stable_sort(iterations_.begin(), iterations_.end(),
                   [](const FsdpIteration& a, const FsdpIteration& b) { return a.rank < b.rank; });
  f.iterations = std::move(iterations_);
  f.iterationCount = iterationCount_;
  setPhaseMeans(f, phases_, exposed_, iterationCount_);
  for (auto& [name, ut] : units_) {
    FsdpUnitAnalysis u = ut.u;
    if (u.firstBeginNs == INT64_MAX) u.firstBeginNs = 0;
    u.gatherMeanNs = meanOf(ut.gather, u.gathers);
    u.gatherWireMeanNs = meanOf(ut.gatherWire, u.gathers);
    u.exposedMeanNs = meanOf(u.exposedTotalNs, u.gathers);
    u.prefetchedShare = analysis::prefetchedShare(u.prefetched, u.gathers);
    u.forwardMeanNs = meanOf(ut.forward, u.forwards);
    u.backwardMeanNs = meanOf(ut.backward, u.backwards);
    u.reduceScatterMeanNs = meanOf(ut.reduceScatter, u.reduceScatters);
    u.allreduceMeanNs = meanOf(ut.allreduce, u.allreduces);
    f.units.push_back(std::move(u));
  }
  std::sort(
      f.units.begin(), f.units.end(), [](const FsdpUnitAnalysis& a, const FsdpUnitAnalysis& b) {
        return a.firstBeginNs != b.firstBeginNs ? a.firstBeginNs < b.firstBeginNs : a.unit < b.unit;
      });
  return f;
}

}  // namespace ringx::analysis
