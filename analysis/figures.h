// The figures ringx reports, each defined once. `ringx-trace summary`, the
// viewer's panels, the DDP engine's last_iteration() and the benchmarks (through
// ringx.analysis) all compute them here, so a figure means the same thing
// wherever it is printed. docs/tracing.md ("Figures, one definition each") quotes these
// definitions; change both together.
//
//  - Bus bandwidth (busbw), as nccl-tests defines it so that numbers compare
//    with its tables: bytes / time x factor, factor 2(n-1)/n for allreduce,
//    (n-1)/n for all_gather and reduce_scatter, 1 for the rest (n = ranks in
//    the group). Bytes per ns is GB/s.
//  - Percentiles are nearest-rank: p50 is the smallest sample with at least
//    half of the samples at or below it. Medians of bandwidths likewise.
//    Over more than Distribution::kExactSamples samples (a 1,000-rank trace's
//    spans) they come from a histogram of log-spaced buckets instead, within
//    Distribution::kRelativeError of the exact value, so that memory does not
//    grow with the trace.
//  - Exposed communication: how long a step's compute waited for
//    communication. DDP: a bucket's exposed time is how long after backward's
//    compute ended its reduction finished (the engine's exposed_ns); an
//    iteration's is its most exposed bucket's. FSDP: how long compute waited
//    for a unit's all_gather (ready - wait begin), summed per iteration.
//  - Hidden communication share: the share of wire time that overlapped
//    compute, 1 - sum(min(exposed, wire)) / sum(wire) over the buckets counted
//    (a bucket cannot expose more than its own wire time).
//  - Prefetched share: gathers issued ahead of need / all gathers.
//  - Arrival skew of one collective: the latest minus the earliest begin of the
//    ranks that recorded it, on the aligned clock; the "last arrival" is the
//    single rank with the latest begin (none when tied).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/format.h"  // how the figures print

namespace ringx::analysis {

// ---- sizes ----------------------------------------------------------------------

// Size classes: class k >= 0 holds [4^k, 4^(k+1)) bytes. Zero-byte collectives
// (barrier) and those without a bytes argument have classes of their own.
inline constexpr int kZeroBytesClass = -1;
inline constexpr int kUnknownSizeClass = -2;
int sizeClass(int64_t bytes);  // bytes < 0: unknown
// "64 KiB-256 KiB", "0 B", "unknown size".
std::string sizeClassLabel(int sizeClass);

// ---- GPU kernels ------------------------------------------------------------------

// What a span on a GPU's stream (a profiler trace's kernel, copy or set) is, as Holistic Trace
// Analysis (HTA) classes it: communication (NCCL/RCCL kernels: "nccl...Kernel" names, or
// the collectives they became at ingest), memory (Memcpy, Memset, dma), compute (any other
// kernel but those with "Sync" in their name), other (those); kNotKernel for what has no stream
// (annotations).
enum class GpuWork { kCompute, kCommunication, kMemory, kOther, kNotKernel };
GpuWork gpuWorkOf(std::string_view category, std::string_view name);

// ---- bandwidth ------------------------------------------------------------------

// The bus bandwidth factor of `op` in a group of `groupSize` ranks.
double busBandwidthFactor(std::string_view op, int64_t groupSize);
// The steps of `op` on a ring of `groupSize` ranks, which the same op classes set: allreduce
// 2(n-1) (reduce-scatter, then all-gather), all_gather and reduce_scatter n-1, the rest n-1 (a
// pipeline's hops). 0 for one rank. The replay's cost model (analysis/replay/cost_model.h) uses
// it with the factor above as the bytes each rank sends.
int64_t ringSteps(std::string_view op, int64_t groupSize);
// GB/s; 0 when bytes or duration is not positive.
double busBandwidthGBps(std::string_view op, int64_t bytes, int64_t durationNs, int64_t groupSize);
// The same with the factor found (a loop over many spans of one op finds it once).
double busBandwidthWithFactor(double factor, int64_t bytes, int64_t durationNs);

// ---- distributions --------------------------------------------------------------

// p in (0, 100]: the nearest-rank percentile of `sorted` (ascending); 0 when empty.
int64_t percentile(const std::vector<int64_t>& sorted, int p);
// Nearest-rank p50 and p99 of unsorted `values` (reordered; linear time, not a sort's n log n:
// ten million durations sort in about a second); 0, 0 when empty.
std::pair<int64_t, int64_t> p50p99(std::vector<int64_t>& values);
// The nearest-rank median, reordering `values`; 0 when empty.
double median(std::vector<double>& values);

// The samples of one figure's distribution (durations, bandwidths), for
// percentiles in bounded memory: every sample is kept, and percentile() is the
// exact nearest-rank one, up to kExactSamples; past that the samples move into
// a histogram of buckets [g^i, g^(i+1)), g = 1 + 1/256, whose percentile is
// the bucket's midpoint clamped to the smallest and largest sample (relative
// error below kRelativeError). Values at or below 0 share one bucket, reported
// as the smallest such sample. Merging is order-independent, so ranks reduced
// on several threads give the same figures.
class Distribution {
 public:
  static constexpr size_t kExactSamples = 1 << 16;
  static constexpr double kRelativeError = 1.0 / 512;

  void add(double value);
  void merge(const Distribution& other);
  uint64_t count() const { return count_; }
  double max() const { return max_; }  // 0 when empty
  // p in (0, 100]; 0 when empty. percentile(50) is median() of the same samples.
  double percentile(int p) const;

 private:
  void toHistogram();
  void addToHistogram(double value, uint64_t n);

  uint64_t count_ = 0;
  double min_ = 0, max_ = 0;
  std::vector<double> exact_;  // while count_ <= kExactSamples
  bool histogram_ = false;
  std::vector<uint64_t> buckets_;  // from bucketBase_ up
  int32_t bucketBase_ = 0;
  uint64_t nonPositive_ = 0;  // values <= 0, in histogram mode
};
// total / n, 0 when n is 0.
inline int64_t meanOf(int64_t total, uint64_t n) { return n ? total / static_cast<int64_t>(n) : 0; }

// ---- overlap of communication and compute ---------------------------------------

// Hidden and exposed communication over any set of transfers (one bucket over
// its iterations, one iteration's buckets, a whole run).
class CommOverlap {
 public:
  // One transfer: its wire time and how long compute waited for it (negative
  // values count as 0; exposure is capped at the wire time).
  void add(int64_t wireNs, int64_t exposedNs);
  // Another set's transfers (already capped).
  void add(const CommOverlap& other);
  int64_t wireNs() const { return wireNs_; }
  int64_t exposedNs() const { return exposedNs_; }  // capped, summed
  // 1 - exposed / wire; 0 when there was no wire time.
  double hiddenShare() const;

 private:
  int64_t wireNs_ = 0;
  int64_t exposedNs_ = 0;
};

// Gathers issued ahead of need / all gathers; 0 when there were none.
double prefetchedShare(uint64_t prefetched, uint64_t gathers);

// ---- collectives across ranks ---------------------------------------------------

struct Arrival {
  int32_t rank = 0;
  int64_t beginNs = 0;  // aligned
};

struct ArrivalSkew {
  int64_t skewNs = 0;     // latest - earliest begin
  int32_t lastRank = -1;  // the single latest arrival; -1 when tied or fewer than 2 ranks
};

// Arrivals one at a time, or merged from disjoint sets of ranks (each rank's
// part of a collective reduced on its own): the earliest begin, the latest, and
// whether a single rank holds it.
class ArrivalTracker {
 public:
  void add(const Arrival& arrival);
  void merge(const ArrivalTracker& other);
  uint32_t count() const { return count_; }
  int64_t earliestNs() const { return earliest_; }
  ArrivalSkew skew() const;

 private:
  int64_t earliest_ = 0, latest_ = 0;
  int32_t lastRank_ = -1;
  uint32_t lastCount_ = 0;  // ranks at `latest_`
  uint32_t count_ = 0;
};

ArrivalSkew arrivalSkew(const std::vector<Arrival>& arrivals);

}  // namespace ringx::analysis
