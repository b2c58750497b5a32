// A job's communication at a glance: what `ringx-trace summary` prints.
//
//  - per collective kind and size class: how often, how long (total, mean, p50,
//    p99 of every rank's span), and the median bus bandwidth;
//  - per rank: time spent in collectives and its share of the rank's traced span;
//  - arrival skew: for each collective seen on several ranks (matched by group
//    and sequence number), how far apart the ranks began it on the aligned clock,
//    and which rank was last most often (the one the others wait for);
//  - the DDP and FSDP engines' iterations, buckets and units;
//  - what makes the numbers incomplete: dropped events, truncated files, ranks
//    whose clocks could not be aligned.
//
//  - stragglers at any scale: each rank's mean arrival lateness (how long after
//    the first rank it began the collectives it shared with others) and how
//    often it was last, summed per host, so a slow host or rank of 1,000 stands
//    out in a few lines.
//
// It is computed rank by rank (SummaryBuilder in summary.cc): each rank is
// reduced to per-rank figures, per-(op, size) distributions and its part of
// each (group, seq) collective, then dropped, so a trace directory of 1,000
// ranks and 100M events is summarised in memory that grows with ranks and
// collectives, not events (summarizeTrace reads one rank file per thread at a
// time). A rank is read through the trace model's store
// (trace/model/trace_store.h) and the engines' builders of
// analysis/trace_analyses.h, and every figure comes from analysis/figures.h,
// so the text and the viewer agree.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "analysis/figures.h"
#include "analysis/trace_analyses.h"
#include "trace/model/trace_store.h"
#include "trace/read/trace_dir.h"

namespace ringx::analysis {

struct CollectiveStats {
  std::string op;
  int sizeClass = 0;
  std::string sizeLabel;
  uint64_t calls = 0;   // distinct collectives (by group and seq; spans without seq count each)
  uint64_t spans = 0;   // completed spans over all ranks: the time statistics' samples
  uint64_t failed = 0;  // spans with an error argument, left out of the statistics
  uint64_t bytes = 0;   // summed over the spans
  int64_t totalNs = 0;  // summed over the spans (rank-time)
  int64_t meanNs = 0;
  int64_t p50Ns = 0;
  int64_t p99Ns = 0;
  int64_t maxNs = 0;
  double busbwGBps = 0;  // median over spans with bytes and a duration; 0 when none
};

struct RankStats {
  int32_t rank = 0;
  std::string host;
  uint64_t events = 0;
  uint64_t collectives = 0;  // collective spans
  uint64_t failed = 0;
  int64_t commNs = 0;    // time inside at least one collective (overlaps counted once)
  int64_t tracedNs = 0;  // first event's begin to last event's end
  double commShare = 0;  // commNs / tracedNs
  uint64_t dropped = 0;
  bool truncated = false;
  // The clock: known for ringx streams; other producers' files (Chrome traces)
  // are taken as they are.
  bool clockKnown = false;
  bool clockReference = false;
  bool clockAligned = false;
  int64_t clockOffsetNs = 0;  // at the rank's first event
  int64_t clockUncertaintyNs = 0;
  // Arrival: over the collectives matched across ranks that this rank recorded,
  // how long after the earliest rank it began them (mean), and how often it was
  // the single last one.
  uint64_t matchedCollectives = 0;
  int64_t latenessMeanNs = 0;
  uint64_t timesLast = 0;
  // Its GPUs' streams in a profiler trace (lanes "GPU N / stream M"), as HTA's temporal
  // breakdown and communication/compute overlap count them (figures.h's gpuWorkOf): from the
  // first kernel's start to the last one's end (0: none), the time no kernel ran, the time a
  // compute kernel ran, a communication kernel ran, and both at once.
  int64_t gpuSpanNs = 0, gpuIdleNs = 0, gpuComputeNs = 0, gpuCommNs = 0, gpuOverlapNs = 0;
};

// The ranks of one host, summed: stragglers at 1,000 ranks are often a host.
struct HostStats {
  std::string host;            // "?" when the trace does not say
  std::vector<int32_t> ranks;  // ascending
  int64_t commNs = 0;          // summed over its ranks
  int64_t tracedNs = 0;
  double commShare = 0;        // commNs / tracedNs
  int64_t latenessMeanNs = 0;  // over every matched collective of its ranks
  uint64_t timesLast = 0;      // collectives one of its ranks was last to
};

struct SkewStats {
  uint64_t matched = 0;     // collectives seen on at least two ranks
  uint64_t incomplete = 0;  // of those, seen on fewer ranks than their group_size
  int64_t p50Ns = 0;
  int64_t p99Ns = 0;
  int64_t maxNs = 0;
  // The collective with the largest skew.
  std::string maxOp;
  std::string maxGroup;
  int64_t maxSeq = -1;
  int32_t maxLastRank = -1;
  // How often each rank began last (ties, where no single rank was last, are not counted).
  std::map<int32_t, uint64_t> lastArrivals;
  int32_t mostOftenLast = -1;  // -1 when no collective had a single last rank
  uint64_t mostOftenLastCount = 0;
  // The largest clock uncertainty of the ranks involved: skews below it are noise.
  int64_t clockUncertaintyNs = 0;
  // Spans that their producer never numbered (profiler traces' NCCL kernels), given a seq by a
  // rule (trace::kMatchedByArg): how many by each rule.
  std::map<std::string, uint64_t> matchedBy;
};

struct Summary {
  std::string source;
  int32_t worldSize = 0;
  int64_t tracedNs = 0;  // earliest to latest event of the job, aligned
  uint64_t events = 0;
  std::vector<CollectiveStats> collectives;  // by op (most total time first), then size
  std::vector<RankStats> ranks;              // by rank
  std::vector<HostStats> hosts;              // latest arrivals first (then by name)
  SkewStats skew;
  // The engines' figures; their iteration lists stay empty (iterationCount says
  // how many), so that memory does not grow with the steps.
  DdpAnalysis ddp;               // iterationCount 0 when the job recorded no DDP events
  FsdpAnalysis fsdp;             // iterationCount 0 when the job recorded no FSDP events
  int64_t fsdpPeakBytes = 0;     // the largest fsdp.peak_bytes of any rank
  int64_t fsdpShardedBytes = 0;  // the largest fsdp.sharded_bytes of any rank
  uint64_t droppedEvents = 0;
  std::vector<int32_t> truncatedRanks;
  std::vector<int32_t> unalignedRanks;  // not the reference and without clock samples
  // The store's warnings, then the summary's own (dropped events, clocks).
  std::vector<std::string> warnings;
};

// Any finalized store: ringx traces, Chrome traces, both (all in memory).
Summary summarize(const model::TraceStore& store, const std::string& source);
// A ringx trace set already in memory, one rank at a time; the world size is
// its headers' (ranks whose files are missing count).
Summary summarize(const trace::TraceSet& trace);
// A ringx trace directory or file read from disk one rank file at a time on
// `threads` threads (each holds one rank): what `ringx-trace summary DIR` runs.
// Memory: `threads` ranks' events plus O(ranks + collectives).
Summary summarizeTrace(const std::string& path, unsigned threads);

}  // namespace ringx::analysis
