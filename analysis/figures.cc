// The figures' definitions (see figures.h for what each means and why).
#include "analysis/figures.h"

#include <algorithm>
#include <cinttypes>
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

double busBandwidthGBps(std::string_view op, int64_t bytes, int64_t durationNs, int64_t groupSize) {
  if (bytes <= 0 || durationNs <= 0) return 0;
  return static_cast<double>(bytes) / static_cast<double>(durationNs) *
         busBandwidthFactor(op, groupSize);
}

bool isPointToPoint(std::string_view op) {
  return startsWith(op, "send") || startsWith(op, "recv") || startsWith(op, "isend") ||
         startsWith(op, "irecv");
}

int64_t percentile(const std::vector<int64_t>& sorted, int p) {
  if (sorted.empty()) return 0;
  // Nearest rank: the ceil(p/100 * n)-th smallest, in integers to avoid rounding.
  size_t rank = (static_cast<size_t>(p) * sorted.size() + 99) / 100;
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

double median(std::vector<double>& values) {
  if (values.empty()) return 0;
  const size_t k = (values.size() + 1) / 2 - 1;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(k), values.end());
  return values[k];
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

ArrivalSkew arrivalSkew(const std::vector<Arrival>& arrivals) {
  ArrivalSkew s;
  if (arrivals.empty()) return s;
  int64_t earliest = arrivals[0].beginNs, latest = arrivals[0].beginNs;
  int32_t lastRank = arrivals[0].rank;
  int lastCount = 1;
  for (size_t i = 1; i < arrivals.size(); ++i) {
    const Arrival& a = arrivals[i];
    earliest = std::min(earliest, a.beginNs);
    if (a.beginNs > latest) {
      latest = a.beginNs;
      lastRank = a.rank;
      lastCount = 1;
    } else if (a.beginNs == latest) {
      ++lastCount;
    }
  }
  s.skewNs = latest - earliest;
  s.lastRank = arrivals.size() >= 2 && lastCount == 1 ? lastRank : -1;
  return s;
}

std::string formatDuration(int64_t ns) {
  if (ns < 0) return "-" + formatDuration(-ns);
  // Each unit up to where its rounding would print 1000 of it.
  char buffer[48];
  if (ns < 1000) {
    std::snprintf(buffer, sizeof(buffer), "%" PRId64 " ns", ns);
  } else if (ns < 999950) {
    std::snprintf(buffer, sizeof(buffer), "%.1f us", static_cast<double>(ns) / 1e3);
  } else if (ns < 999995000) {
    std::snprintf(buffer, sizeof(buffer), "%.2f ms", static_cast<double>(ns) / 1e6);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%.2f s", static_cast<double>(ns) / 1e9);
  }
  return buffer;
}

std::string formatSignedDuration(int64_t ns) {
  return ns < 0 ? formatDuration(ns) : "+" + formatDuration(ns);
}

std::string formatBytes(int64_t bytes) {
  char buffer[48];
  const double b = static_cast<double>(bytes);
  if (bytes < 1024) {
    std::snprintf(buffer, sizeof(buffer), "%" PRId64 " B", bytes);
  } else if (bytes < (1ll << 20)) {
    std::snprintf(buffer, sizeof(buffer), "%.1f KiB", b / 1024);
  } else if (bytes < (1ll << 30)) {
    std::snprintf(buffer, sizeof(buffer), "%.2f MiB", b / (1 << 20));
  } else {
    std::snprintf(buffer, sizeof(buffer), "%.2f GiB", b / (1 << 30));
  }
  return buffer;
}

std::string rankList(const std::vector<int32_t>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

}  // namespace ringx::analysis
