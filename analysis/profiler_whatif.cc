// What-if questions of a profiler trace's program (see profiler_whatif.h).
#include "analysis/profiler_whatif.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "analysis/whatif_text.h"
#include "base/format.h"

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
  return profilerWhatIf(profilerProgramOf(store), questions);
}

ProfilerWhatIfReport profilerWhatIf(ProfilerProgram program, const WhatIfQuestions& questions) {
  if (!questions.bucketCapMb.empty() || !questions.firstBucketMb.empty() ||
      questions.gradientAsBucketView || !questions.shardingStrategies.empty() ||
      !questions.backwardPrefetch.empty() || questions.forwardPrefetch ||
      questions.limitAllGathers || !questions.mergeUnits.empty()) {
    throw std::invalid_argument(
        "these are profiler traces: the DDP and FSDP questions (bucket caps, sharding, "
        "prefetch, units) are answered from a ringx trace of the job for now; ask --link, "
        "--world-size or the bounds");
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
  askSharedQuestions<ProfilerChange>(questions.worldSizes, questions.links, questions.bounds,
                                     [&](const ProfilerChange& c, bool) { changes.push_back(c); });
  const std::vector<bool> plan(changes.size(), false);
  answerRows(
      changes, plan, r.source.recordedStepNs, r.baseline,
      [&](const ProfilerChange& c) { return replayProfiler(r.source, r.wire, c); }, &r.rows);
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
  for (const ProfilerWhatIfRow& row : r.rows) out += tableRow(row, w);
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
         ",\"slowest_rank\":" + std::to_string(r.slowestRank) + ",\"critical_path\":";
  appendPathJson(out, r.criticalPath);
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
      ",\"host_syncs\":" + std::to_string(p.hostSyncs) + ",\"wire\":" +
      (r.wire.ok ? "{\"step_ns\":" + shortNumber(r.wire.link.stepNs) +
                       ",\"ns_per_byte\":" + shortNumber(r.wire.link.nsPerByte) +
                       ",\"samples\":" + std::to_string(r.wire.samples) +
                       ",\"median_error\":" + shortNumber(r.wire.medianErrorShare) + "}"
                 : std::string("null")) +
      contentionJson(p.times.contention, p.times.contention > 0) + ",\"baseline\":{";
  profilerReplayJson(out, r.baseline);
  out += "},";
  appendRowsJson(out, r.rows, -1, profilerReplayJson);
  return out;
}

}  // namespace ringx::analysis
