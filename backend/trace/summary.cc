// Summary statistics over a job's trace (see summary.h for what and why).
//
// One pass over every rank's events collects collective durations per (op, size
// class), each rank's collective intervals, and each collective's aligned begin
// per rank keyed by group and sequence number; the statistics follow from those.
#include "backend/trace/summary.h"

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <limits>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "backend/common/text.h"
#include "backend/trace/alignment.h"

namespace ringx::trace {
namespace {

// "1 KiB", "256 B", "16 EiB" for 2^bits bytes (bits <= 64).
std::string powerOfTwoBytes(int bits) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  const int unit = std::min(bits / 10, 6);
  return strCat(uint64_t{1} << (bits - 10 * unit), " ", kUnits[unit]);
}

void appendf(std::string& out, const char* format, ...) __attribute__((format(printf, 2, 3)));
void appendf(std::string& out, const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  if (n > 0) {
    const size_t at = out.size();
    out.resize(at + static_cast<size_t>(n) + 1);
    std::vsnprintf(&out[at], static_cast<size_t>(n) + 1, format, again);
    out.resize(at + static_cast<size_t>(n));
  }
  va_end(again);
}

std::string signedDuration(int64_t ns) {
  return ns < 0 ? formatDuration(ns) : "+" + formatDuration(ns);
}

// Time covered by the union of [begin, end) intervals (sorted in place).
int64_t unionLength(std::vector<std::pair<int64_t, int64_t>>& intervals) {
  std::sort(intervals.begin(), intervals.end());
  int64_t total = 0;
  int64_t openBegin = 0, openEnd = 0;
  bool open = false;
  for (const auto& [begin, end] : intervals) {
    if (open && begin <= openEnd) {
      openEnd = std::max(openEnd, end);
      continue;
    }
    if (open) total += openEnd - openBegin;
    openBegin = begin;
    openEnd = end;
    open = true;
  }
  if (open) total += openEnd - openBegin;
  return total;
}

// Durations and bandwidths of one (op, size class) while reading.
struct Accumulator {
  std::vector<int64_t> durations;
  std::vector<double> busbw;
  std::unordered_set<std::string> keys;  // group + '\n' + seq of matched calls
  uint64_t unkeyed = 0;                  // spans without a sequence number
  uint64_t failed = 0;
  uint64_t bytes = 0;
};

// One rank's begin of one collective.
struct Arrival {
  int32_t rank;
  int64_t alignedBeginNs;
  int64_t groupSize;
  std::string_view op;  // points into the rank's string table
};

}  // namespace

int sizeClass(int64_t bytes) {
  if (bytes < 0) return kUnknownSizeClass;
  if (bytes == 0) return kZeroBytesClass;
  int log2 = 63 - __builtin_clzll(static_cast<uint64_t>(bytes));
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

// "512 B", "12.3 KiB", "4.50 MiB", "1.20 GiB".
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

Summary summarize(const TraceSet& trace) {
  Summary s;
  s.source = trace.path;
  s.worldSize = trace.worldSize();
  s.warnings = trace.warnings;

  std::map<std::pair<std::string, int>, Accumulator> accumulators;
  std::unordered_map<std::string, std::vector<Arrival>> arrivals;
  std::map<int32_t, int64_t> uncertaintyOfRank;
  int64_t jobBegin = std::numeric_limits<int64_t>::max();
  int64_t jobEnd = std::numeric_limits<int64_t>::min();
  const RankTrace* rank0 = trace.findRank(0);

  // ---- one pass over every rank's events
  for (const RankTrace& t : trace.ranks) {
    const ClockModel clock = ClockModel::forRank(t);
    RankStats rs;
    rs.rank = t.header.rank;
    rs.host = t.header.host;
    rs.events = t.events.size();
    rs.dropped = t.dropped;
    rs.truncated = t.truncated;
    rs.clockReference = clock.isReference();
    rs.clockAligned = clock.aligned();
    rs.clockUncertaintyNs = clock.maxUncertaintyNs();
    uncertaintyOfRank[rs.rank] = rs.clockUncertaintyNs;

    // String ids of the keys looked up per event, once per rank.
    const uint32_t bytesKey = t.findString(arg::kBytes);
    const uint32_t seqKey = t.findString(arg::kSeq);
    const uint32_t groupKey = t.findString(arg::kGroup);
    const uint32_t groupSizeKey = t.findString(arg::kGroupSize);
    const uint32_t errorKey = t.findString(arg::kError);

    std::unordered_map<uint64_t, Accumulator*> accumulatorOf;  // std::map nodes do not move
    std::vector<std::pair<int64_t, int64_t>> commIntervals;
    int64_t first = std::numeric_limits<int64_t>::max();
    int64_t last = std::numeric_limits<int64_t>::min();
    for (const Event& e : t.events) {
      first = std::min(first, e.beginNs);
      last = std::max(last, e.endNs);
      if (e.category != Category::kCollective || e.kind != EventKind::kSpan) continue;

      int64_t bytes = -1, seq = -1, groupSize = s.worldSize;
      std::string_view group;
      bool failed = false;
      for (uint32_t i = 0; i < e.argCount; ++i) {
        const Arg& a = t.args[e.firstArg + i];
        if (a.key == 0) continue;
        if (a.key == errorKey) failed = true;
        if (a.type == ArgType::kInt) {
          if (a.key == bytesKey) bytes = a.intValue;
          if (a.key == seqKey) seq = a.intValue;
          if (a.key == groupSizeKey) groupSize = a.intValue;
        } else if (a.type == ArgType::kString && a.key == groupKey) {
          group = t.str(a.stringId);
        }
      }
      const std::string_view op = t.str(e.name);
      const std::string_view trackName = t.str(e.track);
      if (group.empty() && startsWith(trackName, track::kCommPrefix)) {
        group = trackName.substr(std::string_view(track::kCommPrefix).size());
      }
      const bool keyed = seq >= 0 && !isPointToPoint(op);

      // The op's accumulator through a per-rank cache keyed by string id and
      // class: a map lookup with a fresh string per event would dominate.
      const int cls = sizeClass(bytes);
      const uint64_t cacheKey = uint64_t{e.name} << 8 | static_cast<uint64_t>(cls + 2);
      Accumulator*& cached = accumulatorOf[cacheKey];
      if (cached == nullptr) cached = &accumulators[{std::string(op), cls}];
      Accumulator& acc = *cached;
      std::string key;
      if (keyed) {
        key.assign(group);
        key += '\n';
        key += std::to_string(seq);
        acc.keys.insert(key);
      } else {
        ++acc.unkeyed;
      }
      ++rs.collectives;
      commIntervals.emplace_back(e.beginNs, e.endNs);
      if (failed) {
        ++acc.failed;
        ++rs.failed;
      } else {
        const int64_t duration = e.endNs - e.beginNs;
        acc.durations.push_back(duration);
        if (bytes > 0) acc.bytes += static_cast<uint64_t>(bytes);
        if (bytes > 0 && duration > 0) {
          acc.busbw.push_back(static_cast<double>(bytes) / static_cast<double>(duration) *
                              busBandwidthFactor(op, groupSize));
        }
      }
      if (keyed) {
        arrivals[key].push_back(Arrival{rs.rank, clock.align(e.beginNs), groupSize, op});
      }
    }

    if (!t.events.empty()) {
      rs.tracedNs = last - first;
      rs.clockOffsetNs = clock.offsetAt(first);
      jobBegin = std::min(jobBegin, clock.align(first));
      jobEnd = std::max(jobEnd, clock.align(last));
    }
    rs.commNs = unionLength(commIntervals);
    rs.commShare = rs.tracedNs > 0 ? static_cast<double>(rs.commNs) / rs.tracedNs : 0;
    s.events += rs.events;
    s.droppedEvents += rs.dropped;
    if (rs.truncated) s.truncatedRanks.push_back(rs.rank);
    if (!rs.clockAligned) {
      s.unalignedRanks.push_back(rs.rank);
      // Ranks on rank 0's host read the same steady clock, so offset 0 is right
      // for them; elsewhere it is a guess and cross-rank timings are off.
      if (rank0 == nullptr || rank0->header.host != t.header.host) {
        s.warnings.push_back(strCat(
            "rank ", rs.rank, " (host ", t.header.host.empty() ? "?" : t.header.host,
            ") has no clock-sync samples and runs on another host than rank 0: its times are "
            "not aligned, so arrival skew involving it is unreliable"));
      }
    }
    s.ranks.push_back(std::move(rs));
  }
  if (jobEnd > jobBegin) s.tracedNs = jobEnd - jobBegin;

  // ---- per op and size class
  std::map<std::string, int64_t> opTotal;
  for (auto& [key, acc] : accumulators) {
    CollectiveStats c;
    c.op = key.first;
    c.sizeClass = key.second;
    c.sizeLabel = sizeClassLabel(key.second);
    c.calls = acc.keys.size() + acc.unkeyed;
    c.spans = acc.durations.size();
    c.failed = acc.failed;
    c.bytes = acc.bytes;
    std::sort(acc.durations.begin(), acc.durations.end());
    for (int64_t d : acc.durations) c.totalNs += d;
    if (!acc.durations.empty()) {
      c.meanNs = c.totalNs / static_cast<int64_t>(acc.durations.size());
      c.p50Ns = percentile(acc.durations, 50);
      c.p99Ns = percentile(acc.durations, 99);
      c.maxNs = acc.durations.back();
    }
    if (!acc.busbw.empty()) {
      std::sort(acc.busbw.begin(), acc.busbw.end());
      c.busbwGBps = acc.busbw[(acc.busbw.size() + 1) / 2 - 1];  // nearest-rank median
    }
    opTotal[c.op] += c.totalNs;
    s.collectives.push_back(std::move(c));
  }
  auto classOrder = [](int cls) {
    return cls == kUnknownSizeClass ? std::numeric_limits<int>::max() : cls;
  };
  std::sort(s.collectives.begin(), s.collectives.end(),
            [&](const CollectiveStats& a, const CollectiveStats& b) {
              if (a.op != b.op) {
                const int64_t ta = opTotal[a.op], tb = opTotal[b.op];
                return ta != tb ? ta > tb : a.op < b.op;
              }
              return classOrder(a.sizeClass) < classOrder(b.sizeClass);
            });

  // ---- arrival skew
  SkewStats& skew = s.skew;
  std::vector<int64_t> skews;
  for (auto& [key, list] : arrivals) {
    // A rank that recorded the collective twice (it should not) counts once,
    // with its earlier begin.
    std::sort(list.begin(), list.end(), [](const Arrival& a, const Arrival& b) {
      return a.rank != b.rank ? a.rank < b.rank : a.alignedBeginNs < b.alignedBeginNs;
    });
    list.erase(std::unique(list.begin(), list.end(),
                           [](const Arrival& a, const Arrival& b) { return a.rank == b.rank; }),
               list.end());
    if (list.size() < 2) continue;
    int64_t earliest = list[0].alignedBeginNs, latest = list[0].alignedBeginNs;
    int32_t lastRank = list[0].rank;
    int lastCount = 1;
    int64_t groupSize = 0;
    for (const Arrival& a : list) {
      groupSize = std::max(groupSize, a.groupSize);
      skew.clockUncertaintyNs = std::max(skew.clockUncertaintyNs, uncertaintyOfRank[a.rank]);
      earliest = std::min(earliest, a.alignedBeginNs);
      if (&a == &list[0]) continue;
      if (a.alignedBeginNs > latest) {
        latest = a.alignedBeginNs;
        lastRank = a.rank;
        lastCount = 1;
      } else if (a.alignedBeginNs == latest) {
        ++lastCount;
      }
    }
    ++skew.matched;
    if (static_cast<int64_t>(list.size()) < groupSize) ++skew.incomplete;
    const int64_t value = latest - earliest;
    skews.push_back(value);
    const bool singleLast = lastCount == 1;
    if (singleLast) ++skew.lastArrivals[lastRank];
    const size_t newline = key.find('\n');
    const int64_t seq = std::stoll(key.substr(newline + 1));
    const std::string group = key.substr(0, newline);
    // Ties on the largest skew go to the lowest (group, seq), so the answer
    // does not depend on hash order.
    if (skew.maxSeq < 0 || value > skew.maxNs ||
        (value == skew.maxNs && std::tie(group, seq) < std::tie(skew.maxGroup, skew.maxSeq))) {
      skew.maxNs = value;
      skew.maxOp = std::string(list[0].op);
      skew.maxGroup = group;
      skew.maxSeq = seq;
      skew.maxLastRank = singleLast ? lastRank : -1;
    }
  }
  std::sort(skews.begin(), skews.end());
  skew.p50Ns = percentile(skews, 50);
  skew.p99Ns = percentile(skews, 99);
  for (const auto& [rank, count] : skew.lastArrivals) {
    if (count > skew.mostOftenLastCount) {
      skew.mostOftenLast = rank;
      skew.mostOftenLastCount = count;
    }
  }

  // ---- what makes these numbers incomplete
  if (s.droppedEvents > 0) {
    std::string perRank;
    for (const RankStats& r : s.ranks) {
      if (r.dropped > 0)
        perRank += strCat(perRank.empty() ? "" : ", ", "rank ", r.rank, ": ", r.dropped);
    }
    s.warnings.push_back(strCat(s.droppedEvents, " events were dropped while recording (", perRank,
                                "): counts and times above miss them; the recorder's buffers "
                                "overflowed or a live client read too slowly"));
  }
  s.ddp = summarizeDdp(trace);
  s.fsdp = summarizeFsdp(trace);
  return s;
}

FsdpStats summarizeFsdp(const TraceSet& trace) {
  FsdpStats f;
  struct PerUnit {
    FsdpUnitStats stats;
    int64_t gatherWire = 0, exposed = 0, reduceWire = 0, replicaWire = 0, forward = 0, backward = 0;
    uint64_t prefetched = 0, replicas = 0, forwards = 0, backwards = 0;
  };
  std::vector<std::string> order;
  std::map<std::string, PerUnit> units;
  int64_t forward = 0, backward = 0, optimizer = 0, exposedTotal = 0;
  uint64_t forwards = 0, optimizers = 0;
  const std::string prefix = track::kFsdpUnitPrefix;
  for (const RankTrace& t : trace.ranks) {
    for (const Event& e : t.events) {
      const std::string_view name = t.str(e.name);
      if (e.kind == EventKind::kCounter) {
        if (name == counters::kFsdpPeakBytes) {
          f.peakBytes = std::max(f.peakBytes, static_cast<int64_t>(e.value));
        } else if (name == counters::kFsdpShardedBytes) {
          f.shardedBytes = std::max(f.shardedBytes, static_cast<int64_t>(e.value));
        }
        continue;
      }
      if (e.category != Category::kFsdp || e.kind != EventKind::kSpan) continue;
      const std::string_view trackName = t.str(e.track);
      const int64_t duration = e.endNs - e.beginNs;
      if (trackName == track::kFsdp) {
        if (name == "forward") {
          forward += duration;
          ++forwards;
        } else if (name == "backward") {
          backward += duration;
          ++f.iterations;
        } else if (name == "optimizer") {
          optimizer += duration;
          ++optimizers;
        }
        continue;
      }
      if (trackName.substr(0, prefix.size()) != prefix) continue;
      const std::string unitName(trackName.substr(prefix.size()));
      auto [it, added] = units.try_emplace(unitName);
      if (added) order.push_back(unitName);
      PerUnit& u = it->second;
      u.stats.unit = unitName;
      auto intArg = [&](const char* key) {
        const Arg* a = t.findArg(e, key);
        return a && a->type == ArgType::kInt ? a->intValue : 0;
      };
      const int64_t wire =
          std::max<int64_t>(0, intArg(arg::kWireEndNs) - intArg(arg::kWireStartNs));
      if (name == "all_gather") {
        ++u.stats.gathers;
        u.stats.gatherBytes = intArg(arg::kBytes);
        u.gatherWire += wire;
        u.exposed += std::max<int64_t>(0, intArg(arg::kExposedNs));
        exposedTotal += std::max<int64_t>(0, intArg(arg::kExposedNs));
        u.prefetched += intArg(arg::kPrefetched) ? 1 : 0;
      } else if (name == "reduce_scatter") {
        ++u.stats.reductions;
        u.reduceWire += wire;
      } else if (name == "allreduce") {
        ++u.replicas;
        u.replicaWire += wire;
      } else if (name == "forward") {
        ++u.forwards;
        u.forward += duration;
      } else if (name == "backward") {
        ++u.backwards;
        u.backward += duration;
      }
    }
  }
  if (forwards) f.forwardMeanNs = forward / static_cast<int64_t>(forwards);
  if (f.iterations) {
    f.backwardMeanNs = backward / static_cast<int64_t>(f.iterations);
    f.exposedMeanNs = exposedTotal / static_cast<int64_t>(f.iterations);
  }
  if (optimizers) f.optimizerMeanNs = optimizer / static_cast<int64_t>(optimizers);
  for (const std::string& name : order) {
    PerUnit& u = units[name];
    auto mean = [](int64_t total, uint64_t n) { return n ? total / static_cast<int64_t>(n) : 0; };
    u.stats.gatherWireMeanNs = mean(u.gatherWire, u.stats.gathers);
    u.stats.exposedMeanNs = mean(u.exposed, u.stats.gathers);
    u.stats.prefetchedShare =
        u.stats.gathers ? static_cast<double>(u.prefetched) / u.stats.gathers : 0;
    if (u.stats.reductions == 0 && u.replicas > 0) {  // NO_SHARD: the allreduce is the reduction
      u.stats.reductions = u.replicas;
      u.stats.reduceWireMeanNs = mean(u.replicaWire, u.replicas);
    } else {
      u.stats.reduceWireMeanNs = mean(u.reduceWire, u.stats.reductions);
      u.stats.replicaWireMeanNs = mean(u.replicaWire, u.replicas);
    }
    u.stats.forwardMeanNs = mean(u.forward, u.forwards);
    u.stats.backwardMeanNs = mean(u.backward, u.backwards);
    f.units.push_back(u.stats);
  }
  return f;
}

DdpStats summarizeDdp(const TraceSet& trace) {
  DdpStats d;
  struct PerBucket {
    DdpBucketStats stats;
    std::vector<int64_t> wire;
    int64_t readyToLaunch = 0, exposed = 0;
  };
  std::map<int64_t, PerBucket> buckets;
  int64_t forward = 0, backward = 0, optimizer = 0;
  uint64_t forwards = 0, optimizers = 0;
  std::map<std::pair<int32_t, int64_t>, int64_t> exposedOfIteration;  // (rank, step)
  int64_t wireTotal = 0, exposedTotal = 0;
  for (const RankTrace& t : trace.ranks) {
    for (const Event& e : t.events) {
      if (e.category != Category::kDdp || e.kind != EventKind::kSpan) continue;
      const std::string_view name = t.str(e.name);
      const int64_t duration = e.endNs - e.beginNs;
      if (name == "forward") {
        forward += duration;
        ++forwards;
      } else if (name == "backward") {
        backward += duration;
        ++d.iterations;
      } else if (name == "optimizer") {
        optimizer += duration;
        ++optimizers;
      } else if (name == "bucket_rebuild") {
        ++d.rebuilds;
      } else if (name == "bucket") {
        auto intArg = [&](const char* key) {
          const Arg* a = t.findArg(e, key);
          return a && a->type == ArgType::kInt ? a->intValue : 0;
        };
        PerBucket& b = buckets[intArg(arg::kBucket)];
        b.stats.bucket = intArg(arg::kBucket);
        ++b.stats.samples;
        b.stats.bytes = intArg(arg::kBytes);
        b.stats.params = intArg(arg::kParams);
        const int64_t wire =
            std::max<int64_t>(0, intArg(arg::kWireEndNs) - intArg(arg::kWireStartNs));
        const int64_t exposed = std::max<int64_t>(0, intArg(arg::kExposedNs));
        b.wire.push_back(wire);
        b.readyToLaunch += std::max<int64_t>(0, intArg(arg::kLaunchNs) - intArg(arg::kReadyNs));
        b.exposed += exposed;
        wireTotal += wire;
        exposedTotal += std::min(exposed, wire);
        int64_t& worst = exposedOfIteration[{t.header.rank, intArg(arg::kStep)}];
        worst = std::max(worst, exposed);
      }
    }
  }
  if (forwards) d.forwardMeanNs = forward / static_cast<int64_t>(forwards);
  if (d.iterations) d.backwardMeanNs = backward / static_cast<int64_t>(d.iterations);
  if (optimizers) d.optimizerMeanNs = optimizer / static_cast<int64_t>(optimizers);
  if (!exposedOfIteration.empty()) {
    int64_t sum = 0;
    for (const auto& [key, ns] : exposedOfIteration) sum += ns;
    d.exposedMeanNs = sum / static_cast<int64_t>(exposedOfIteration.size());
  }
  if (wireTotal > 0) d.hiddenShare = 1.0 - static_cast<double>(exposedTotal) / wireTotal;
  for (auto& [index, b] : buckets) {
    const int64_t n = static_cast<int64_t>(b.stats.samples);
    std::sort(b.wire.begin(), b.wire.end());
    int64_t wireSum = 0, exposedCapped = 0;
    for (int64_t w : b.wire) wireSum += w;
    exposedCapped = std::min(b.exposed, wireSum);
    b.stats.wireMeanNs = wireSum / n;
    b.stats.wireP50Ns = percentile(b.wire, 50);
    b.stats.readyToLaunchMeanNs = b.readyToLaunch / n;
    b.stats.exposedMeanNs = b.exposed / n;
    b.stats.hiddenShare = wireSum > 0 ? 1.0 - static_cast<double>(exposedCapped) / wireSum : 0;
    d.buckets.push_back(b.stats);
  }
  return d;
}

std::string formatSummary(const Summary& s) {
  std::string out;
  appendf(out, "ringx trace summary: %s\n", s.source.c_str());
  appendf(out, "  %zu of %d ranks, %" PRIu64 " events, %s traced (aligned to rank 0's clock)\n",
          s.ranks.size(), s.worldSize, s.events, formatDuration(s.tracedNs).c_str());

  // ---- collectives
  out += "\nCollectives (time statistics over every rank's span; busbw as in nccl-tests)\n";
  if (s.collectives.empty()) {
    out += "  none recorded\n";
  } else {
    int opWidth = 9;
    for (const CollectiveStats& c : s.collectives) {
      opWidth = std::max(opWidth, static_cast<int>(c.op.size()));
    }
    appendf(out, "  %-*s  %-15s %7s %7s %10s %10s %10s %10s %10s %7s\n", opWidth, "op", "size",
            "calls", "spans", "total", "mean", "p50", "p99", "busbw GB/s", "failed");
    for (const CollectiveStats& c : s.collectives) {
      char busbwText[32];
      if (c.busbwGBps > 0) {
        std::snprintf(busbwText, sizeof(busbwText), "%.2f", c.busbwGBps);
      } else {
        std::snprintf(busbwText, sizeof(busbwText), "-");
      }
      appendf(
          out, "  %-*s  %-15s %7" PRIu64 " %7" PRIu64 " %10s %10s %10s %10s %10s %7" PRIu64 "\n",
          opWidth, c.op.c_str(), c.sizeLabel.c_str(), c.calls, c.spans,
          formatDuration(c.totalNs).c_str(), formatDuration(c.meanNs).c_str(),
          formatDuration(c.p50Ns).c_str(), formatDuration(c.p99Ns).c_str(), busbwText, c.failed);
    }
  }

  // ---- per rank
  out += "\nCommunication time per rank (time inside collectives / the rank's traced span)\n";
  appendf(out, "  %4s  %-16s %11s %10s %10s %6s  %s\n", "rank", "host", "collectives", "comm",
          "traced", "share", "clock");
  for (const RankStats& r : s.ranks) {
    std::string clock;
    if (r.clockReference) {
      clock = "reference";
    } else if (r.clockAligned) {
      clock = strCat("offset ", signedDuration(r.clockOffsetNs), " +- ",
                     formatDuration(r.clockUncertaintyNs));
    } else {
      clock = "not aligned (no clock-sync samples)";
    }
    if (r.dropped > 0) clock += strCat(", ", r.dropped, " dropped");
    if (r.truncated) clock += ", file cut off";
    appendf(out, "  %4d  %-16s %11" PRIu64 " %10s %10s %5.1f%%  %s\n", r.rank, r.host.c_str(),
            r.collectives, formatDuration(r.commNs).c_str(), formatDuration(r.tracedNs).c_str(),
            100.0 * r.commShare, clock.c_str());
  }

  // ---- skew
  const SkewStats& k = s.skew;
  out +=
      "\nArrival skew (latest minus earliest aligned begin of each collective, matched by "
      "group and seq)\n";
  if (k.matched == 0) {
    out += "  no collective was recorded on two or more ranks\n";
  } else {
    appendf(out, "  %" PRIu64 " collectives matched", k.matched);
    if (k.incomplete > 0) {
      appendf(out, " (%" PRIu64 " seen on fewer ranks than their group)", k.incomplete);
    }
    appendf(out, "; p50 %s, p99 %s, max %s (%s seq %" PRId64 " in group %s",
            formatDuration(k.p50Ns).c_str(), formatDuration(k.p99Ns).c_str(),
            formatDuration(k.maxNs).c_str(), k.maxOp.c_str(), k.maxSeq, k.maxGroup.c_str());
    if (k.maxLastRank >= 0) appendf(out, ", rank %d last", k.maxLastRank);
    out += ")\n";
    if (k.mostOftenLast >= 0) {
      appendf(out, "  last to arrive most often: rank %d (%" PRIu64 " of %" PRIu64 ")",
              k.mostOftenLast, k.mostOftenLastCount, k.matched);
      std::string others;
      for (const auto& [rank, count] : k.lastArrivals) {
        if (rank != k.mostOftenLast)
          others += strCat(others.empty() ? "" : ", ", "rank ", rank, ": ", count);
      }
      if (!others.empty()) appendf(out, "; then %s", others.c_str());
      out += "\n";
    }
    if (k.clockUncertaintyNs > 0) {
      appendf(out, "  clock uncertainty up to %s: smaller skews are within measurement error\n",
              formatDuration(k.clockUncertaintyNs).c_str());
    }
  }

  // ---- DDP
  const DdpStats& d = s.ddp;
  if (d.iterations > 0) {
    appendf(out, "\nDDP engine (%" PRIu64 " iterations over all ranks; means)\n", d.iterations);
    appendf(out, "  forward %s, backward %s, optimizer and the rest until the next forward %s\n",
            formatDuration(d.forwardMeanNs).c_str(), formatDuration(d.backwardMeanNs).c_str(),
            formatDuration(d.optimizerMeanNs).c_str());
    appendf(out,
            "  communication hidden behind backward: %.0f%%; exposed after backward's compute: "
            "%s per iteration%s\n",
            100.0 * d.hiddenShare, formatDuration(d.exposedMeanNs).c_str(),
            d.rebuilds ? "; buckets rebuilt in gradient-ready order" : "");
    appendf(out, "  %6s %10s %6s %14s %10s %10s %12s %7s\n", "bucket", "bytes", "params",
            "wait to launch", "wire mean", "wire p50", "exposed mean", "hidden");
    for (const DdpBucketStats& b : d.buckets) {
      appendf(out, "  %6" PRId64 " %10" PRId64 " %6" PRId64 " %14s %10s %10s %12s %6.0f%%\n",
              b.bucket, b.bytes, b.params, formatDuration(b.readyToLaunchMeanNs).c_str(),
              formatDuration(b.wireMeanNs).c_str(), formatDuration(b.wireP50Ns).c_str(),
              formatDuration(b.exposedMeanNs).c_str(), 100.0 * b.hiddenShare);
    }
  }

  // ---- FSDP
  const FsdpStats& f = s.fsdp;
  if (f.iterations > 0) {
    appendf(out, "\nFSDP engine (%" PRIu64 " iterations over all ranks; means)\n", f.iterations);
    appendf(out, "  forward %s, backward %s, optimizer and the rest until the next forward %s\n",
            formatDuration(f.forwardMeanNs).c_str(), formatDuration(f.backwardMeanNs).c_str(),
            formatDuration(f.optimizerMeanNs).c_str());
    appendf(out,
            "  compute waiting for gathers: %s per iteration; memory per rank: shards %s, "
            "peak held %s\n",
            formatDuration(f.exposedMeanNs).c_str(), formatBytes(f.shardedBytes).c_str(),
            formatBytes(f.peakBytes).c_str());
    appendf(out, "  %-20s %10s %8s %10s %10s %11s %10s %10s %10s\n", "unit", "gathered", "gathers",
            "wire mean", "waited", "prefetched", "reduce", "forward", "backward");
    for (const FsdpUnitStats& u : f.units) {
      appendf(out, "  %-20s %10s %8" PRIu64 " %10s %10s %10.0f%% %10s %10s %10s\n", u.unit.c_str(),
              formatBytes(u.gatherBytes).c_str(), u.gathers,
              formatDuration(u.gatherWireMeanNs).c_str(), formatDuration(u.exposedMeanNs).c_str(),
              100.0 * u.prefetchedShare, formatDuration(u.reduceWireMeanNs).c_str(),
              formatDuration(u.forwardMeanNs).c_str(), formatDuration(u.backwardMeanNs).c_str());
    }
  }

  // ---- caveats
  if (!s.warnings.empty()) {
    out += "\nWarnings\n";
    for (const std::string& w : s.warnings) appendf(out, "  - %s\n", w.c_str());
  }
  return out;
}

}  // namespace ringx::trace
