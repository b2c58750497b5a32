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
// It is computed from a trace store (viewer/model/trace_store.h) with the same
// analyses the viewer's panels show (analysis/trace_analyses.h: collectives
// matched across ranks, the DDP and FSDP engines) and the figures of
// analysis/figures.h, so the text and the viewer agree.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "analysis/figures.h"
#include "analysis/trace_analyses.h"
#include "backend/trace/trace_dir.h"
#include "viewer/model/trace_store.h"

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
};

struct Summary {
  std::string source;
  int32_t worldSize = 0;
  int64_t tracedNs = 0;  // earliest to latest event of the job, aligned
  uint64_t events = 0;
  std::vector<CollectiveStats> collectives;  // by op (most total time first), then size
  std::vector<RankStats> ranks;              // by rank
  SkewStats skew;
  DdpAnalysis ddp;               // no iterations when the job recorded no DDP events
  FsdpAnalysis fsdp;             // no iterations when the job recorded no FSDP events
  int64_t fsdpPeakBytes = 0;     // the largest fsdp.peak_bytes of any rank
  int64_t fsdpShardedBytes = 0;  // the largest fsdp.sharded_bytes of any rank
  uint64_t droppedEvents = 0;
  std::vector<int32_t> truncatedRanks;
  std::vector<int32_t> unalignedRanks;  // not the reference and without clock samples
  // The store's warnings, then the summary's own (dropped events, clocks).
  std::vector<std::string> warnings;
};

// Any finalized store: ringx traces, Chrome traces, both.
Summary summarize(const viewer::TraceStore& store, const std::string& source);
// A ringx trace set, ingested into a store; the world size is its headers'
// (ranks whose files are missing count).
Summary summarize(const trace::TraceSet& trace);

// The summary as text tables for a terminal, ending in a newline.
std::string formatSummary(const Summary& summary);

}  // namespace ringx::analysis
