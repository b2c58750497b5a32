// How the what-if reports (whatif.cc for DDP, whatif_fsdp.cc for FSDP) write numbers and
// columns: one way for both engines' tables and JSON. Internal to analysis/.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/replay/cost_model.h"
#include "analysis/replay/step.h"
#include "base/format.h"
#include "base/json_text.h"

namespace ringx::analysis::whatif_text {

// Six significant digits, no trailing zeros: "25", "0.0999994" (the table and the JSON).
inline std::string shortNumber(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

inline std::string percent(double share) {
  char text[32];
  std::snprintf(text, sizeof text, "%+.1f%%", share * 100);
  return text;
}

inline std::string padRight(std::string text, size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

inline std::string padLeft(const std::string& text, size_t width) {
  return text.size() < width ? std::string(width - text.size(), ' ') + text : text;
}

// The contention constant as the report states it ("; contention 0.2 ns of backward per ns beside
// an allreduce", saying where it came from when the recording could not fit it), and as JSON.
// With the cores recorded it prices another world size only (program.h).
inline std::string contentionText(double contention, bool fitted, const char* compute,
                                  const char* collective, bool coresRecorded) {
  return "; contention " + shortNumber(contention) + " ns of " + compute + " per ns beside " +
         collective + (coresRecorded ? " for another world size" : "") +
         (fitted ? ""
                 : " (from the cores: no recorded " + std::string(compute) +
                       " ran beside part of " + collective + ")");
}
inline std::string contentionJson(double contention, bool fitted) {
  return ",\"contention\":" + shortNumber(contention) +
         ",\"contention_fitted\":" + (fitted ? "true" : "false");
}

// The hosts' cores as the report states them ("; cores: 2 per host, 1 compute thread per rank,
// 1 host (each compute at the share its schedule leaves it; world_size shares them out)"), and
// as JSON ("host_cores":{...}, null when not recorded).
inline std::string hostCoresText(const replay::HostCores& h) {
  if (h.cores <= 0) return "; cores: not recorded (world_size keeps each rank's compute)";
  return "; cores: " + shortNumber(h.cores) + " per host, " + std::to_string(h.threadsPerRank) +
         " compute thread" + (h.threadsPerRank == 1 ? "" : "s") + " per rank, " +
         std::to_string(h.hosts) + " host" + (h.hosts == 1 ? "" : "s") +
         " (each compute at the share its schedule leaves it; world_size shares them out)";
}
inline std::string hostCoresJson(const replay::HostCores& h) {
  if (h.cores <= 0) return ",\"host_cores\":null";
  return ",\"host_cores\":{\"cores\":" + shortNumber(h.cores) +
         ",\"threads_per_rank\":" + std::to_string(h.threadsPerRank) +
         ",\"hosts\":" + std::to_string(h.hosts) + "}";
}

// A prediction: the recorded step scaled by the replay's ratio of the change to the
// unchanged model, so that the model's own error on the recorded step cancels.
inline int64_t scaledPrediction(int64_t recordedNs, int64_t baselineNs, int64_t changedNs) {
  if (baselineNs <= 0) return changedNs;
  return static_cast<int64_t>(static_cast<double>(recordedNs) * static_cast<double>(changedNs) /
                                  static_cast<double>(baselineNs) +
                              0.5);
}

inline double shareOf(int64_t changedNs, int64_t baselineNs) {
  return baselineNs > 0 ? static_cast<double>(changedNs) / static_cast<double>(baselineNs) - 1 : 0;
}

// The critical path as JSON: [{"kind", "rank", "bucket", "begin_ns", "end_ns"}, ...] ("bucket" is
// the FSDP unit for FSDP's collectives).
inline void appendPathJson(std::string& out, const std::vector<replay::PathSegment>& path) {
  out += "[";
  for (size_t i = 0; i < path.size(); ++i) {
    const replay::PathSegment& s = path[i];
    out += std::string(i ? "," : "") + "{\"kind\":";
    appendJsonString(out, replay::pathKindName(s.kind));
    out += ",\"rank\":" + std::to_string(s.rank) + ",\"bucket\":" + std::to_string(s.bucket) +
           ",\"begin_ns\":" + std::to_string(s.beginNs) + ",\"end_ns\":" + std::to_string(s.endNs) +
           "}";
  }
  out += "]";
}

// The questions both engines ask after their own: world sizes, wires, and the two bounds.
// `ask(change, false)`: none is a plan change (named fastest).
template <class Change, class Ask>
void askSharedQuestions(const std::vector<int64_t>& worldSizes,
                        const std::vector<replay::LinkCost>& links, bool bounds, Ask ask) {
  for (int64_t n : worldSizes) {
    Change c;
    c.label = "world_size=" + std::to_string(n);
    c.worldSize = n;
    ask(c, false);
  }
  for (const replay::LinkCost& l : links) {
    Change c;
    c.label = "link " + l.describe();
    c.link = l;
    ask(c, false);
  }
  if (bounds) {
    Change comm;
    comm.label = "communication free";
    comm.commFree = true;
    ask(comm, false);
    Change compute;
    compute.label = "compute free";
    compute.computeFree = true;
    ask(compute, false);
  }
}

// The DDP plan questions asked (or, by default, caps around the recorded one and torch's 25, and
// the view toggled where `askView`), each as ask(change, true). torch's DDP, given
// bucket_cap_mb, makes its first bucket that size too (torch/nn/parallel/distributed.py,
// _BucketConfig: 1 MB only for the default cap), where ringx.ddp keeps it at most 1 MB
// (bucket_plan.h's limitsForCap): `torchRule`.
template <typename Change, typename Questions, typename Ask>
void askPlanQuestions(const Questions& q, int64_t recordedCapBytes, bool recordedView,
                      bool torchRule, bool askView, Ask ask) {
  std::vector<double> caps = q.bucketCapMb;
  auto view = q.gradientAsBucketView;
  if (q.defaults()) {
    const double recordedMb = static_cast<double>(recordedCapBytes) / (1024.0 * 1024.0);
    for (double f : {0.25, 0.5, 2.0, 4.0}) caps.push_back(std::round(recordedMb * f * 1000) / 1000);
    caps.push_back(25);
    if (askView) view = !recordedView;
  }
  std::sort(caps.begin(), caps.end());
  caps.erase(std::unique(caps.begin(), caps.end()), caps.end());
  for (double cap : caps) {
    if (cap <= 0) continue;
    Change c;
    c.label = "bucket_cap_mb=" + shortNumber(cap);
    c.bucketCapBytes = static_cast<int64_t>(cap * 1024 * 1024);
    if (torchRule) c.firstBucketBytes = c.bucketCapBytes;
    ask(c, true);
  }
  for (double first : q.firstBucketMb) {
    Change c;
    c.label = "first_bucket_mb=" + shortNumber(first);
    c.firstBucketBytes = static_cast<int64_t>(first * 1024 * 1024);
    ask(c, true);
  }
  if (view) {
    Change c;
    c.label = std::string("gradient_as_bucket_view=") + (*view ? "True" : "False");
    c.gradientAsBucketView = *view;
    ask(c, true);
  }
}

// "11.20-12.90 ms": an interval of durations, the unit written once where both share it.
inline std::string intervalText(int64_t lowNs, int64_t highNs) {
  std::string low = formatDuration(lowNs);
  const std::string high = formatDuration(highNs);
  const size_t unit = low.rfind(' ');
  if (unit != std::string::npos && high.size() > unit &&
      low.substr(unit) == high.substr(high.rfind(' '))) {
    low.resize(unit);
  }
  return low + "-" + high;
}

// Replays every change into `rows` (Row: change, replay, predictedStepNs, changeShare, the
// interval, withinNoise, error): predictions scaled to the recorded step, a change the model
// cannot answer (invalid_argument) kept with its message. Returns the row of the fastest plan
// change (`plan[i]`) that beats the baseline, or -1.
template <class Row, class Change, class Baseline, class Replay>
int64_t answerRows(const std::vector<Change>& changes, const std::vector<bool>& plan,
                   int64_t recordedNs, const Baseline& baseline, Replay replayOf,
                   std::vector<Row>* rows) {
  const int64_t baselineNs = baseline.stepNs;
  int64_t best = baselineNs, bestRow = -1;
  for (size_t i = 0; i < changes.size(); ++i) {
    Row row;
    row.change = changes[i];
    try {
      row.replay = replayOf(row.change);
      // The change against the replayed baseline (in the model it replayed with: another
      // world size's, replay.referenceNs): the model's own error cancels.
      const int64_t referenceNs = row.replay.referenceNs > 0 ? row.replay.referenceNs : baselineNs;
      row.predictedStepNs = scaledPrediction(recordedNs, referenceNs, row.replay.stepNs);
      row.changeShare = shareOf(row.replay.stepNs, referenceNs);
      row.predictedLowNs = scaledPrediction(recordedNs, referenceNs, row.replay.stepLowNs);
      row.predictedHighNs = scaledPrediction(recordedNs, referenceNs, row.replay.stepHighNs);
      row.withinNoise =
          row.replay.stepNs >= baseline.stepLowNs && row.replay.stepNs <= baseline.stepHighNs;
    } catch (const std::invalid_argument& e) {
      row.error = e.what();
    }
    if (plan[i] && row.error.empty() && row.replay.stepNs < best) {
      best = row.replay.stepNs;
      bestRow = static_cast<int64_t>(rows->size());
    }
    rows->push_back(std::move(row));
  }
  return bestRow;
}

// One row of a what-if table: the change, its prediction, its share of the recorded step, the
// interval, the exposed communication, `extra` columns (DDP's buckets) and "within noise"; or
// why the model cannot predict it.
template <class Row>
std::string tableRow(const Row& row, size_t width, const std::string& extra = "") {
  if (!row.error.empty()) {
    return padRight(row.change.label, width) + "  cannot predict: " + row.error + "\n";
  }
  return padRight(row.change.label, width) + padLeft(formatDuration(row.predictedStepNs), 12) +
         padLeft(percent(row.changeShare), 13) +
         padLeft(intervalText(row.predictedLowNs, row.predictedHighNs), 20) +
         padLeft(formatDuration(row.replay.exposedCommNs), 14) + extra +
         (row.withinNoise ? "  within noise" : "") + "\n";
}

// `"rows":[{"change", "predicted_step_ns", "change_share", "error", ...jsonReplay}],
// "best_plan": label or null}` and the closing brace and newline of the report.
template <class Row, class JsonReplay>
void appendRowsJson(std::string& out, const std::vector<Row>& rows, int64_t bestRow,
                    JsonReplay jsonReplay) {
  out += "\"rows\":[";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& row = rows[i];
    out += std::string(i ? "," : "") + "{\"change\":";
    appendJsonString(out, row.change.label);
    out += ",\"predicted_step_ns\":" + std::to_string(row.predictedStepNs) +
           ",\"predicted_low_ns\":" + std::to_string(row.predictedLowNs) +
           ",\"predicted_high_ns\":" + std::to_string(row.predictedHighNs) +
           ",\"within_noise\":" + (row.withinNoise ? "true" : "false") +
           ",\"change_share\":" + shortNumber(row.changeShare) + ",\"error\":";
    if (row.error.empty()) {
      out += "null,";
    } else {
      appendJsonString(out, row.error);
      out += ",";
    }
    jsonReplay(out, row.replay);
    out += "}";
  }
  out += "],\"best_plan\":";
  if (bestRow >= 0) {
    appendJsonString(out, rows[static_cast<size_t>(bestRow)].change.label);
  } else {
    out += "null";
  }
  out += "}\n";
}

}  // namespace ringx::analysis::whatif_text
