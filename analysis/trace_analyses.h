// The trace analyses: what the viewer's panels, `ringx-trace summary` and
// `ringx-trace diff` compute from a finalized TraceStore (the trace model's
// store, which keeps only what drawing needs): statistics of a
// selection, collectives matched across ranks (skew, mismatches, hang suspects),
// the DDP and FSDP engines' iterations, buckets and units, and memory peaks with
// what was alive at them. No ImGui here, so every number is tested headless.
//
// Each function is one or two O(events) passes (plus sorting what it reports),
// so a million events analyze in a fraction of a second; panels still cache the
// results on TraceStore::generation().
//
// Every figure (bus bandwidth, percentiles, hidden and exposed communication,
// prefetched share, arrival skew) is defined once, in analysis/figures.h;
// `ringx-trace summary` (analysis/summary.h) prints these same analyses, so the
// viewer and the text agree. Point-to-point ops are left out of cross-rank
// matching.
// Times are the store's aligned nanoseconds, including the time arguments
// (ready_ns, wire_start_ns, ...), which ingest aligned with their events.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/figures.h"
#include "trace/model/trace_store.h"

namespace ringx::replay {
struct DdpRecording;
struct FsdpRecording;
}  // namespace ringx::replay

namespace ringx::analysis {

// The analyses read the trace model's store.
using model::RankData;
using model::TraceStore;

// Where a span lives in the store: ranks()[i].rank == rank, then
// tracks[track].levels[level][index]. Valid until the next finalize().
struct SpanRef {
  int32_t rank = -1;
  uint32_t track = 0;
  uint32_t level = 0;
  uint32_t index = 0;
};

// ---- selection statistics -----------------------------------------------------

struct RankEventStats {
  int32_t rank = 0;
  uint64_t count = 0;
  int64_t totalNs = 0;
  int64_t meanNs = 0;
  double busbwGBps = 0;  // median over this rank's spans with bytes; 0 when none
};

// Statistics of the spans of one name. Durations are whole spans (a span that
// sticks out of the range counts with its full length, so a selection never
// changes a collective's time); failed spans (an "error" argument) count too.
struct EventStats {
  uint32_t nameId = 0;  // StringPool id
  std::string name;
  uint64_t count = 0;
  uint64_t failed = 0;
  int64_t totalNs = 0;
  int64_t meanNs = 0;
  int64_t p50Ns = 0;  // nearest rank (trace::percentile)
  int64_t p99Ns = 0;
  int64_t minNs = 0;
  int64_t maxNs = 0;
  int64_t bytes = 0;  // sum of the "bytes" arguments
  // Median bus bandwidth over spans with bytes > 0 and a duration, with op = the
  // span's name and n = its group_size argument (else the number of ranks in the
  // store, as the summary falls back to the world size); 0 when none.
  double busbwGBps = 0;
  std::vector<RankEventStats> perRank;  // ranks that have such spans, by rank
};

// Every span named `nameId`, on any rank and track, that overlaps [t0, t1]
// (ends at or after t0 and begins at or before t1). INT64_MIN..INT64_MAX: all.
EventStats statsForName(const TraceStore& store, uint32_t nameId,
                        int64_t t0 = std::numeric_limits<int64_t>::min(),
                        int64_t t1 = std::numeric_limits<int64_t>::max());
// One EventStats per span name overlapping [t0, t1], most total time first
// (ties by name).
std::vector<EventStats> statsForRange(const TraceStore& store,
                                      int64_t t0 = std::numeric_limits<int64_t>::min(),
                                      int64_t t1 = std::numeric_limits<int64_t>::max());

// ---- collectives matched across ranks -------------------------------------------

// One rank's part in a collective.
struct CollectiveRank {
  int32_t rank = 0;
  int64_t groupRank = -1;  // its group_rank argument; -1 when absent
  std::string_view op;     // the span's name on this rank (in the store's pool)
  int64_t beginNs = 0;
  int64_t endNs = 0;
  int64_t durationNs = 0;
  int64_t bytes = -1;    // -1 when absent
  double busbwGBps = 0;  // 0 without bytes, duration, or when failed
  bool failed = false;   // "error" argument
  SpanRef span;
};

// One collective: the spans of category "collective" that carry the same group
// and seq on different ranks.
struct CollectiveRow {
  std::string group;  // the group argument, else the "comm:<group>" track's suffix
  int64_t seq = 0;
  std::string op;                     // the op most ranks recorded (ties: the lowest rank's)
  bool mismatch = false;              // ranks recorded different ops for this (group, seq)
  std::string opsSeen;                // with mismatch: "allreduce (ranks 0, 2); broadcast (rank 1)"
  int64_t bytes = -1;                 // the largest bytes argument of any rank; -1 when none
  int64_t groupSize = 0;              // the largest group_size argument; 0 when unknown
  std::vector<CollectiveRank> ranks;  // the ranks that recorded it, by rank
  // Global ranks of the group that did not record it, where known: group ranks
  // are mapped to global ranks with what every collective of the group showed.
  std::vector<int32_t> missingRanks;
  // groupSize - ranks.size() (>= missingRanks.size(): a group rank never seen in
  // any span of the group cannot be named). 0 when groupSize is unknown.
  int64_t missingCount = 0;
  int64_t arrivalSkewNs = 0;     // latest begin - earliest begin
  int32_t lastArrivalRank = -1;  // the single latest begin; -1: tied or fewer than 2 ranks
  int32_t slowestRank = -1;      // the longest span (ties: the lowest rank)
  // Median (nearest rank) of the per-rank bus bandwidths of the ranks that did not
  // fail, as the summary computes its medians; not from the longest span (the
  // first arrival's span includes waiting for the others). 0 when none.
  double busbwGBps = 0;
  bool failed = false;       // some rank's span has an "error" argument
  int64_t firstBeginNs = 0;  // the earliest begin: where the timeline jumps to
  int64_t lastEndNs = 0;
};

// Every collective span with a group and a seq >= 0 (point-to-point ops
// excluded), matched by (group, seq); rows by first begin, then group, seq. A
// rank that recorded the same (group, seq) twice counts once, with its earlier
// span. CollectiveRank::op views the store's string pool (valid while the store
// lives; the pool never drops strings).
std::vector<CollectiveRow> matchCollectives(const TraceStore& store);

// A rank whose last collective in a group is behind the others': it never
// arrived at the next one (a hang, or its trace ends early: dropped events, a
// cut-off file, or a live stream that is simply behind).
struct HangSuspect {
  int32_t rank = 0;
  std::string group;
  int64_t lastSeq = -1;               // its last collective in the group
  int64_t missingSeq = -1;            // the first collective after that which others recorded
  std::string op;                     // of the missing collective
  int64_t othersBeganNs = 0;          // when the first other rank began it (the timeline jump)
  int64_t row = -1;                   // index of the missing collective in the rows
  std::vector<int32_t> arrivedRanks;  // ranks that did record it
  std::string description;  // "rank 2 never arrived at allreduce seq 7 of group world ..."
};

struct CollectiveOverview {
  uint64_t total = 0;       // rows
  uint64_t mismatched = 0;  // rows with mismatch
  uint64_t incomplete = 0;  // rows with missingCount > 0
  uint64_t failed = 0;      // rows with a failed rank
  int64_t maxSkewNs = 0;
  int64_t maxSkewRow = -1;
  std::vector<HangSuspect> hangSuspects;  // by group, then rank
};

// Counts and hang suspects of matchCollectives()' rows. A rank's last seq in a
// group is the highest seq it recorded; ranks below the group's highest are
// suspects, missing the group's first row after their last seq that they are
// absent from.
CollectiveOverview overviewOf(const std::vector<CollectiveRow>& rows);

// ---- DDP ----------------------------------------------------------------------

// One bucket's gradient reduction in one iteration (a "bucket" span on
// "ddp:bucket<N>"); times are aligned ns, 0 where the engine did not record one.
struct DdpBucketSample {
  int64_t bucket = 0;
  int64_t bytes = 0;
  int64_t params = 0;
  int64_t seq = -1;  // the allreduce's seq in its group
  int64_t beginNs = 0;
  int64_t endNs = 0;
  int64_t firstGradNs = 0;
  int64_t readyNs = 0;
  int64_t launchNs = 0;
  int64_t wireStartNs = 0;
  int64_t wireEndNs = 0;
  int64_t copyBackNs = 0;
  // ready_ns - the iteration's backward begin (when in backward the bucket filled);
  // 0 when either is missing.
  int64_t readyOffsetNs = 0;
  int64_t launchDelayNs = 0;  // launch - ready: waiting for earlier buckets (in-order launch)
  int64_t wireNs = 0;         // wire end - wire start
  int64_t exposedNs = 0;      // the exposed_ns argument: comm after backward's compute
  double hiddenShare = 0;     // analysis::CommOverlap of this sample alone
  SpanRef span;
};

// One rank's iteration: a "backward" span on "ddp" and what shares its step.
struct DdpIteration {
  int32_t rank = 0;
  int64_t step = 0;
  int64_t forwardBeginNs = 0;  // 0 when no forward span has this step
  int64_t forwardNs = 0;
  int64_t backwardBeginNs = 0;
  int64_t backwardEndNs = 0;
  int64_t backwardNs = 0;
  // The optimizer (and the rest until the next forward) after this backward: the
  // engine records it with this step.
  int64_t optimizerNs = 0;
  int64_t exposedNs = 0;                 // the most exposed bucket
  int64_t wireNs = 0;                    // all buckets' wire time
  std::vector<DdpBucketSample> buckets;  // by bucket index
};

// One bucket over every rank and iteration.
struct DdpBucketAverage {
  int64_t bucket = 0;
  uint64_t samples = 0;
  int64_t bytes = 0;  // of the last sample (buckets may be rebuilt once)
  int64_t params = 0;
  int64_t readyOffsetMeanNs = 0;
  int64_t launchDelayMeanNs = 0;
  int64_t wireMeanNs = 0;
  int64_t wireP50Ns = 0;
  int64_t exposedMeanNs = 0;
  double hiddenShare = 0;  // analysis::CommOverlap over the samples
};

struct DdpAnalysis {
  std::vector<DdpIteration> iterations;   // by rank, then step; see DdpBuilder
  uint64_t iterationCount = 0;            // iterations.size(), or counted without them
  std::vector<DdpBucketAverage> buckets;  // by bucket index, over every bucket span
  int64_t forwardMeanNs = 0;              // over the iterations
  int64_t backwardMeanNs = 0;
  int64_t optimizerMeanNs = 0;  // over iterations that have one
  int64_t exposedMeanNs = 0;
  double hiddenShare = 0;  // analysis::CommOverlap over every bucket sample
  uint64_t rebuilds = 0;   // "bucket_rebuild" spans
};

// The DDP engine's events (ddp/timing.cc): forward/backward/optimizer/bucket_rebuild
// on "ddp", one "bucket" span per bucket and iteration on "ddp:bucket<N>", all
// with a step argument. Iterations are the backward spans; bucket spans of a step
// without one count in the bucket averages only. Without them, torch DDP as its profiler
// traces hold it (profiler_ddp.h); where such traces hold DDP but it cannot be recovered,
// `notRecovered` (if given) gets why.
DdpAnalysis analyzeDdp(const TraceStore& store, std::string* notRecovered = nullptr);

// An engine's forward, backward and optimizer time summed over iterations, each
// with its count (a step may lack a forward or an optimizer span), for the means.
struct PhaseTotals {
  int64_t forward = 0, backward = 0, optimizer = 0;
  uint64_t forwards = 0, backwards = 0, optimizers = 0;
  void merge(const PhaseTotals& o) {
    forward += o.forward;
    backward += o.backward;
    optimizer += o.optimizer;
    forwards += o.forwards;
    backwards += o.backwards;
    optimizers += o.optimizers;
  }
};

// analyzeDdp rank by rank: addRank() for each rank (of any store: the summary
// ingests one rank file at a time into a store of its own), merge() of
// builders that took disjoint ranks (threads), then finish(). Without
// keepIterations only their count and sums are kept, so that memory does not
// grow with the steps of a 1,000-rank job.
class DdpBuilder {
 public:
  explicit DdpBuilder(bool keepIterations = true) : keepIterations_(keepIterations) {}
  void addRank(const TraceStore& store, const RankData& rank);
  // A rank of torch DDP recovered from profiler traces (profiler_ddp.h), read as its ringx
  // trace would be.
  void addRecordedRank(const replay::DdpRecording& recording, size_t rankIndex);
  void merge(DdpBuilder&& other);
  DdpAnalysis finish();

 private:
  // One rank's iterations (phases set) and bucket samples (by step), whichever source.
  void addIterations(int32_t rank, std::vector<DdpIteration> iterations, const PhaseTotals& totals,
                     std::vector<std::pair<int64_t, DdpBucketSample>>& samples);
  struct Bucket {
    DdpBucketAverage avg;
    int32_t lastRank = -1;  // whose last sample avg.bytes and avg.params are
    int64_t readyOffset = 0, launchDelay = 0, exposed = 0;
    uint64_t withOffset = 0;
    CommOverlap overlap;
    Distribution wires;  // for the p50
  };
  bool keepIterations_;
  std::vector<DdpIteration> iterations_;
  uint64_t iterationCount_ = 0;
  std::map<int64_t, Bucket> buckets_;
  CommOverlap overlap_;  // every bucket of every iteration
  PhaseTotals phases_;
  int64_t exposed_ = 0;
  uint64_t rebuilds_ = 0;
};

// ---- FSDP ---------------------------------------------------------------------

// One unit (module path) over every rank and iteration. Wire times are
// wire_end_ns - wire_start_ns; compute means are span durations.
struct FsdpUnitAnalysis {
  std::string unit;          // the track's suffix: "layers.0", "(root)"
  int64_t firstBeginNs = 0;  // units are ordered by it: execution order
  uint64_t gathers = 0;      // all_gather spans
  uint64_t forwardGathers = 0;
  uint64_t backwardGathers = 0;
  uint64_t prefetched = 0;     // gathers with prefetched = 1
  double prefetchedShare = 0;  // analysis::prefetchedShare
  int64_t gatherBytes = 0;     // the largest gather (the unsharded parameters)
  int64_t gatherBytesTotal = 0;
  int64_t gatherMeanNs = 0;  // issue to ready (the span)
  int64_t gatherWireMeanNs = 0;
  int64_t exposedTotalNs = 0;  // compute waiting for this unit's gathers
  int64_t exposedMeanNs = 0;   // per gather
  uint64_t forwards = 0;
  int64_t forwardMeanNs = 0;
  uint64_t backwards = 0;
  int64_t backwardMeanNs = 0;
  uint64_t reshards = 0;
  uint64_t reduceScatters = 0;
  int64_t reduceScatterBytes = 0;   // the largest
  int64_t reduceScatterMeanNs = 0;  // wire
  uint64_t allreduces = 0;          // NO_SHARD's reduction, HYBRID_SHARD's replica allreduce
  int64_t allreduceMeanNs = 0;      // wire
};

// One rank's iteration: a "backward" span on "fsdp" and the unit events of its step.
struct FsdpIteration {
  int32_t rank = 0;
  int64_t step = 0;
  int64_t forwardBeginNs = 0;
  int64_t forwardNs = 0;
  int64_t backwardBeginNs = 0;
  int64_t backwardNs = 0;
  int64_t optimizerNs = 0;
  uint64_t gathers = 0;
  uint64_t prefetched = 0;
  int64_t gatherBytes = 0;
  int64_t gatherWireNs = 0;
  int64_t exposedNs = 0;    // compute waiting for gathers, summed
  uint64_t reductions = 0;  // reduce_scatter and allreduce spans
  int64_t reduceBytes = 0;
  int64_t reduceWireNs = 0;
};

struct FsdpAnalysis {
  std::vector<FsdpUnitAnalysis> units;    // by first begin
  std::vector<FsdpIteration> iterations;  // by rank, then step; see FsdpBuilder
  uint64_t iterationCount = 0;            // iterations.size(), or counted without them
  int64_t forwardMeanNs = 0;
  int64_t backwardMeanNs = 0;
  int64_t optimizerMeanNs = 0;
  int64_t exposedMeanNs = 0;  // per iteration
};

// The FSDP engine's events (fsdp/timing.cc): forward/backward/optimizer on
// "fsdp"; all_gather, forward, backward, reshard, reduce_scatter and allreduce on
// "fsdp:<unit>", all with a step argument. Iterations are the backward spans. Without them,
// FSDP2 as its profiler traces hold it (profiler_fsdp.h), `notRecovered` as analyzeDdp's.
FsdpAnalysis analyzeFsdp(const TraceStore& store, std::string* notRecovered = nullptr);

// analyzeFsdp rank by rank, as DdpBuilder (units are matched by name across stores).
class FsdpBuilder {
 public:
  explicit FsdpBuilder(bool keepIterations = true) : keepIterations_(keepIterations) {}
  void addRank(const TraceStore& store, const RankData& rank);
  // A rank of FSDP2 recovered from profiler traces (profiler_fsdp.h), read as its ringx trace
  // would be.
  void addRecordedRank(const replay::FsdpRecording& recording, size_t rankIndex);
  void merge(FsdpBuilder&& other);
  FsdpAnalysis finish();

 private:
  struct Unit {
    FsdpUnitAnalysis u;
    int64_t gather = 0, gatherWire = 0, forward = 0, backward = 0, reduceScatter = 0, allreduce = 0;
  };
  // One event of a unit, whichever source it came from.
  Unit& unitNamed(const std::string& name, int64_t beginNs);
  void addGather(Unit& ut, FsdpIteration& it, bool backward, bool prefetched, int64_t bytes,
                 int64_t waitedNs, int64_t spanNs, int64_t wireNs);
  void addReduction(Unit& ut, FsdpIteration& it, bool allreduce, int64_t bytes, int64_t wireNs);
  // A finished iteration (its phases set): counted, and kept if asked.
  void addIteration(const FsdpIteration& it, bool hasForward, bool hasOptimizer);
  bool keepIterations_;
  std::vector<FsdpIteration> iterations_;
  uint64_t iterationCount_ = 0;
  std::map<std::string, Unit> units_;  // by unit name
  PhaseTotals phases_;
  int64_t exposed_ = 0;
};

// ---- memory -------------------------------------------------------------------

struct MemoryPeak {
  int32_t rank = 0;
  std::string counter;  // "rss_bytes", "fsdp.unsharded_bytes", ...
  double peakValue = 0;
  int64_t peakTimeNs = 0;  // the first time the peak was reached
  uint64_t samples = 0;
};

// Every rank's counters' peaks, by rank, then counter name.
std::vector<MemoryPeak> memoryPeaks(const TraceStore& store);

// What held memory on `rank` at time t, for the peak's tooltip: DDP buckets whose
// span covers t ("bucket 2 (on the wire)": filling, waiting to launch, on the
// wire, copy back), then FSDP units with a span covering t ("layers.3 (forward)",
// "layers.3 (all_gather, backward)") or whose parameters were gathered and not
// yet resharded ("layers.2 (gathered)"). Empty for an unknown rank.
std::vector<std::string> aliveAt(const TraceStore& store, int32_t rank, int64_t t);

}  // namespace ringx::analysis
