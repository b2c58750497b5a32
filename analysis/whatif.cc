// The DDP replay model built from a trace, and the what-if report (see whatif.h).
#include "analysis/whatif.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <unordered_map>

#include "analysis/profiler_ddp.h"
#include "analysis/store_reading.h"
#include "analysis/whatif_text.h"
#include "base/format.h"
#include "base/json_text.h"

namespace ringx::analysis {
using namespace store_reading;
using namespace whatif_text;

namespace {

struct GradSample {
  int64_t step = 0;
  int64_t param = 0;
  int64_t bytes = 0;
  uint32_t group = 0;
  int64_t time = 0;
};

struct Plan {
  int64_t step = -1, cap = 0, first = 0, view = 0, world = 0;
  uint32_t engine = 0;  // "ringx.ddp", "torch.ddp"; 0: before schema 7 (ringx.ddp)
};

// What one rank recorded: its steps as the replay's fit takes them, and its gradients again
// for the parameters' bytes and groups.
struct RankRecord {
  int32_t rank = 0;
  std::map<int64_t, replay::DdpStepRecord> steps;
  std::vector<GradSample> grads;
  Plan plan;  // the last one
};

RankRecord readRank(const model::TraceStore& store, const RankData& rank) {
  const StringPool& pool = store.strings();
  const Keys keys(pool);
  const uint32_t forward = pool.find("forward"), backward = pool.find("backward"),
                 optimizer = pool.find("optimizer"), bucket = pool.find("bucket"),
                 grad = pool.find("grad"), plan = pool.find("bucket_plan");
  const uint32_t computeEnd = pool.find(targ::kComputeEndNs), param = pool.find(targ::kParam),
                 paramGroup = pool.find(targ::kParamGroup), cap = pool.find(targ::kBucketCapBytes),
                 first = pool.find(targ::kFirstBucketBytes), view = pool.find(targ::kBucketView),
                 engine = pool.find(targ::kEngine);
  RankRecord r;
  r.rank = rank.rank;
  for (const Track& track : rank.tracks) {
    if (track.kind == TrackKind::kDdp) {
      forAllSpans(track, [&](uint32_t, uint32_t, const Span& s) {
        if (s.name == 0) return;
        const ArgRange a(rank, s);
        const int64_t step = a.integer(keys.step, -1);
        if (step < 0) return;
        if (s.name == forward) {
          r.steps[step].forwardBeginNs = s.begin;
          r.steps[step].forwardEndNs = s.end;
        } else if (s.name == backward) {
          replay::DdpStepRecord& p = r.steps[step];
          p.backwardBeginNs = s.begin;
          p.finalizeEndNs = s.end;
          p.computeEndNs = a.integer(computeEnd, 0);
        } else if (s.name == optimizer) {
          r.steps[step].optimizerNs = s.duration();
        }
      });
      for (const Instant& i : track.instants) {
        if (plan == 0 || i.name != plan) continue;
        const ArgRange a(rank, i.firstArg, i.argCount);
        const int64_t step = a.integer(keys.step, 0);
        if (step < r.plan.step) continue;
        r.plan = {step,
                  a.integer(cap, 0),
                  a.integer(first, 0),
                  a.integer(view, 0),
                  a.integer(keys.groupSize, 0),
                  a.string(engine)};
      }
    } else if (track.kind == TrackKind::kDdpBucket) {
      forAllSpans(track, [&](uint32_t, uint32_t, const Span& s) {
        if (bucket == 0 || s.name != bucket) return;
        const ArgRange a(rank, s);
        const int64_t step = a.integer(keys.step, -1);
        if (step < 0) return;
        replay::DdpStepRecord::Bucket b;
        b.index = a.integer(keys.bucket, -1);
        b.bytes = a.integer(keys.bytes, 0);
        const int64_t ws = a.integer(keys.wireStart, 0), we = a.integer(keys.wireEnd, 0);
        if (ws > 0 && we >= ws) b.wireNs = we - ws;
        b.launchNs = a.integer(keys.launch, 0);
        b.wireEndNs = we;
        const int64_t cb = a.integer(keys.copyBack, 0);
        if (cb > 0 && s.end >= cb) b.copyBackNs = s.end - cb;
        r.steps[step].buckets.push_back(b);
      });
      for (const Instant& i : track.instants) {
        if (grad == 0 || i.name != grad) continue;
        const ArgRange a(rank, i.firstArg, i.argCount);
        GradSample g;
        g.step = a.integer(keys.step, -1);
        g.param = a.integer(param, -1);
        g.bytes = a.integer(keys.bytes, 0);
        g.group = a.string(paramGroup);
        g.time = i.time;
        if (g.step < 0 || g.param < 0) continue;
        r.grads.push_back(g);
        r.steps[g.step].grads.emplace_back(static_cast<size_t>(g.param), g.time);
      }
    }
  }
  return r;
}

}  // namespace

std::vector<replay::CostSample> calibrationOf(const model::TraceStore& store) {
  const StringPool& pool = store.strings();
  const Keys keys(pool);
  const uint32_t name = pool.find("calibration"), op = pool.find(targ::kOp), ns = pool.find("ns");
  std::vector<replay::CostSample> out;
  if (name == 0 || op == 0 || ns == 0) return out;
  for (const RankData& rank : store.ranks()) {
    for (const Track& track : rank.tracks) {
      for (const Instant& i : track.instants) {
        if (i.name != name) continue;
        const ArgRange a(rank, i.firstArg, i.argCount);
        const uint32_t kind = a.string(op);
        if (kind == 0) continue;
        out.push_back({std::string(store.str(kind)), a.integer(keys.bytes, 0),
                       a.integer(keys.groupSize, 0), a.integer(ns, 0)});
      }
    }
    if (!out.empty()) break;  // every rank recorded the same ladder
  }
  return out;
}

replay::HostCores hostCoresOf(const model::TraceStore& store) {
  const StringPool& pool = store.strings();
  const uint32_t name = pool.find("host"), cores = pool.find("cores"),
                 quota = pool.find("cpu_quota"), threads = pool.find("compute_threads");
  replay::HostCores out;
  std::vector<std::string> hosts;
  for (const RankData& rank : store.ranks()) {
    if (std::find(hosts.begin(), hosts.end(), rank.host) == hosts.end()) hosts.push_back(rank.host);
    for (const Track& track : rank.tracks) {
      for (const Instant& i : track.instants) {
        if (name == 0 || cores == 0 || i.name != name) continue;
        const ArgRange a(rank, i.firstArg, i.argCount);
        // The fewest cores any rank may use (its CPU quota's where that allows fewer: the
        // host's threads split the quota), the most threads any computes with.
        double c = static_cast<double>(a.integer(cores, 0));
        const double q = quota != 0 ? a.number(quota, 0) : 0;
        if (q > 0) c = c > 0 ? std::min(c, q) : q;
        if (c > 0) out.cores = out.cores > 0 ? std::min(out.cores, c) : c;
        out.threadsPerRank = std::max(out.threadsPerRank, a.integer(threads, 1));
      }
    }
  }
  out.hosts = std::max<int64_t>(1, static_cast<int64_t>(hosts.size()));
  return out;
}

DdpModelSource ddpModelOf(const model::TraceStore& store, double hostCores) {
  std::vector<RankRecord> records;
  for (const RankData& rank : store.ranks()) {
    RankRecord r = readRank(store, rank);
    if (!r.steps.empty()) records.push_back(std::move(r));
  }
  if (records.empty() && holdsProfiledTorchDdp(store)) {
    ProfiledDdp profiled = profiledTorchDdp(store);
    // The hosts by the names the files give (Kineto's host_name), as a ringx trace's; their
    // cores, which the profiler does not record, as the caller says.
    // A GPU job's compute is its device's: no host cores shared.
    profiled.recording.host = hostCoresOf(store);
    profiled.recording.host.cores = profiled.device ? 0 : hostCores;
    DdpModelSource src;
    static_cast<replay::DdpFit&>(src) = replay::fitDdpModel(profiled.recording);
    src.planStep = profiled.firstStep;
    src.profiledWire = profiled.wire;
    src.torchDdp = true;
    return src;
  }
  if (records.empty()) {
    throw std::runtime_error(
        "no ringx.ddp (or ringx.fsdp) iterations in this trace: what-if replays a job trained "
        "with ringx.ddp.DistributedDataParallel or ringx.fsdp.FullyShardedDataParallel and "
        "traced (RINGX_TRACE_DIR)");
  }
  const Plan& plan = records.front().plan;
  if (plan.step < 0) {
    throw std::runtime_error(
        "this trace has no bucket_plan event (recorded before trace schema "
        "5): record it again with this ringx to ask what-if questions");
  }
  replay::DdpRecording rec;
  rec.limits.bucketBytes = plan.cap;
  rec.limits.firstBucketBytes = plan.first;
  rec.gradientAsBucketView = plan.view != 0;
  rec.worldSize = plan.world > 0 ? plan.world : static_cast<int64_t>(records.size());

  // Parameters: bytes and group from any rank's grad instants.
  int64_t paramCount = 0;
  for (const RankRecord& r : records) {
    for (const GradSample& g : r.grads) paramCount = std::max(paramCount, g.param + 1);
  }
  if (paramCount == 0) {
    throw std::runtime_error(
        "this trace has no gradient readiness (\"grad\" events): record it "
        "again with this ringx to ask what-if questions");
  }
  rec.params.assign(static_cast<size_t>(paramCount), replay::ParamLayout{});
  for (const RankRecord& r : records) {
    for (const GradSample& g : r.grads) {
      replay::ParamLayout& p = rec.params[static_cast<size_t>(g.param)];
      p.bytes = g.bytes;
      p.group = std::string(store.str(g.group));
    }
  }
  // Each rank's steps under the recorded plan.
  for (RankRecord& r : records) {
    replay::DdpRankRecord& out = rec.ranks.emplace_back();
    out.rank = r.rank;
    for (auto& [step, s] : r.steps) {
      if (step < plan.step) continue;
      s.step = step;
      out.steps.push_back(std::move(s));
    }
  }
  rec.calibration = calibrationOf(store);
  rec.host = hostCoresOf(store);
  DdpModelSource src;
  static_cast<replay::DdpFit&>(src) = replay::fitDdpModel(rec);
  src.planStep = plan.step;
  src.torchDdp = store.str(plan.engine) == "torch.ddp";
  return src;
}

namespace {}  // namespace

WhatIfReport whatIf(const model::TraceStore& store, const WhatIfQuestions& q) {
  WhatIfReport report;
  report.source = ddpModelOf(store, q.hostCores);
  const replay::DdpModel& m = report.source.model;
  report.baseline = replay::replayDdp(m);
  report.baselineErrorShare = shareOf(report.baseline.stepNs, report.source.recordedStepNs);

  std::vector<replay::DdpWhatIf> changes;
  std::vector<bool> planChange;
  auto ask = [&](replay::DdpWhatIf c, bool plan) {
    changes.push_back(std::move(c));
    planChange.push_back(plan);
  };
  askPlanQuestions<replay::DdpWhatIf>(q, m.limits.bucketBytes, m.gradientAsBucketView,
                                      report.source.torchDdp, true, ask);
  askSharedQuestions<replay::DdpWhatIf>(q.worldSizes, q.links, q.bounds, ask);
  report.bestPlanRow = answerRows(
      changes, planChange, report.source.recordedStepNs, report.baseline,
      [&](const replay::DdpWhatIf& c) { return replay::replayDdp(m, c); }, &report.rows);
  return report;
}

namespace {}  // namespace

std::string formatWhatIf(const WhatIfReport& r, const std::string& source) {
  const replay::DdpModel& m = r.source.model;
  std::string out = "what if: " + source + "\n";
  if (!r.source.profiledWire.empty()) {
    out +=
        "torch DDP recovered from torch.profiler traces: buckets from the Reducer's allreduces, "
        "the wire from " +
        (r.source.profiledWire == "nccl"
             ? std::string("the NCCL kernels, times on the GPU's compute stream")
             : r.source.profiledWire + "'s scopes") +
        ", the plan's limits inferred\n";
  }
  out += "DDP, " + std::to_string(m.ranks.size()) + " ranks, " + std::to_string(m.params.size()) +
         " parameters; recorded plan: bucket_cap_mb=" +
         shortNumber(static_cast<double>(m.limits.bucketBytes) / (1024.0 * 1024.0)) +
         ", first bucket " + formatBytes(m.limits.firstBucketBytes) +
         ", gradient_as_bucket_view=" + (m.gradientAsBucketView ? "True" : "False") + ", " +
         std::to_string(r.baseline.buckets.size()) + " buckets\n";
  out += "model from " + std::to_string(r.source.steps) + " steps (" +
         std::to_string(r.source.gradSteps) + " with gradient readiness) from step " +
         std::to_string(r.source.planStep) + "; wire " + m.link.describe() + " (fit of " +
         std::to_string(r.source.wire.samples) +
         (r.source.calibrated ? " sizes of the job's calibration" : " buckets") +
         ", median error " + percent(r.source.wire.medianErrorShare).substr(1) + ")" +
         contentionText(m.contention, m.contentionFitted, "backward", "an allreduce",
                        m.host.cores > 0) +
         "; " + std::to_string(m.samples.size()) + " recorded steps replayed in turn" +
         hostCoresText(m.host) + "\n";
  out += "recorded step " + formatDuration(r.source.recordedStepNs) + ", replayed " +
         formatDuration(r.baseline.stepNs) + " (" + percent(r.baselineErrorShare) +
         "); predictions below scale the recorded step by the replay's ratio; \"within noise\": "
         "inside the recorded steps' spread (p25-p75)\n\n";
  const size_t w = 34;
  out += padRight("change", w) + padLeft("predicted", 12) + padLeft("vs recorded", 13) +
         padLeft("steps p25-p75", 20) + padLeft("exposed comm", 14) + padLeft("buckets", 9) + "\n";
  const int64_t recorded = r.source.recordedStepNs, replayed = r.baseline.stepNs;
  out += padRight("as recorded", w) + padLeft(formatDuration(recorded), 12) + padLeft("", 13) +
         padLeft(intervalText(scaledPrediction(recorded, replayed, r.baseline.stepLowNs),
                              scaledPrediction(recorded, replayed, r.baseline.stepHighNs)),
                 20) +
         padLeft(formatDuration(r.baseline.exposedCommNs), 14) +
         padLeft(std::to_string(r.baseline.buckets.size()), 9) + "\n";
  for (const WhatIfRow& row : r.rows) {
    out += tableRow(row, w,
                    row.error.empty() ? padLeft(std::to_string(row.replay.buckets.size()), 9) : "");
  }
  if (r.bestPlanRow >= 0) {
    const WhatIfRow& best = r.rows[static_cast<size_t>(r.bestPlanRow)];
    out += "\nfastest plan: " + best.change.label + " (" + percent(best.changeShare) + ")" +
           (best.withinNoise ? ", within the recorded steps' spread: not a sure gain" : "") + "\n";
  } else {
    out += "\nno plan asked about is faster than the recorded one\n";
  }
  // The recorded step's critical path, coarsely: where the slowest rank's step goes.
  out +=
      "critical path of the recorded step (rank " + std::to_string(r.baseline.slowestRank) + "):";
  for (const replay::PathSegment& s : r.baseline.criticalPath) {
    out += std::string(" ") + replay::pathKindName(s.kind);
    if (s.bucket >= 0) out += " " + std::to_string(s.bucket);
    if (s.kind != replay::PathSegment::Kind::kAllreduce || s.rank != r.baseline.slowestRank) {
      out += "@" + std::to_string(s.rank);
    }
    out += " " + formatDuration(s.endNs - s.beginNs) + ",";
  }
  if (out.back() == ',') out.pop_back();
  out += "\n";
  return out;
}

namespace {

void jsonReplay(std::string& out, const replay::DdpReplay& r) {
  out += "\"step_ns\":" + std::to_string(r.stepNs) +
         ",\"step_low_ns\":" + std::to_string(r.stepLowNs) +
         ",\"step_high_ns\":" + std::to_string(r.stepHighNs) +
         ",\"exposed_comm_ns\":" + std::to_string(r.exposedCommNs) +
         ",\"comm_ns\":" + std::to_string(r.commNs) +
         ",\"buckets\":" + std::to_string(r.buckets.size()) +
         ",\"slowest_rank\":" + std::to_string(r.slowestRank) + ",\"bucket_bytes\":[";
  for (size_t i = 0; i < r.buckets.size(); ++i) {
    if (i > 0) out += ",";
    out += std::to_string(r.buckets[i].bytes);
  }
  out += "],\"critical_path\":";
  appendPathJson(out, r.criticalPath);
}

}  // namespace

std::string whatIfJson(const WhatIfReport& r) {
  const replay::DdpModel& m = r.source.model;
  std::string out = "{\"engine\":\"ddp\",\"source\":\"" +
                    std::string(r.source.profiledWire.empty() ? "ringx" : "profiler") +
                    "\",\"ranks\":" + std::to_string(m.ranks.size()) +
                    ",\"world_size\":" + std::to_string(m.worldSize) +
                    ",\"parameters\":" + std::to_string(m.params.size()) +
                    ",\"bucket_cap_bytes\":" + std::to_string(m.limits.bucketBytes) +
                    ",\"first_bucket_bytes\":" + std::to_string(m.limits.firstBucketBytes) +
                    ",\"gradient_as_bucket_view\":" + (m.gradientAsBucketView ? "true" : "false") +
                    ",\"steps\":" + std::to_string(r.source.steps) +
                    ",\"recorded_step_ns\":" + std::to_string(r.source.recordedStepNs) +
                    ",\"replayed_step_ns\":" + std::to_string(r.baseline.stepNs) +
                    ",\"baseline_error\":" + shortNumber(r.baselineErrorShare) +
                    ",\"wire\":{\"step_ns\":" + shortNumber(m.link.stepNs) +
                    ",\"ns_per_byte\":" + shortNumber(m.link.nsPerByte) +
                    ",\"samples\":" + std::to_string(r.source.wire.samples) +
                    ",\"median_error\":" + shortNumber(r.source.wire.medianErrorShare) +
                    ",\"calibrated\":" + (r.source.calibrated ? "true" : "false") +
                    "},\"copy_ns_per_byte\":" + shortNumber(m.copyNsPerByte) +
                    contentionJson(m.contention, m.contentionFitted) + hostCoresJson(m.host) +
                    ",\"replayed_steps\":" + std::to_string(m.samples.size()) + ",\"baseline\":{";
  jsonReplay(out, r.baseline);
  out += "},";
  appendRowsJson(out, r.rows, r.bestPlanRow, jsonReplay);
  return out;
}

}  // namespace ringx::analysis
