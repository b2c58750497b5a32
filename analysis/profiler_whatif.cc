// What-if questions of a profiler trace's program (see profiler_whatif.h).
#include "analysis/profiler_whatif.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "analysis/profiler_ddp.h"
#include "analysis/profiler_ddp_plan.h"
#include "analysis/whatif_text.h"
#include "base/format.h"
#include "base/json_text.h"

namespace ringx::analysis {
using namespace whatif_text;

replay::LinkFit profilerWire(const ProfilerProgram& p) {
  std::vector<replay::CostSample> samples;
  for (size_t c = 0; c < p.program.collectives.size(); ++c) {
    if (p.collectiveBytes[c] <= 0 || p.program.collectives[c].ns <= 0) continue;
    samples.push_back({p.collectiveOps[c], p.collectiveBytes[c], p.collectiveGroupSize[c],
                       p.program.collectives[c].ns});
  }
  return replay::fitLinkCost(samples);
}

ProfilerReplay replayProfiler(const ProfilerProgram& p, const replay::LinkFit& wire,
                              const ProfilerChange& change) {
  replay::Program program = p.program;
  replay::ProgramTimes times = p.times;
  if (change.link || change.worldSize) {
    if (!wire.ok) {
      throw std::invalid_argument(
          "the trace's collectives say no sizes (no element counts on the kernels, no shapes "
          "on their nccl: scopes: record with record_shapes=True), so no wire can be fitted");
    }
    // Each collective's time times the model's ratio of the change to the fitted wire; those
    // of unknown size by the median ratio of the others.
    std::vector<double> ratios(program.collectives.size(), -1);
    std::vector<double> known;
    for (size_t c = 0; c < program.collectives.size(); ++c) {
      const int64_t bytes = p.collectiveBytes[c], n = p.collectiveGroupSize[c];
      if (bytes <= 0) continue;
      const int64_t base = replay::collectiveNs(wire.link, p.collectiveOps[c], bytes, n);
      const int64_t changed =
          replay::collectiveNs(change.link ? *change.link : wire.link, p.collectiveOps[c], bytes,
                               change.worldSize ? *change.worldSize : n);
      if (base <= 0) continue;
      ratios[c] = static_cast<double>(changed) / static_cast<double>(base);
      known.push_back(ratios[c]);
    }
    const double fallback = known.empty() ? 1 : median(known);
    for (size_t c = 0; c < program.collectives.size(); ++c) {
      const double ratio = ratios[c] >= 0 ? ratios[c] : fallback;
      program.collectives[c].ns =
          static_cast<int64_t>(static_cast<double>(program.collectives[c].ns) * ratio + 0.5);
    }
  }
  if (change.commFree) {
    for (replay::ProgramCollective& c : program.collectives) c.ns = 0;
  }
  if (change.computeFree) {
    for (size_t r = 0; r < program.perRank.size(); ++r) {
      for (const replay::ProgramOp& op : program.perRank[r].ops) {
        if (op.type == replay::ProgramOp::Type::kCompute && op.queue > 0) {
          times.durations[r][op.step][op.slot] = 0;
          times.overlaps[r][op.step][op.slot] = 0;
        }
      }
    }
  }
  ProfilerReplay out;
  static_cast<replay::ProgramRun&>(out) = replay::runProgram(program, times);
  return out;
}

ProfilerWhatIfReport profilerWhatIf(const model::TraceStore& store,
                                    const WhatIfQuestions& questions) {
  ProfilerProgram program = profilerProgramOf(store);
  std::optional<ProfiledDdp> ddp = profiledGpuDdp(store, &program);
  return profilerWhatIf(std::move(program), questions, std::move(ddp));
}

std::optional<ProfiledDdp> profiledGpuDdp(const model::TraceStore& store,
                                          ProfilerProgram* program) {
  if (!holdsProfiledTorchDdp(store)) return std::nullopt;
  try {
    ProfiledDdp ddp = profiledTorchDdp(store);
    if (!ddp.kernels.empty()) return ddp;  // else not a GPU job's: no kernels to re-plan
  } catch (const std::runtime_error& e) {
    program->notes.push_back(std::string("torch DDP's buckets not recovered: ") + e.what());
  }
  return std::nullopt;
}

namespace {

bool asksDdp(const WhatIfQuestions& q) {
  return !q.bucketCapMb.empty() || !q.firstBucketMb.empty() || q.gradientAsBucketView;
}

}  // namespace

ProfilerWhatIfReport profilerWhatIf(ProfilerProgram program, const WhatIfQuestions& questions,
                                    std::optional<ProfiledDdp> ddp) {
  const bool asksFsdp = !questions.shardingStrategies.empty() ||
                        !questions.backwardPrefetch.empty() || questions.forwardPrefetch ||
                        questions.limitAllGathers || !questions.mergeUnits.empty();
  if (asksFsdp || (asksDdp(questions) && !ddp)) {
    std::string why;
    for (const std::string& n : program.notes) why += "; " + n;
    throw std::invalid_argument(
        std::string(asksFsdp ? "FSDP's questions (sharding, prefetch, units) are answered from a "
                               "CPU job's profiler trace or a ringx trace of the job, not yet "
                               "from a GPU job's"
                             : "these profiler traces hold no torch DDP whose buckets could be "
                               "recovered (DistributedDataParallel.forward, record_shapes=True)") +
        "; ask --link, --world-size or the bounds" + why);
  }
  ProfilerWhatIfReport r;
  r.source = std::move(program);
  r.wire = profilerWire(r.source);
  try {
    r.baseline = replayProfiler(r.source, r.wire, {});
  } catch (const std::logic_error& e) {
    throw std::runtime_error(
        "the ranks' collectives do not replay together (each waits for one another has not "
        "reached): give every rank's file of the same steps");
  }
  r.baselineErrorShare = shareOf(r.baseline.stepNs, r.source.recordedStepNs);
  std::vector<int64_t> errors;
  for (size_t c = 0; c < r.source.recordedStartNs.size(); ++c) {
    errors.push_back(
        std::abs(r.baseline.startNs[c] + r.baseline.originNs - r.source.recordedStartNs[c]));
  }
  std::sort(errors.begin(), errors.end());
  r.startErrorMedianNs = replay::medianNs(errors);
  r.startErrorP90Ns = percentile(errors, 90);
  std::vector<ProfilerChange> changes;
  std::vector<bool> plan;
  auto ask = [&](const ProfilerChange& c, bool isPlan) {
    changes.push_back(c);
    plan.push_back(isPlan);
  };
  r.ddp = std::move(ddp);
  if (r.ddp) {
    // The recorded plan rewritten as the others are: the reference they are scaled by.
    const std::vector<replay::BucketSpec> recorded = profiledPlan(*r.ddp, r.ddp->recording.limits);
    r.ddpReferenceNs =
        replayProfiler(withBucketPlan(r.source, *r.ddp, recorded, r.wire), r.wire, {}).stepNs;
    askPlanQuestions<ProfilerChange>(questions, r.ddp->recording.limits.bucketBytes,
                                     r.ddp->recording.gradientAsBucketView, true,
                                     /*askView=*/false, ask);
  }
  askSharedQuestions<ProfilerChange>(questions.worldSizes, questions.links, questions.bounds, ask);
  answerRows(
      changes, plan, r.source.recordedStepNs, r.baseline,
      [&](const ProfilerChange& c) {
        if (!c.bucketCapBytes && !c.firstBucketBytes && !c.gradientAsBucketView) {
          return replayProfiler(r.source, r.wire, c);
        }
        if (c.gradientAsBucketView) {
          throw std::invalid_argument(
              "gradient_as_bucket_view is not answered from a GPU job's profiler trace yet (its "
              "copies' kernels would have to be added or removed)");
        }
        const std::vector<replay::BucketSpec> buckets = profiledPlan(
            *r.ddp,
            replay::changedLimits(r.ddp->recording.limits, c.bucketCapBytes, c.firstBucketBytes));
        ProfilerReplay out =
            replayProfiler(withBucketPlan(r.source, *r.ddp, buckets, r.wire), r.wire, {});
        out.referenceNs = r.ddpReferenceNs;
        out.buckets = buckets.size();
        return out;
      },
      &r.rows);
  return r;
}

std::string formatProfilerWhatIf(const ProfilerWhatIfReport& r, const std::string& source) {
  const ProfilerProgram& p = r.source;
  std::string out = "what if: " + source + "\n";
  const size_t ranks = p.times.ranks.size();
  out += "profiler trace, " + std::to_string(ranks) + (ranks == 1 ? " rank, " : " ranks, ") +
         std::to_string(p.program.steps) + (p.program.steps == 1 ? " step" : " steps") +
         (p.stepNumbers.empty() ? " (no ProfilerStep: the whole trace)" : "") + "; " +
         std::to_string(p.kernels) + " device ops, " + std::to_string(p.collectives) +
         " collectives matched across ranks, " + std::to_string(p.streamWaits) +
         " stream waits inferred" +
         (p.syncRule ? " (no cudaStreamWaitEvent recorded: each "
                       "collective waited by the next kernel)"
                     : "") +
         ", " + std::to_string(p.hostSyncs) + " host synchronisations\n";
  out +=
      "wire " +
      (r.wire.ok
           ? r.wire.link.describe() + " (fit of " + std::to_string(r.wire.samples) +
                 " collectives, median error " + percent(r.wire.medianErrorShare).substr(1) + ")"
           : std::string("not fitted (no collective says its size)")) +
      contentionText(p.times.contention, p.times.contention > 0, "kernel", "a collective", false) +
      "\n";
  for (const std::string& n : p.notes) out += "note: " + n + "\n";
  if (r.ddp) {
    const replay::DdpRecording& d = r.ddp->recording;
    out += "torch DDP recovered from the trace: " + std::to_string(r.ddp->bucketBytes.size()) +
           " buckets of " + std::to_string(d.params.size()) + " gradients (bucket_cap_mb=" +
           shortNumber(static_cast<double>(d.limits.bucketBytes) / (1024.0 * 1024.0)) +
           " inferred); its plans re-planned in the program, each new allreduce timed by the "
           "wire, against the recorded plan so rewritten (" +
           formatDuration(r.ddpReferenceNs) + ")\n";
  }
  out += "recorded step " + formatDuration(p.recordedStepNs) + ", replayed " +
         formatDuration(r.baseline.stepNs) + " (" + percent(r.baselineErrorShare) +
         "); collectives started " + formatDuration(r.startErrorMedianNs) +
         " from where they did (p90 " + formatDuration(r.startErrorP90Ns) +
         "); predictions below scale the recorded step by the replay's ratio\n\n";
  const size_t w = 34;
  out += padRight("change", w) + padLeft("predicted", 12) + padLeft("vs recorded", 13) +
         padLeft("steps p25-p75", 20) + padLeft("exposed comm", 14) + "\n";
  const int64_t recorded = p.recordedStepNs, replayed = r.baseline.stepNs;
  out += padRight("as recorded", w) + padLeft(formatDuration(recorded), 12) + padLeft("", 13) +
         padLeft(intervalText(scaledPrediction(recorded, replayed, r.baseline.stepLowNs),
                              scaledPrediction(recorded, replayed, r.baseline.stepHighNs)),
                 20) +
         padLeft(formatDuration(r.baseline.exposedCommNs), 14) + "\n";
  for (ProfilerWhatIfRow row : r.rows) {
    if (row.replay.buckets > 0) {
      row.change.label += " (" + std::to_string(row.replay.buckets) +
                          (row.replay.buckets == 1 ? " bucket)" : " buckets)");
    }
    out += tableRow(row, w);
  }
  // Where the slowest rank's step went along its critical path, by kind.
  std::vector<std::pair<std::string, int64_t>> kinds;
  int64_t covered = 0;
  for (const replay::PathSegment& s : r.baseline.criticalPath) {
    const std::string name = replay::pathKindName(s.kind);
    auto it =
        std::find_if(kinds.begin(), kinds.end(), [&](const auto& k) { return k.first == name; });
    if (it == kinds.end()) it = kinds.insert(kinds.end(), {name, 0});
    it->second += s.endNs - s.beginNs;
    covered += s.endNs - s.beginNs;
  }
  out += "\ncritical path of the replayed step (rank " + std::to_string(r.baseline.slowestRank) +
         ", " + std::to_string(r.baseline.criticalPath.size()) + " stretches):";
  // A path that starts late began on a rank that began its step late (as recorded).
  int64_t late = 0;
  if (!r.baseline.criticalPath.empty() && r.baseline.criticalPath.front().beginNs > 0) {
    const replay::PathSegment& first = r.baseline.criticalPath.front();
    late = first.beginNs;
    out += " rank " + std::to_string(first.rank) + " began the step " + formatDuration(late) +
           " later,";
  }
  for (const auto& [name, ns] : kinds) out += " " + name + " " + formatDuration(ns) + ",";
  const int64_t rest = r.baseline.stepNs - covered - late;
  if (rest > 0) out += " launch latency and gaps " + formatDuration(rest) + ",";
  if (out.back() == ',') out.pop_back();
  out += "\n";
  return out;
}

namespace {

void profilerReplayJson(std::string& out, const ProfilerReplay& r) {
  out += "\"step_ns\":" + std::to_string(r.stepNs) +
         ",\"step_low_ns\":" + std::to_string(r.stepLowNs) +
         ",\"step_high_ns\":" + std::to_string(r.stepHighNs) +
         ",\"exposed_comm_ns\":" + std::to_string(r.exposedCommNs) +
         ",\"slowest_rank\":" + std::to_string(r.slowestRank) +
         (r.buckets > 0 ? ",\"buckets\":" + std::to_string(r.buckets) : std::string()) +
         ",\"critical_path\":";
  appendPathJson(out, r.criticalPath);
}

std::string notesJson(const std::vector<std::string>& notes) {
  std::string out = "[";
  for (size_t i = 0; i < notes.size(); ++i) {
    if (i > 0) out += ",";
    appendJsonString(out, notes[i]);
  }
  return out + "]";
}

}  // namespace

std::string profilerWhatIfJson(const ProfilerWhatIfReport& r) {
  const ProfilerProgram& p = r.source;
  std::string out =
      "{\"engine\":\"profiler\",\"ranks\":" + std::to_string(p.times.ranks.size()) +
      ",\"steps\":" + std::to_string(p.program.steps) +
      ",\"recorded_step_ns\":" + std::to_string(p.recordedStepNs) +
      ",\"replayed_step_ns\":" + std::to_string(r.baseline.stepNs) +
      ",\"baseline_error\":" + shortNumber(r.baselineErrorShare) +
      ",\"start_error_median_ns\":" + std::to_string(r.startErrorMedianNs) +
      ",\"start_error_p90_ns\":" + std::to_string(r.startErrorP90Ns) +
      ",\"kernels\":" + std::to_string(p.kernels) +
      ",\"collectives\":" + std::to_string(p.collectives) +
      ",\"stream_waits\":" + std::to_string(p.streamWaits) +
      ",\"host_syncs\":" + std::to_string(p.hostSyncs) + ",\"notes\":" + notesJson(p.notes) +
      ",\"wire\":" +
      (r.wire.ok ? "{\"step_ns\":" + shortNumber(r.wire.link.stepNs) +
                       ",\"ns_per_byte\":" + shortNumber(r.wire.link.nsPerByte) +
                       ",\"samples\":" + std::to_string(r.wire.samples) +
                       ",\"median_error\":" + shortNumber(r.wire.medianErrorShare) + "}"
                 : std::string("null")) +
      contentionJson(p.times.contention, p.times.contention > 0) + ",\"ddp\":" +
      (r.ddp ? "{\"buckets\":" + std::to_string(r.ddp->bucketBytes.size()) +
                   ",\"bucket_cap_bytes\":" + std::to_string(r.ddp->recording.limits.bucketBytes) +
                   ",\"reference_step_ns\":" + std::to_string(r.ddpReferenceNs) + "}"
             : std::string("null")) +
      ",\"baseline\":{";
  profilerReplayJson(out, r.baseline);
  out += "},";
  appendRowsJson(out, r.rows, -1, profilerReplayJson);
  return out;
}

}  // namespace ringx::analysis
