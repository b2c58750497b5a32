// The advisor (see advise.h for what it says and from what).
#include "analysis/advise.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>

#include "analysis/profiler_whatif.h"
#include "analysis/whatif.h"
#include "analysis/whatif_text.h"
#include "base/format.h"
#include "base/json_text.h"
#include "trace/format/schema.h"

namespace ringx::analysis {
namespace {

using whatif_text::intervalText;
using whatif_text::padLeft;
using whatif_text::padRight;
using whatif_text::percent;

// Bucket caps asked of a DDP job beside the what-if defaults: torch's range, in MB.
constexpr double kCapLadderMb[] = {0.25, 0.5, 1, 2, 4, 8, 16, 25, 50, 100};

template <class Row>
void addChanges(const std::vector<Row>& rows, std::set<std::string>* seen,
                std::vector<AdvisedChange>* out) {
  for (const Row& row : rows) {
    if (!row.error.empty() || !seen->insert(row.change.label).second) continue;
    out->push_back({row.change.label, row.predictedStepNs, row.predictedLowNs, row.predictedHighNs,
                    row.changeShare, row.withinNoise});
  }
}

// The replayable changes of the job's engine, ranked; the recorded step and the model's error.
// A profiler trace's report is kept for its findings.
void replayChanges(const model::TraceStore& store, Advice* a,
                   std::optional<ProfilerWhatIfReport>* profiler) {
  a->engine = whatIfEngine(store);
  std::set<std::string> seen;
  try {
    WhatIfQuestions q;
    q.bounds = false;  // not changes a job can make
    if (holdsProfilerTrace(store)) {
      // A GPU job's profiler trace: its program's report, for the findings it proves; its
      // changes where no engine's plan is recovered (what is at stake, the wire twice as fast
      // and the bounds).
      WhatIfQuestions pq;
      ProfilerProgram program = profilerProgramOf(store);
      std::optional<ProfiledDdp> ddp = profiledGpuDdp(store, &program);
      const replay::LinkFit wire = profilerWire(program);
      if (wire.ok) pq.links = {replay::LinkCost{wire.link.stepNs / 2, wire.link.nsPerByte / 2}};
      // torch DDP's buckets recovered from a GPU job's trace: the caps' ladder too.
      if (ddp) pq.bucketCapMb.assign(std::begin(kCapLadderMb), std::end(kCapLadderMb));
      *profiler = profilerWhatIf(std::move(program), pq, std::move(ddp));
    }
    if (a->engine == "profiler") {
      const ProfilerWhatIfReport& r = **profiler;
      a->recordedStepNs = r.source.recordedStepNs;
      a->modelErrorShare = r.baselineErrorShare;
      addChanges(r.rows, &seen, &a->changes);
    } else if (a->engine == "fsdp") {
      FsdpWhatIfReport r = fsdpWhatIf(store, q);
      a->recordedStepNs = r.source.recordedStepNs;
      a->modelErrorShare = r.baselineErrorShare;
      if (r.source.model.runtime.fsdp2) a->engine = "fsdp2";
      addChanges(r.rows, &seen, &a->changes);
      q.mergeUnits = {3};
      addChanges(fsdpWhatIf(store, q).rows, &seen, &a->changes);
    } else if (a->engine == "ddp") {
      WhatIfReport r = whatIf(store, q);
      a->recordedStepNs = r.source.recordedStepNs;
      a->modelErrorShare = r.baselineErrorShare;
      addChanges(r.rows, &seen, &a->changes);
      q.bucketCapMb.assign(std::begin(kCapLadderMb), std::end(kCapLadderMb));
      addChanges(whatIf(store, q).rows, &seen, &a->changes);
    } else {
      a->whatIfError = "no DDP or FSDP engine events in this trace";
    }
  } catch (const std::exception& e) {
    a->whatIfError = e.what();
  }
  std::stable_sort(
      a->changes.begin(), a->changes.end(),
      [](const AdvisedChange& x, const AdvisedChange& y) { return x.changeShare < y.changeShare; });
}

// The step the thresholds are shares of: the recorded one, else the engine's phases.
int64_t stepOf(const Advice& a, const Summary& s) {
  if (a.recordedStepNs > 0) return a.recordedStepNs;
  if (s.ddp.iterationCount > 0) {
    return s.ddp.forwardMeanNs + s.ddp.backwardMeanNs + s.ddp.optimizerMeanNs;
  }
  return s.fsdp.forwardMeanNs + s.fsdp.backwardMeanNs + s.fsdp.optimizerMeanNs;
}

std::string share(int64_t part, int64_t whole) {
  return whole > 0 ? percent(static_cast<double>(part) / static_cast<double>(whole)).substr(1)
                   : "?";
}

void stragglerFinding(const Summary& s, std::vector<Finding>* out) {
  const SkewStats& k = s.skew;
  // Chance makes some rank last 1/n of the time: the rank must be last at more than halfway
  // from chance to always (3/4 of the collectives at 2 ranks, 2/3 at 3, over 1/2 at many).
  const double n = std::max<double>(2, static_cast<double>(s.worldSize));
  const double bar = std::max(0.5, (1 / n + 1) / 2);
  if (k.mostOftenLast < 0 || k.matched < 8 ||
      static_cast<double>(k.mostOftenLastCount) <= bar * static_cast<double>(k.matched)) {
    return;
  }
  const RankStats* late = nullptr;
  int64_t othersLateness = 0;
  size_t others = 0;
  for (const RankStats& r : s.ranks) {
    if (r.rank == k.mostOftenLast) {
      late = &r;
    } else if (r.matchedCollectives > 0) {
      othersLateness += r.latenessMeanNs;
      ++others;
    }
  }
  Finding f;
  f.kind = "straggler";
  f.what = "rank " + std::to_string(k.mostOftenLast) + " arrives last at most collectives: the " +
           "other ranks wait for it";
  f.evidence = "last at " + std::to_string(k.mostOftenLastCount) + " of " +
               std::to_string(k.matched) + " collectives matched across ranks";
  if (late) {
    f.evidence += "; it began them " + formatDuration(late->latenessMeanNs) +
                  " after the first rank on average";
    if (others > 0) {
      f.evidence +=
          ", the other ranks " + formatDuration(othersLateness / static_cast<int64_t>(others));
    }
    if (!late->host.empty() && late->host != "?") f.evidence += " (host " + late->host + ")";
  }
  f.change = "look at what rank " + std::to_string(k.mostOftenLast) +
             " does before its collectives (its data loading, its compute, what else runs on "
             "its host): the step is as slow as its slowest rank";
  out->push_back(std::move(f));
}

void exposedFinding(const Advice& a, const Summary& s, int64_t step, std::vector<Finding>* out) {
  const bool ddp = s.ddp.iterationCount > 0 && a.engine == "ddp";
  const int64_t exposed = ddp ? s.ddp.exposedMeanNs : s.fsdp.exposedMeanNs;
  if (step <= 0 || (!ddp && s.fsdp.iterationCount == 0) || exposed * 10 < step) return;
  Finding f;
  f.kind = "exposed-communication";
  f.what = share(exposed, step) + " of the step waits for communication that nothing hides";
  f.evidence =
      formatDuration(exposed) + " a step (mean over " +
      std::to_string(ddp ? s.ddp.iterationCount : s.fsdp.iterationCount) + " iterations) " +
      (ddp ? "of allreduce after backward's compute ended" : "of compute waiting for all-gathers") +
      ", against a " + formatDuration(step) + " step";
  const AdvisedChange* best = nullptr;
  for (const AdvisedChange& c : a.changes) {
    if (c.changeShare < 0 && !c.withinNoise) {
      best = &c;
      break;
    }
  }
  if (best) {
    f.change = best->label + " is predicted to take the step to " +
               formatDuration(best->predictedStepNs) + " (" + percent(best->changeShare) + ")";
  } else if (ddp) {
    f.change =
        "no bucket plan is predicted to gain beyond the recorded steps' spread: the allreduce "
        "itself is the cost (a faster wire, fp16/bf16 gradient compression with a comm hook, or "
        "fewer ranks per ring)";
  } else {
    f.change =
        "prefetch the gathers (forward and backward prefetch) or make fewer, larger "
        "units; the what-if table predicts each";
  }
  out->push_back(std::move(f));
}

void prefetchFindings(const Advice& a, const Summary& s, int64_t step, std::vector<Finding>* out) {
  if (s.fsdp.iterationCount == 0 || step <= 0) return;
  const int64_t iterations = static_cast<int64_t>(s.fsdp.iterationCount);
  for (const FsdpUnitAnalysis& u : s.fsdp.units) {
    if (u.unit == trace::track::kFsdpRootUnit || u.gathers == 0 || u.prefetched > 0) continue;
    const int64_t perStep = u.exposedTotalNs / iterations;
    if (perStep * 20 < step) continue;
    Finding f;
    f.kind = "no-prefetch";
    f.what = "unit " + u.unit + "'s gather is never prefetched, and compute waits for it";
    f.evidence = std::to_string(u.gathers) + " gathers (" + std::to_string(u.forwardGathers) +
                 " in forward, " + std::to_string(u.backwardGathers) +
                 " in backward), none prefetched; compute waited " + formatDuration(perStep) +
                 " a step for them (" + share(perStep, step) + " of the step)";
    f.change = a.engine == "fsdp2"
                   ? "prefetch it: set_modules_to_forward_prefetch([" + u.unit +
                         "]) on the unit that runs before it (and "
                         "set_modules_to_backward_prefetch on the one after it)"
                   : "prefetch it: forward_prefetch=True and backward_prefetch=BACKWARD_PRE";
    out->push_back(std::move(f));
  }
}

void lateLaunchFindings(const Summary& s, int64_t step, std::vector<Finding>* out) {
  if (s.ddp.iterationCount == 0 || step <= 0) return;
  for (const DdpBucketAverage& b : s.ddp.buckets) {
    if (b.launchDelayMeanNs * 20 < step || b.samples == 0) continue;
    Finding f;
    f.kind = "late-launch";
    f.what = "bucket " + std::to_string(b.bucket) +
             " launches well after it is ready: it waits for an earlier bucket (buckets "
             "launch in order)";
    f.evidence = "ready " + formatDuration(b.readyOffsetMeanNs) + " into backward, launched " +
                 formatDuration(b.launchDelayMeanNs) + " later on average (" +
                 std::to_string(b.samples) + " samples, " + share(b.launchDelayMeanNs, step) +
                 " of the step)";
    f.change =
        "let the earlier buckets fill sooner: a smaller bucket_cap_mb (or first bucket), or "
        "parameters registered in the order backward produces their gradients; the what-if "
        "table predicts the caps";
    out->push_back(std::move(f));
  }
}

// A profiler trace's replay: the device's communication that no compute of its hides, and a
// step the host sets (the GPU waits on the CPU's launches).
void profilerFindings(const ProfilerWhatIfReport& r, std::vector<Finding>* out) {
  const int64_t step = r.baseline.stepNs;
  if (step <= 0) return;
  if (r.baseline.exposedCommNs * 10 >= step) {
    Finding f;
    f.kind = "exposed-communication";
    f.what = share(r.baseline.exposedCommNs, step) +
             " of the step the device runs collectives with no compute beside them";
    f.evidence = formatDuration(r.baseline.exposedCommNs) + " on rank " +
                 std::to_string(r.baseline.slowestRank) + " of its " + formatDuration(step) +
                 " replayed step (" + std::to_string(r.source.collectives) +
                 " collectives matched across ranks)";
    f.change =
        "overlap them with compute (launch the collective before the compute that does not "
        "need its result, async_op and a later wait) or make them smaller; the what-if rows "
        "price a faster wire";
    out->push_back(std::move(f));
  }
  int64_t host = 0, device = 0;
  for (const replay::PathSegment& s : r.baseline.criticalPath) {
    (s.kind == replay::PathSegment::Kind::kHost ? host : device) += s.endNs - s.beginNs;
  }
  if (host * 2 >= step) {
    Finding f;
    f.kind = "launch-bound";
    f.what = "the GPU waits on the CPU: the host's work between launches sets " +
             share(host, step) + " of the step";
    f.evidence = "the critical path of rank " + std::to_string(r.baseline.slowestRank) +
                 "'s replayed step: " + formatDuration(host) + " of host work, " +
                 formatDuration(device) + " on its device; the device's compute free would " +
                 "leave the step at ";
    for (const ProfilerWhatIfRow& row : r.rows) {
      if (row.change.computeFree && row.error.empty()) {
        f.evidence += formatDuration(row.predictedStepNs) + " (" + percent(row.changeShare) + ")";
      }
    }
    if (f.evidence.back() == ' ') f.evidence += "(not replayed)";
    f.change =
        "launch less from Python: torch.compile or CUDA graphs, fused or larger kernels, the "
        "profiler's own overhead off (record_shapes, with_stack); faster kernels or a faster "
        "network will not shorten this step";
    out->push_back(std::move(f));
  }
}

}  // namespace

Advice advise(const model::TraceStore& store, const Summary& summary) {
  Advice a;
  std::optional<ProfilerWhatIfReport> profiler;
  replayChanges(store, &a, &profiler);
  const int64_t step = stepOf(a, summary);
  stragglerFinding(summary, &a.findings);
  if (profiler) profilerFindings(*profiler, &a.findings);
  exposedFinding(a, summary, step, &a.findings);
  prefetchFindings(a, summary, step, &a.findings);
  lateLaunchFindings(summary, step, &a.findings);
  return a;
}

std::string formatAdvice(const Advice& a, const std::string& source) {
  std::string out = "advice: " + source + "\n";
  if (a.recordedStepNs > 0) {
    out += "recorded step " + formatDuration(a.recordedStepNs) + " (" + a.engine +
           "; the unchanged replay " + percent(a.modelErrorShare) + ")\n";
  }
  out += "\nwhat the trace shows:\n";
  if (a.findings.empty())
    out +=
        "  nothing stands out (no straggler, exposed communication, "
        "unprefetched unit or late bucket past its threshold)\n";
  for (const Finding& f : a.findings) {
    out +=
        "  - " + f.what + "\n      evidence: " + f.evidence + "\n      change: " + f.change + "\n";
  }
  out += "\nchanges, fastest predicted first:\n";
  if (!a.whatIfError.empty()) out += "  none replayed: " + a.whatIfError + "\n";
  for (const AdvisedChange& c : a.changes) {
    out += "  " + padRight(c.label, 36) + padLeft(formatDuration(c.predictedStepNs), 12) +
           padLeft(percent(c.changeShare), 9) + padLeft(intervalText(c.lowNs, c.highNs), 20) +
           (c.withinNoise ? "  within noise" : "") + "\n";
  }
  return out;
}

std::string adviceJson(const Advice& a) {
  std::string out = "{\"engine\":";
  appendJsonString(out, a.engine);
  out += ",\"recorded_step_ns\":" + std::to_string(a.recordedStepNs) +
         ",\"model_error\":" + whatif_text::shortNumber(a.modelErrorShare) + ",\"what_if_error\":";
  if (a.whatIfError.empty()) {
    out += "null";
  } else {
    appendJsonString(out, a.whatIfError);
  }
  out += ",\"changes\":[";
  for (size_t i = 0; i < a.changes.size(); ++i) {
    const AdvisedChange& c = a.changes[i];
    out += i ? ",{\"change\":" : "{\"change\":";
    appendJsonString(out, c.label);
    out += ",\"predicted_step_ns\":" + std::to_string(c.predictedStepNs) +
           ",\"predicted_low_ns\":" + std::to_string(c.lowNs) +
           ",\"predicted_high_ns\":" + std::to_string(c.highNs) +
           ",\"change_share\":" + whatif_text::shortNumber(c.changeShare) +
           ",\"within_noise\":" + (c.withinNoise ? "true" : "false") + "}";
  }
  out += "],\"findings\":[";
  for (size_t i = 0; i < a.findings.size(); ++i) {
    const Finding& f = a.findings[i];
    out += i ? ",{\"kind\":" : "{\"kind\":";
    appendJsonString(out, f.kind);
    out += ",\"what\":";
    appendJsonString(out, f.what);
    out += ",\"evidence\":";
    appendJsonString(out, f.evidence);
    out += ",\"change\":";
    appendJsonString(out, f.change);
    out += "}";
  }
  out += "]}\n";
  return out;
}

}  // namespace ringx::analysis
