// A job's communication at a glance: what `ringx-trace summary` prints, and what
// the viewer shows in its summary panel.
//
//  - per collective kind and size class: how often, how long (total, mean, p50,
//    p99 of every rank's span), and the median bus bandwidth;
//  - per rank: time spent in collectives and its share of the rank's traced span;
//  - arrival skew: for each collective seen on several ranks (matched by group
//    and sequence number), how far apart the ranks began it on the aligned clock,
//    and which rank was last most often (the one the others wait for);
//  - what makes the numbers incomplete: dropped events, truncated files, ranks
//    whose clocks could not be aligned.
//
// Bus bandwidth follows nccl-tests: busbw = bytes / time x factor, with factor
// 2(n-1)/n for allreduce, (n-1)/n for all_gather and reduce_scatter and 1 for
// the rest (n = the group_size argument), so numbers compare with its tables.
// Percentiles are nearest-rank: p50 is the smallest sample with at least half
// of the samples at or below it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "backend/trace/trace_dir.h"

namespace ringx::trace {

// Size classes: class k >= 0 holds [4^k, 4^(k+1)) bytes. Zero-byte collectives
// (barrier) and those without a bytes argument have classes of their own.
inline constexpr int kZeroBytesClass = -1;
inline constexpr int kUnknownSizeClass = -2;
int sizeClass(int64_t bytes);  // bytes < 0: unknown
// "64 KiB-256 KiB", "0 B", "unknown size".
std::string sizeClassLabel(int sizeClass);
// The bus bandwidth factor of `op` in a group of `groupSize` ranks.
double busBandwidthFactor(std::string_view op, int64_t groupSize);
// send, recv and their variants: matched by peer, not by group sequence.
bool isPointToPoint(std::string_view op);
// p in (0, 100]: the nearest-rank percentile of `sorted` (ascending); 0 when empty.
int64_t percentile(const std::vector<int64_t>& sorted, int p);

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

// DDP engine events (ringx.ddp), over every rank and iteration.
struct DdpBucketStats {
  int64_t bucket = 0;
  uint64_t samples = 0;  // bucket spans (ranks x iterations)
  int64_t bytes = 0;     // of the last sample (buckets may be rebuilt once)
  int64_t params = 0;
  int64_t readyToLaunchMeanNs = 0;  // waiting for earlier buckets (in-order launch)
  int64_t wireMeanNs = 0;
  int64_t wireP50Ns = 0;
  int64_t exposedMeanNs = 0;  // communication after backward's compute ended
  double hiddenShare = 0;     // 1 - exposed / wire, over all samples
};

struct DdpStats {
  uint64_t iterations = 0;  // backward spans over all ranks
  int64_t forwardMeanNs = 0;
  int64_t backwardMeanNs = 0;
  int64_t optimizerMeanNs = 0;
  int64_t exposedMeanNs = 0;  // per iteration: the most exposed bucket
  double hiddenShare = 0;     // over every bucket of every iteration
  uint64_t rebuilds = 0;
  std::vector<DdpBucketStats> buckets;  // by bucket index
};

// FSDP engine events (ringx.fsdp), over every rank and iteration.
struct FsdpUnitStats {
  std::string unit;  // module path; "(root)"
  uint64_t gathers = 0;
  int64_t gatherBytes = 0;  // the unsharded parameters
  int64_t gatherWireMeanNs = 0;
  int64_t exposedMeanNs = 0;   // compute waiting for a gather, per gather
  double prefetchedShare = 0;  // gathers issued ahead of need
  uint64_t reductions = 0;     // reduce_scatter (or NO_SHARD allreduce) spans
  int64_t reduceWireMeanNs = 0;
  int64_t replicaWireMeanNs = 0;  // HYBRID_SHARD's allreduce across replicas
  int64_t forwardMeanNs = 0;      // the unit's own forward compute
  int64_t backwardMeanNs = 0;
};

struct FsdpStats {
  uint64_t iterations = 0;  // backward spans over all ranks
  int64_t forwardMeanNs = 0;
  int64_t backwardMeanNs = 0;
  int64_t optimizerMeanNs = 0;
  int64_t exposedMeanNs = 0;         // per iteration and rank: compute waiting for gathers
  int64_t peakBytes = 0;             // the largest fsdp.peak_bytes of any rank
  int64_t shardedBytes = 0;          // the largest fsdp.sharded_bytes of any rank
  std::vector<FsdpUnitStats> units;  // in order of first appearance
};

struct Summary {
  std::string source;
  int32_t worldSize = 0;
  int64_t tracedNs = 0;  // earliest to latest event of the job, aligned
  uint64_t events = 0;
  std::vector<CollectiveStats> collectives;  // by op (most total time first), then size
  std::vector<RankStats> ranks;              // by rank
  SkewStats skew;
  DdpStats ddp;    // iterations == 0 when the job recorded no DDP events
  FsdpStats fsdp;  // iterations == 0 when the job recorded no FSDP events
  uint64_t droppedEvents = 0;
  std::vector<int32_t> truncatedRanks;
  std::vector<int32_t> unalignedRanks;  // not the reference and without clock samples
  // The trace set's warnings, then the summary's own (dropped events, clocks).
  std::vector<std::string> warnings;
};

Summary summarize(const TraceSet& trace);
DdpStats summarizeDdp(const TraceSet& trace);
FsdpStats summarizeFsdp(const TraceSet& trace);

// The summary as text tables for a terminal, ending in a newline.
std::string formatSummary(const Summary& summary);

// "850 ns", "12.3 us", "4.56 ms", "1.23 s".
std::string formatDuration(int64_t ns);

}  // namespace ringx::trace
