// The FSDP replay model built from a trace, and its what-if report (see whatif.h).
#include <algorithm>
#include <map>
#include <stdexcept>
#include <unordered_map>

#include "analysis/profiler_ddp.h"
#include "analysis/profiler_fsdp.h"
#include "analysis/profiler_program.h"
#include "analysis/store_reading.h"
#include "analysis/whatif.h"
#include "analysis/whatif_text.h"

namespace ringx::analysis {
using namespace store_reading;
using namespace whatif_text;

namespace {

struct Config {
  int64_t step = -1;
  uint32_t strategy = 0, backwardPrefetch = 0;
  int64_t forwardPrefetch = 0, limiter = 1, gatherLane = 0, shardSize = 0;
  uint32_t engine = 0;  // "ringx.fsdp", "torch.fsdp2"; 0: before schema 7 (ringx.fsdp)
  int64_t blocking = 0;
  bool sameSchedule(const Config& o) const {
    return strategy == o.strategy && backwardPrefetch == o.backwardPrefetch &&
           forwardPrefetch == o.forwardPrefetch && limiter == o.limiter &&
           gatherLane == o.gatherLane && shardSize == o.shardSize && engine == o.engine &&
           blocking == o.blocking;
  }
};

struct FsdpRankReading {
  int32_t rank = 0;
  std::map<int64_t, replay::FsdpStepRecord> steps;
  std::vector<Config> configs;  // by step
};

// Unit names are shared by every rank: index by name.
size_t unitIndex(std::vector<std::string>& units, const std::string& name) {
  auto it = std::find(units.begin(), units.end(), name);
  if (it != units.end()) return static_cast<size_t>(it - units.begin());
  units.push_back(name);
  return units.size() - 1;
}

FsdpRankReading readFsdpRank(const model::TraceStore& store, const RankData& rank,
                             std::vector<std::string>& units) {
  const StringPool& pool = store.strings();
  const Keys keys(pool);
  const uint32_t forward = pool.find("forward"), backward = pool.find("backward"),
                 optimizer = pool.find("optimizer"), allGather = pool.find("all_gather"),
                 reshard = pool.find("reshard"), reduceScatter = pool.find("reduce_scatter"),
                 allreduce = pool.find("allreduce"), config = pool.find("fsdp_config");
  const uint32_t strategy = pool.find(targ::kShardingStrategy),
                 backwardPrefetch = pool.find(targ::kBackwardPrefetch),
                 forwardPrefetch = pool.find(targ::kForwardPrefetch),
                 limiter = pool.find(targ::kLimitAllGathers), lane = pool.find(targ::kGatherLane),
                 issue = pool.find(targ::kIssueNs), engine = pool.find(targ::kEngine),
                 blocking = pool.find(targ::kBlocking);
  const std::string_view prefix = trace::track::kFsdpUnitPrefix;
  FsdpRankReading r;
  r.rank = rank.rank;
  for (const Track& track : rank.tracks) {
    if (track.kind == TrackKind::kFsdp) {
      forAllSpans(track, [&](uint32_t, uint32_t, const Span& s) {
        if (s.name == 0) return;
        const int64_t step = ArgRange(rank, s).integer(keys.step, -1);
        if (step < 0) return;
        replay::FsdpStepRecord& p = r.steps[step];
        if (s.name == forward) {
          p.forwardBeginNs = s.begin;
          p.forwardEndNs = s.end;
        } else if (s.name == backward) {
          p.backwardBeginNs = s.begin;
          p.backwardEndNs = s.end;
        } else if (s.name == optimizer) {
          p.optimizerNs = s.duration();
        }
      });
      for (const Instant& i : track.instants) {
        if (config == 0 || i.name != config) continue;
        const ArgRange a(rank, i.firstArg, i.argCount);
        r.configs.push_back(
            {a.integer(keys.step, -1), a.string(strategy), a.string(backwardPrefetch),
             a.integer(forwardPrefetch, 0), a.integer(limiter, 1), a.integer(lane, 0),
             a.integer(keys.groupSize, 0), a.string(engine), a.integer(blocking, 0)});
      }
      continue;
    }
    if (track.kind != TrackKind::kFsdpUnit) continue;
    const size_t unit = unitIndex(units, std::string(store.str(track.name).substr(prefix.size())));
    forAllSpans(track, [&](uint32_t, uint32_t, const Span& s) {
      if (s.name == 0) return;
      const ArgRange a(rank, s);
      const int64_t step = a.integer(keys.step, -1);
      if (step < 0) return;
      replay::FsdpStepRecord& p = r.steps[step];
      const int64_t wireEnd = a.integer(keys.wireEnd, 0);
      if (s.name == allGather) {
        p.gathers.push_back({unit, a.integer(keys.bytes, 0), a.integer(issue, s.begin), s.end,
                             std::max<int64_t>(0, a.integer(keys.exposed, 0)), wireEnd,
                             a.integer(keys.prefetched, 0) != 0});
      } else if (s.name == reduceScatter || s.name == allreduce) {
        p.reductions.push_back({unit, s.name == allreduce, a.integer(keys.bytes, 0),
                                a.integer(keys.launch, s.begin), s.end, wireEnd});
      } else if (s.name == forward) {
        p.forward.push_back({unit, s.begin, s.end});
      } else if (s.name == backward) {
        p.backward.push_back({unit, s.begin, s.end});
      } else if (s.name == reshard) {
        p.reshards.push_back({unit, s.begin, s.end});
      }
    });
  }
  std::sort(r.configs.begin(), r.configs.end(),
            [](const Config& a, const Config& b) { return a.step < b.step; });
  return r;
}

}  // namespace

std::string whatIfEngine(const model::TraceStore& store) {
  // A GPU job's profiler trace: its program (profiler_whatif.h answers torch DDP's bucket
  // questions there, where its buckets are recovered).
  if (holdsProfilerTrace(store)) return "profiler";
  // A job that ran both engines: the one whose plan or schedule the trace records (what its
  // model needs); both or neither: DDP.
  bool ddp = false, fsdp = false, ddpPlan = false, fsdpConfig = false;
  const uint32_t plan = store.strings().find("bucket_plan"),
                 config = store.strings().find("fsdp_config");
  for (const RankData& rank : store.ranks()) {
    for (const Track& track : rank.tracks) {
      const bool isFsdp = track.kind == TrackKind::kFsdp || track.kind == TrackKind::kFsdpUnit;
      fsdp = fsdp || isFsdp;
      ddp = ddp || track.kind == TrackKind::kDdp;
      for (const Instant& i : track.instants) {
        ddpPlan = ddpPlan || (plan != 0 && i.name == plan);
        fsdpConfig = fsdpConfig || (config != 0 && i.name == config);
      }
    }
  }
  if (fsdp && (!ddp || (fsdpConfig && !ddpPlan))) return "fsdp";
  if (ddp) return "ddp";
  // Profiler traces of a job that ran nothing of ringx: its engine's own scopes.
  if (!fsdp && holdsProfiledTorchFsdp2(store)) return "fsdp";
  return !fsdp && holdsProfiledTorchDdp(store) ? "ddp" : "";
}

FsdpModelSource fsdpModelOf(const model::TraceStore& store, double hostCores) {
  std::vector<std::string> units;
  std::vector<FsdpRankReading> records;
  for (const RankData& rank : store.ranks()) {
    FsdpRankReading r = readFsdpRank(store, rank, units);
    if (!r.steps.empty()) records.push_back(std::move(r));
  }
  if (records.empty() && holdsProfiledTorchFsdp2(store)) {
    ProfiledFsdp profiled = profiledTorchFsdp2(store);
    // The hosts as ddpModelOf reads them from profiler traces.
    profiled.recording.host = hostCoresOf(store);
    profiled.recording.host.cores = hostCores;
    FsdpModelSource src;
    static_cast<replay::FsdpFit&>(src) = replay::fitFsdpModel(profiled.recording);
    src.firstStep = profiled.firstStep;
    src.profiledWire = profiled.wire;
    return src;
  }
  if (records.empty()) {
    throw std::runtime_error(
        "no ringx.fsdp iterations in this trace: what-if replays a job trained with "
        "ringx.fsdp.FullyShardedDataParallel and traced (RINGX_TRACE_DIR)");
  }
  const FsdpRankReading& first = records.front();
  if (first.configs.empty()) {
    throw std::runtime_error(
        "this trace has no fsdp_config event (recorded before trace schema 6): record it again "
        "with this ringx to ask what-if questions");
  }
  // The steps since the schedule last changed.
  const Config& last = first.configs.back();
  int64_t since = last.step;
  for (auto it = first.configs.rbegin(); it != first.configs.rend() && it->sameSchedule(last);
       ++it) {
    since = it->step;
  }
  replay::FsdpRecording rec;
  rec.units = units;
  const std::string strategy(store.str(last.strategy)), prefetch(store.str(last.backwardPrefetch));
  if (!replay::parseFsdpSharding(strategy, &rec.runtime.sharding)) {
    throw std::runtime_error("the recorded sharding strategy " +
                             (strategy.empty() ? std::string("(none)") : strategy) +
                             " is not modelled: what-if replays FULL_SHARD, SHARD_GRAD_OP and "
                             "NO_SHARD");
  }
  if (!replay::parseFsdpBackwardPrefetch(prefetch, &rec.runtime.backwardPrefetch)) {
    throw std::runtime_error("unknown backward_prefetch in the trace: " + prefetch);
  }
  rec.runtime.forwardPrefetch = last.forwardPrefetch != 0;
  rec.runtime.limitAllGathers = last.limiter != 0;
  rec.runtime.gatherLane = last.gatherLane != 0;
  rec.runtime.blocking = last.blocking != 0;
  rec.runtime.fsdp2 = store.str(last.engine) == "torch.fsdp2";
  rec.worldSize = last.shardSize > 1 ? last.shardSize : static_cast<int64_t>(records.size());
  if (rec.runtime.sharding == replay::FsdpSharding::kNoShard) {
    rec.worldSize = static_cast<int64_t>(store.ranks().size());
  }
  for (FsdpRankReading& r : records) {
    replay::FsdpRankRecord& out = rec.ranks.emplace_back();
    out.rank = r.rank;
    for (auto& [step, s] : r.steps) {
      if (step < since) continue;
      s.step = step;
      out.steps.push_back(std::move(s));
    }
  }
  FsdpModelSource src;
  rec.calibration = calibrationOf(store);
  rec.host = hostCoresOf(store);
  static_cast<replay::FsdpFit&>(src) = replay::fitFsdpModel(rec);
  src.firstStep = since;
  return src;
}

namespace {

// A change's label in the recording engine's own terms: ringx.fsdp takes FSDP1's arguments;
// FSDP2 (fully_shard) says reshard_after_forward and set_modules_to_forward_prefetch.
std::string shardingLabel(replay::FsdpSharding s, bool fsdp2) {
  if (fsdp2 && s != replay::FsdpSharding::kNoShard) {
    return std::string("reshard_after_forward=") +
           (s == replay::FsdpSharding::kFullShard ? "True" : "False");
  }
  return std::string("sharding_strategy=") + replay::fsdpShardingName(s);
}

std::string forwardPrefetchLabel(bool on, bool fsdp2) {
  if (fsdp2) return on ? "forward prefetch of the next unit" : "no forward prefetch";
  return std::string("forward_prefetch=") + (on ? "True" : "False");
}

}  // namespace

FsdpWhatIfReport fsdpWhatIf(const model::TraceStore& store, const WhatIfQuestions& q) {
  using replay::FsdpBackwardPrefetch;
  using replay::FsdpSharding;
  FsdpWhatIfReport report;
  report.source = fsdpModelOf(store, q.hostCores);
  const replay::FsdpModel& m = report.source.model;
  report.baseline = replay::replayFsdp(m);
  report.baselineErrorShare = shareOf(report.baseline.stepNs, report.source.recordedStepNs);

  std::vector<replay::FsdpWhatIf> changes;
  std::vector<bool> schedule;  // a change of the engine's options (the best one is named)
  auto ask = [&](replay::FsdpWhatIf c, bool plan) {
    changes.push_back(std::move(c));
    schedule.push_back(plan);
  };
  std::vector<std::string> strategies = q.shardingStrategies, prefetches = q.backwardPrefetch;
  std::optional<bool> forwardPrefetch = q.forwardPrefetch, limiter = q.limitAllGathers;
  std::vector<int64_t> merges = q.mergeUnits;
  const bool fsdp2 = m.runtime.fsdp2;
  if (q.defaults()) {
    // FSDP2 has no NO_SHARD (that is DDP), no rate limiter, and prefetches backward as
    // BACKWARD_PRE does: what it can be asked to change.
    for (FsdpSharding s :
         {FsdpSharding::kFullShard, FsdpSharding::kShardGradOp, FsdpSharding::kNoShard}) {
      if (s != m.runtime.sharding && !(fsdp2 && s == FsdpSharding::kNoShard)) {
        strategies.push_back(replay::fsdpShardingName(s));
      }
    }
    for (FsdpBackwardPrefetch p :
         {FsdpBackwardPrefetch::kBackwardPre, FsdpBackwardPrefetch::kBackwardPost,
          FsdpBackwardPrefetch::kNone}) {
      if (p != m.runtime.backwardPrefetch && !fsdp2)
        prefetches.push_back(replay::fsdpBackwardPrefetchName(p));
    }
    forwardPrefetch = !m.runtime.forwardPrefetch;
    if (!fsdp2) limiter = !m.runtime.limitAllGathers;
    merges.push_back(2);
  }
  for (const std::string& name : strategies) {
    replay::FsdpWhatIf c;
    FsdpSharding s;
    if (!replay::parseFsdpSharding(name, &s)) {
      throw std::invalid_argument("unknown sharding strategy '" + name +
                                  "': use FULL_SHARD, SHARD_GRAD_OP or NO_SHARD");
    }
    c.sharding = s;
    c.label = shardingLabel(s, fsdp2);
    ask(c, true);
  }
  for (const std::string& name : prefetches) {
    replay::FsdpWhatIf c;
    c.label = "backward_prefetch=" + name;
    FsdpBackwardPrefetch p;
    if (!replay::parseFsdpBackwardPrefetch(name, &p)) {
      throw std::invalid_argument("unknown backward_prefetch '" + name +
                                  "': use BACKWARD_PRE, BACKWARD_POST or NONE");
    }
    c.backwardPrefetch = p;
    ask(c, true);
  }
  if (forwardPrefetch) {
    replay::FsdpWhatIf c;
    c.label = forwardPrefetchLabel(*forwardPrefetch, fsdp2);
    c.forwardPrefetch = *forwardPrefetch;
    ask(c, true);
  }
  if (limiter) {
    replay::FsdpWhatIf c;
    c.label = std::string("limit_all_gathers=") + (*limiter ? "True" : "False");
    c.limitAllGathers = *limiter;
    ask(c, true);
  }
  for (int64_t k : merges) {
    replay::FsdpWhatIf c;
    c.label = "units merged by " + std::to_string(k);
    c.mergeUnits = k;
    ask(c, true);
  }
  askSharedQuestions<replay::FsdpWhatIf>(q.worldSizes, q.links, q.bounds, ask);
  report.bestRow = answerRows(
      changes, schedule, report.source.recordedStepNs, report.baseline,
      [&](const replay::FsdpWhatIf& c) { return replay::replayFsdp(m, c); }, &report.rows);
  return report;
}

std::string formatFsdpWhatIf(const FsdpWhatIfReport& r, const std::string& source) {
  const replay::FsdpModel& m = r.source.model;
  std::string out = "what if: " + source + "\n";
  if (!r.source.profiledWire.empty()) {
    out +=
        "torch FSDP2 recovered from torch.profiler traces: units, gathers and reductions from "
        "its FSDP:: scopes, the wire from " +
        r.source.profiledWire + "'s scopes\n";
  }
  if (m.runtime.fsdp2) {
    out += "FSDP2 (torch's fully_shard), " + std::to_string(m.ranks.size()) + " ranks, " +
           std::to_string(m.units.size()) +
           " units; recorded: " + shardingLabel(m.runtime.sharding, true) + ", " +
           forwardPrefetchLabel(m.runtime.forwardPrefetch, true) +
           (m.runtime.blocking ? "; every collective blocks the thread that issued it (CPU)" : "") +
           "\n";
  } else {
    out += "FSDP, " + std::to_string(m.ranks.size()) + " ranks, " + std::to_string(m.units.size()) +
           " units; recorded: sharding_strategy=" + replay::fsdpShardingName(m.runtime.sharding) +
           ", backward_prefetch=" + replay::fsdpBackwardPrefetchName(m.runtime.backwardPrefetch) +
           ", forward_prefetch=" + (m.runtime.forwardPrefetch ? "True" : "False") +
           ", limit_all_gathers=" + (m.runtime.limitAllGathers ? "True" : "False") + "\n";
  }
  out += "model from " + std::to_string(r.source.steps) + " steps from step " +
         std::to_string(r.source.firstStep) + "; wire: all_gather " + m.gather.describe() +
         ", reduce_scatter " + m.reduceScatter.describe() + ", allreduce " +
         m.allreduce.describe() +
         (r.source.calibrated ? " (from the job's calibration where it timed the kind)" : "") +
         contentionText(m.contention, m.contentionFitted, "compute", "a collective",
                        m.host.cores > 0) +
         hostCoresText(m.host) + "\n";
  out += "recorded step " + formatDuration(r.source.recordedStepNs) + ", replayed " +
         formatDuration(r.baseline.stepNs) + " (" + percent(r.baselineErrorShare) +
         "); predictions below scale the recorded step by the replay's ratio; \"within noise\": "
         "inside the recorded steps' spread (p25-p75)\n\n";
  const size_t w = 34;
  out += padRight("change", w) + padLeft("predicted", 12) + padLeft("vs recorded", 13) +
         padLeft("steps p25-p75", 20) + padLeft("exposed comm", 14) + padLeft("units", 7) +
         padLeft("gathers", 9) + "\n";
  auto line = [&](const std::string& label, int64_t predicted, const std::string& share,
                  int64_t low, int64_t high, const replay::FsdpReplay& x, bool noise) {
    out += padRight(label, w) + padLeft(formatDuration(predicted), 12) + padLeft(share, 13) +
           padLeft(intervalText(low, high), 20) + padLeft(formatDuration(x.exposedCommNs), 14) +
           padLeft(std::to_string(x.units), 7) + padLeft(std::to_string(x.gathers), 9) +
           (noise ? "  within noise" : "") + "\n";
  };
  const int64_t recorded = r.source.recordedStepNs, replayed = r.baseline.stepNs;
  line("as recorded", recorded, "", scaledPrediction(recorded, replayed, r.baseline.stepLowNs),
       scaledPrediction(recorded, replayed, r.baseline.stepHighNs), r.baseline, false);
  for (const FsdpWhatIfRow& row : r.rows) {
    if (!row.error.empty()) {
      out += padRight(row.change.label, w) + "  cannot predict: " + row.error + "\n";
      continue;
    }
    line(row.change.label, row.predictedStepNs, percent(row.changeShare), row.predictedLowNs,
         row.predictedHighNs, row.replay, row.withinNoise);
  }
  if (r.bestRow >= 0) {
    const FsdpWhatIfRow& best = r.rows[static_cast<size_t>(r.bestRow)];
    out += "\nfastest schedule: " + best.change.label + " (" + percent(best.changeShare) + ")" +
           (best.withinNoise ? ", within the recorded steps' spread: not a sure gain" : "") + "\n";
  } else {
    out += "\nno schedule asked about is faster than the recorded one\n";
  }
  out += "the slowest rank's step (rank " + std::to_string(r.baseline.slowestRank) + "):";
  for (const replay::PathSegment& s : r.baseline.criticalPath) {
    out += std::string(" ") + replay::pathKindName(s.kind);
    if (s.bucket >= 0 && static_cast<size_t>(s.bucket) < m.units.size()) {
      const std::string& name = m.units[static_cast<size_t>(s.bucket)].name;
      out += " " + name + "@" + std::to_string(s.rank);
    }
    out += " " + formatDuration(s.endNs - s.beginNs) + ",";
  }
  if (out.back() == ',') out.pop_back();
  out += "\n";
  return out;
}

namespace {

void jsonFsdpReplay(std::string& out, const replay::FsdpReplay& r) {
  out += "\"step_ns\":" + std::to_string(r.stepNs) +
         ",\"step_low_ns\":" + std::to_string(r.stepLowNs) +
         ",\"step_high_ns\":" + std::to_string(r.stepHighNs) +
         ",\"exposed_comm_ns\":" + std::to_string(r.exposedCommNs) +
         ",\"comm_ns\":" + std::to_string(r.commNs) + ",\"units\":" + std::to_string(r.units) +
         ",\"gathers\":" + std::to_string(r.gathers) +
         ",\"slowest_rank\":" + std::to_string(r.slowestRank) + ",\"critical_path\":";
  appendPathJson(out, r.criticalPath);
}

void jsonLink(std::string& out, const char* name, const replay::LinkCost& l) {
  out += std::string("\"") + name + "\":{\"step_ns\":" + shortNumber(l.stepNs) +
         ",\"ns_per_byte\":" + shortNumber(l.nsPerByte) + "}";
}

}  // namespace

std::string fsdpWhatIfJson(const FsdpWhatIfReport& r) {
  const replay::FsdpModel& m = r.source.model;
  std::string out = std::string("{\"engine\":\"") + (m.runtime.fsdp2 ? "fsdp2" : "fsdp") +
                    "\",\"source\":\"" + (r.source.profiledWire.empty() ? "ringx" : "profiler") +
                    "\",\"ranks\":" + std::to_string(m.ranks.size()) +
                    ",\"world_size\":" + std::to_string(m.worldSize) +
                    ",\"units\":" + std::to_string(m.units.size()) + ",\"sharding_strategy\":";
  appendJsonString(out, replay::fsdpShardingName(m.runtime.sharding));
  out += ",\"backward_prefetch\":";
  appendJsonString(out, replay::fsdpBackwardPrefetchName(m.runtime.backwardPrefetch));
  out += std::string(",\"forward_prefetch\":") + (m.runtime.forwardPrefetch ? "true" : "false") +
         ",\"limit_all_gathers\":" + (m.runtime.limitAllGathers ? "true" : "false") +
         ",\"blocking\":" + (m.runtime.blocking ? "true" : "false") +
         ",\"steps\":" + std::to_string(r.source.steps) +
         ",\"recorded_step_ns\":" + std::to_string(r.source.recordedStepNs) +
         ",\"replayed_step_ns\":" + std::to_string(r.baseline.stepNs) +
         ",\"baseline_error\":" + shortNumber(r.baselineErrorShare) +
         contentionJson(m.contention, m.contentionFitted) + hostCoresJson(m.host) + ",\"wire\":{";
  jsonLink(out, "all_gather", m.gather);
  out += ",";
  jsonLink(out, "reduce_scatter", m.reduceScatter);
  out += ",";
  jsonLink(out, "allreduce", m.allreduce);
  out += "},\"unit_sizes\":[";
  for (size_t i = 0; i < m.units.size(); ++i) {
    out += i == 0 ? "{\"unit\":" : ",{\"unit\":";
    appendJsonString(out, m.units[i].name);
    out += ",\"param_bytes\":" + std::to_string(m.units[i].paramBytes) +
           ",\"grad_bytes\":" + std::to_string(m.units[i].gradBytes) + "}";
  }
  out += "],\"baseline\":{";
  jsonFsdpReplay(out, r.baseline);
  out += "},";
  appendRowsJson(out, r.rows, r.bestRow, jsonFsdpReplay);
  return out;
}

}  // namespace ringx::analysis
