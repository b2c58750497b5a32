// "Why is my step slow, and what should I change?": `ringx-trace advise` and the viewer's What
// if panel. Two kinds of answer, each with its evidence:
//
//  - changes: every what-if the job's engine allows (analysis/whatif.h: for DDP a ladder of
//    bucket caps and gradient_as_bucket_view flipped; for FSDP the other sharding strategies,
//    prefetch modes, the limiter, units merged in twos and threes; for FSDP2 what fully_shard
//    offers), ranked by predicted gain, each with the replayed steps' spread and marked when
//    its prediction falls inside the recorded steps' own spread (noise, not a sure gain);
//  - findings the trace proves, whatever the engine: a rank that arrives last at most
//    collectives (the others wait for it), the share of the step spent waiting for
//    communication, an FSDP unit whose gather is never prefetched while compute waits for
//    it, DDP buckets that launch well after they are ready (in-order launch behind a late
//    bucket). Each says what was measured and what to change.
//
// The thresholds below decide what is worth saying; the figures come from analysis/summary.h
// (one pass over the trace) and the what-if reports, so advice and summary never disagree.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/summary.h"
#include "trace/model/trace_store.h"

namespace ringx::analysis {

struct AdvisedChange {
  std::string label;  // "bucket_cap_mb=4", "reshard_after_forward=False"
  int64_t predictedStepNs = 0;
  int64_t lowNs = 0, highNs = 0;  // the replayed steps' spread, scaled as the prediction
  double changeShare = 0;         // predicted / recorded - 1: negative is faster
  bool withinNoise = false;
};

struct Finding {
  std::string kind;      // "straggler", "exposed-communication", "no-prefetch", "late-launch"
  std::string what;      // one line: what the trace shows
  std::string evidence;  // the figures behind it
  std::string change;    // what to do about it
};

struct Advice {
  std::string engine;  // the engine whose changes were replayed ("" for none)
  int64_t recordedStepNs = 0;
  double modelErrorShare = 0;          // the unchanged replay against the recorded step
  std::string whatIfError;             // why no change could be replayed (no engine events), or ""
  std::vector<AdvisedChange> changes;  // fastest first
  std::vector<Finding> findings;       // in the order above
};

// Findings are thresholded: a straggler is last at more of at least 8 matched collectives than
// halfway from chance (1/n) to all of them; exposed communication is at least 10% of the step; a
// never-prefetched unit made compute wait at least 5% of the step in total per step; a bucket's
// mean launch delay is at least 5% of the step.
Advice advise(const model::TraceStore& store, const Summary& summary);

std::string formatAdvice(const Advice& advice, const std::string& source);
// {"engine", "recorded_step_ns", "model_error", "what_if_error", "changes": [{"change",
// "predicted_step_ns", "predicted_low_ns", "predicted_high_ns", "change_share",
// "within_noise"}], "findings": [{"kind", "what", "evidence", "change"}]}
std::string adviceJson(const Advice& advice);

}  // namespace ringx::analysis
