// The figures' definitions (see figures.h for what each means and why).
#include "analysis/figures.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>

namespace ringx::analysis {
namespace {

bool startsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// "1 KiB", "256 B", "16 EiB" for 2^bits bytes (bits <= 64).
std::string powerOfTwoBytes(int bits) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  const int unit = std::min(bits / 10, 6);
  return std::to_string(uint64_t{1} << (bits - 10 * unit)) + " " + kUnits[unit];
}

}  // namespace

int sizeClass(int64_t bytes) {
  if (bytes < 0) return kUnknownSizeClass;
  if (bytes == 0) return kZeroBytesClass;
  const int log2 = 63 - __builtin_clzll(static_cast<uint64_t>(bytes));
  return log2 / 2;
}

std::string sizeClassLabel(int sizeClass) {
  if (sizeClass == kZeroBytesClass) return "0 B";
  if (sizeClass < 0 || sizeClass > 31) return "unknown size";
  return powerOfTwoBytes(2 * sizeClass) + "-" + powerOfTwoBytes(2 * sizeClass + 2);
}

GpuWork gpuWorkOf(std::string_view category, std::string_view name) {
  if (category == "collective") return GpuWork::kCommunication;
  if (category != "kernel" && category != "gpu_memcpy" && category != "gpu_memset") {
    return GpuWork::kNotKernel;
  }
  const size_t nccl = name.find("nccl");
  if (nccl == 0 && name.find("Kernel", nccl) != std::string_view::npos) {
    return GpuWork::kCommunication;
  }
  if (startsWith(name, "Memcpy") || startsWith(name, "Memset") || startsWith(name, "dma")) {
    return GpuWork::kMemory;
  }
  if (name.find("Memcpy") != std::string_view::npos ||
      name.find("Memset") != std::string_view::npos ||
      name.find("Sync") != std::string_view::npos) {
    return GpuWork::kOther;
  }
  return GpuWork::kCompute;
}

double busBandwidthFactor(std::string_view op, int64_t groupSize) {
  if (groupSize < 1) return 1;
  const double n = static_cast<double>(groupSize);
  if (startsWith(op, "allreduce") || startsWith(op, "all_reduce")) return 2 * (n - 1) / n;
  if (startsWith(op, "all_gather") || startsWith(op, "allgather") ||
      startsWith(op, "reduce_scatter")) {
    return (n - 1) / n;
  }
  return 1;
}

int64_t ringSteps(std::string_view op, int64_t groupSize) {
  if (groupSize < 2) return 0;
  const bool twoPhases = startsWith(op, "allreduce") || startsWith(op, "all_reduce");
  return (twoPhases ? 2 : 1) * (groupSize - 1);
}

double busBandwidthGBps(std::string_view op, int64_t bytes, int64_t durationNs, int64_t groupSize) {
  if (bytes <= 0 || durationNs <= 0) return 0;
  return busBandwidthWithFactor(busBandwidthFactor(op, groupSize), bytes, durationNs);
}

double busBandwidthWithFactor(double factor, int64_t bytes, int64_t durationNs) {
  if (bytes <= 0 || durationNs <= 0) return 0;
  return static_cast<double>(bytes) / static_cast<double>(durationNs) * factor;
}

namespace {
// Nearest rank: the ceil(p/100 * n)-th smallest, in integers to avoid rounding (n > 0); its index.
size_t nearestRankIndex(size_t n, int p) {
  const size_t rank = (static_cast<size_t>(p) * n + 99) / 100;
  return std::clamp<size_t>(rank, 1, n) - 1;
}
}  // namespace

int64_t percentile(const std::vector<int64_t>& sorted, int p) {
  if (sorted.empty()) return 0;
  return sorted[nearestRankIndex(sorted.size(), p)];
}

std::pair<int64_t, int64_t> p50p99(std::vector<int64_t>& values) {
  if (values.empty()) return {0, 0};
  const auto at = [&](size_t i) { return values.begin() + static_cast<std::ptrdiff_t>(i); };
  const size_t i99 = nearestRankIndex(values.size(), 99);
  const size_t i50 = nearestRankIndex(values.size(), 50);
  std::nth_element(values.begin(), at(i99), values.end());
  // Everything before i99 is at most values[i99]: p50 is among them.
  std::nth_element(values.begin(), at(i50), at(i99));
  return {values[i50], values[i99]};
}

double median(std::vector<double>& values) {
  if (values.empty()) return 0;
  const size_t k = (values.size() + 1) / 2 - 1;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(k), values.end());
  return values[k];
}

// ---- Distribution ---------------------------------------------------------------

namespace {
// log(g) for the buckets' ratio g = 1 + 1/256: a midpoint is within 1/512 of any sample in its
// bucket.
const double kLogBucketRatio = std::log1p(1.0 / 256);
int32_t bucketOf(double value) {
  return static_cast<int32_t>(std::floor(std::log(value) / kLogBucketRatio));
}
}  // namespace

void Distribution::add(double value) {
  if (count_ == 0) {
    min_ = max_ = value;
  } else {
    min_ = std::min(min_, value);
    max_ = std::max(max_, value);
  }
  ++count_;
  if (histogram_) {
    addToHistogram(value, 1);
    return;
  }
  exact_.push_back(value);
  if (exact_.size() > kExactSamples) toHistogram();
}

void Distribution::addToHistogram(double value, uint64_t n) {
  if (!(value > 0)) {
    nonPositive_ += n;
    return;
  }
  const int32_t b = bucketOf(value);
  if (buckets_.empty()) bucketBase_ = b;
  if (b < bucketBase_) {
    buckets_.insert(buckets_.begin(), static_cast<size_t>(bucketBase_ - b), 0);
    bucketBase_ = b;
  }
  const size_t i = static_cast<size_t>(b - bucketBase_);
  if (i >= buckets_.size()) buckets_.resize(i + 1, 0);
  buckets_[i] += n;
}

void Distribution::toHistogram() {
  histogram_ = true;
  for (double v : exact_) addToHistogram(v, 1);
  exact_.clear();
  exact_.shrink_to_fit();
}

void Distribution::merge(const Distribution& other) {
  if (other.count_ == 0) return;
  if (count_ == 0) {
    min_ = other.min_;
    max_ = other.max_;
  } else {
    min_ = std::min(min_, other.min_);
    max_ = std::max(max_, other.max_);
  }
  count_ += other.count_;
  if (!histogram_ && !other.histogram_ && exact_.size() + other.exact_.size() <= kExactSamples) {
    exact_.insert(exact_.end(), other.exact_.begin(), other.exact_.end());
    return;
  }
  if (!histogram_) toHistogram();
  for (double v : other.exact_) addToHistogram(v, 1);
  nonPositive_ += other.nonPositive_;
  for (size_t i = 0; i < other.buckets_.size(); ++i)
    if (other.buckets_[i])
      addToHistogram(
          std::exp((other.bucketBase_ + static_cast<int32_t>(i) + 0.5) * kLogBucketRatio),
          other.buckets_[i]);
}

double Distribution::percentile(int p) const {
  if (count_ == 0) return 0;
  // Nearest rank, as percentile() above: the ceil(p/100 * n)-th smallest.
  uint64_t rank = (static_cast<uint64_t>(p) * count_ + 99) / 100;
  rank = std::clamp<uint64_t>(rank, 1, count_);
  if (!histogram_) {
    std::vector<double> sorted = exact_;
    const auto k = sorted.begin() + static_cast<std::ptrdiff_t>(rank - 1);
    std::nth_element(sorted.begin(), k, sorted.end());
    return *k;
  }
  if (rank <= nonPositive_) return std::min(min_, 0.0);
  uint64_t seen = nonPositive_;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    seen += buckets_[i];
    if (seen >= rank) {
      // The bucket's geometric midpoint: within half a bucket of any sample in it.
      const double mid = std::exp((bucketBase_ + static_cast<int32_t>(i) + 0.5) * kLogBucketRatio);
      return std::clamp(mid, min_, max_);
    }
  }
  return max_;
}

// ---- overlap ----------------------------------------------------------------------

void CommOverlap::add(const CommOverlap& other) {
  wireNs_ += other.wireNs_;
  exposedNs_ += other.exposedNs_;
}

void CommOverlap::add(int64_t wireNs, int64_t exposedNs) {
  wireNs = std::max<int64_t>(0, wireNs);
  wireNs_ += wireNs;
  exposedNs_ += std::clamp<int64_t>(exposedNs, 0, wireNs);
}

double CommOverlap::hiddenShare() const {
  return wireNs_ > 0 ? 1.0 - static_cast<double>(exposedNs_) / static_cast<double>(wireNs_) : 0;
}

double prefetchedShare(uint64_t prefetched, uint64_t gathers) {
  return gathers ? static_cast<double>(prefetched) / static_cast<double>(gathers) : 0;
}

void ArrivalTracker::add(const Arrival& a) {
  if (count_ == 0 || a.beginNs < earliest_) earliest_ = a.beginNs;
  if (count_ == 0 || a.beginNs > latest_) {
    latest_ = a.beginNs;
    lastRank_ = a.rank;
    lastCount_ = 1;
  } else if (a.beginNs == latest_) {
    ++lastCount_;
  }
  ++count_;
}

void ArrivalTracker::merge(const ArrivalTracker& o) {
  if (o.count_ == 0) return;
  if (count_ == 0) {
    *this = o;
    return;
  }
  earliest_ = std::min(earliest_, o.earliest_);
  if (o.latest_ > latest_) {
    latest_ = o.latest_;
    lastRank_ = o.lastRank_;
    lastCount_ = o.lastCount_;
  } else if (o.latest_ == latest_) {
    lastCount_ += o.lastCount_;
  }
  count_ += o.count_;
}

ArrivalSkew ArrivalTracker::skew() const {
  ArrivalSkew s;
  if (count_ == 0) return s;
  s.skewNs = latest_ - earliest_;
  s.lastRank = count_ >= 2 && lastCount_ == 1 ? lastRank_ : -1;
  return s;
}

ArrivalSkew arrivalSkew(const std::vector<Arrival>& arrivals) {
  ArrivalTracker t;
  for (const Arrival& a : arrivals) t.add(a);
  return t.skew();
}

}  // namespace ringx::analysis
