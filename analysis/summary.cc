// Summary statistics over a job's trace (see summary.h for what and why).
//
// One pass over every rank's collective spans in the store collects durations
// per (op, size class) and each rank's collective intervals; arrival skew comes
// from the viewer's cross-rank matching (matchCollectives) and the engines'
// sections from analyzeDdp / analyzeFsdp, so nothing here re-derives what the
// viewer shows.
#include "analysis/summary.h"

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <limits>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "analysis/store_reading.h"
#include "backend/common/text.h"
#include "backend/trace/alignment.h"
#include "backend/trace/schema.h"
#include "viewer/model/ringx_ingest.h"

namespace ringx::analysis {
using namespace store_reading;

namespace {

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

// An engine section's title and phase means (DdpAnalysis and FsdpAnalysis alike).
template <typename Engine>
void appendEngineHeader(std::string& out, const char* name, const Engine& e) {
  appendf(out, "\n%s engine (%zu iterations over all ranks; means)\n", name, e.iterations.size());
  appendf(out, "  forward %s, backward %s, optimizer and the rest until the next forward %s\n",
          formatDuration(e.forwardMeanNs).c_str(), formatDuration(e.backwardMeanNs).c_str(),
          formatDuration(e.optimizerMeanNs).c_str());
}

void summarizeSkew(const TraceStore& store, Summary& s) {
  SkewStats& skew = s.skew;
  std::vector<int64_t> skews;
  for (const CollectiveRow& row : matchCollectives(store)) {
    if (row.ranks.size() < 2) continue;
    ++skew.matched;
    if (row.missingCount > 0) ++skew.incomplete;
    skews.push_back(row.arrivalSkewNs);
    if (row.lastArrivalRank >= 0) ++skew.lastArrivals[row.lastArrivalRank];
    for (const CollectiveRank& r : row.ranks) {
      if (const RankData* rank = store.findRank(r.rank))
        skew.clockUncertaintyNs = std::max(skew.clockUncertaintyNs, rank->clockUncertaintyNs);
    }
    // Ties on the largest skew go to the lowest (group, seq), so the answer
    // does not depend on row order.
    if (skew.maxSeq < 0 || row.arrivalSkewNs > skew.maxNs ||
        (row.arrivalSkewNs == skew.maxNs &&
         std::tie(row.group, row.seq) < std::tie(skew.maxGroup, skew.maxSeq))) {
      skew.maxNs = row.arrivalSkewNs;
      skew.maxOp = row.op;
      skew.maxGroup = row.group;
      skew.maxSeq = row.seq;
      skew.maxLastRank = row.lastArrivalRank;
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
}

}  // namespace

Summary summarize(const TraceStore& store, const std::string& source) {
  Summary s;
  s.source = source;
  s.worldSize = static_cast<int32_t>(store.ranks().size());
  s.warnings = store.warnings();
  s.events = store.eventCount();
  if (!store.empty()) s.tracedNs = store.endNs() - store.beginNs();

  const viewer::StringPool& pool = store.strings();
  const Keys keys(pool);
  const std::string collectiveCategory = trace::categoryName(trace::Category::kCollective);
  int collective = -1;
  for (size_t c = 0; c < store.categories().size(); ++c)
    if (store.categories()[c] == collectiveCategory) collective = static_cast<int>(c);
  const std::string_view commPrefix = trace::track::kCommPrefix;

  std::map<std::pair<std::string, int>, Accumulator> accumulators;
  for (const RankData& rank : store.ranks()) {
    RankStats rs;
    rs.rank = rank.rank;
    rs.host = rank.host;
    rs.events = rank.events;
    rs.dropped = rank.dropped;
    rs.truncated = rank.truncated;
    rs.clockAligned = rank.clockAligned;
    rs.clockUncertaintyNs = rank.clockUncertaintyNs;
    rs.clockKnown = rank.clockKnown;
    rs.clockReference = rank.clockReference;
    rs.clockOffsetNs = rank.clockOffsetNs;
    rs.tracedNs = rank.endNs - rank.beginNs;

    // The op's accumulator through a per-rank cache keyed by name id and size
    // class: a map lookup with a fresh string per span would dominate.
    std::unordered_map<uint64_t, Accumulator*> accumulatorOf;  // std::map nodes do not move
    std::vector<std::pair<int64_t, int64_t>> commIntervals;
    for (const Track& track : rank.tracks) {
      const std::string_view trackName = store.str(track.name);
      for (const auto& level : track.levels) {
        for (const Span& span : level) {
          if (collective < 0 || span.category != collective) continue;
          const ArgRange args(rank, span);
          const int64_t bytes = args.integer(keys.bytes, -1);
          const int64_t seq = args.integer(keys.seq, -1);
          const int64_t groupSize = args.integer(keys.groupSize, s.worldSize);
          const std::string_view op = store.str(span.name);
          std::string_view groupName = store.str(args.string(keys.group));
          if (groupName.empty() && startsWith(trackName, commPrefix))
            groupName = trackName.substr(commPrefix.size());

          const int cls = sizeClass(bytes);
          const uint64_t cacheKey = uint64_t{span.name} << 8 | static_cast<uint64_t>(cls + 2);
          Accumulator*& cached = accumulatorOf[cacheKey];
          if (cached == nullptr) cached = &accumulators[{std::string(op), cls}];
          Accumulator& acc = *cached;
          if (seq >= 0 && !isPointToPoint(op)) {
            acc.keys.insert(strCat(groupName, "\n", seq));
          } else {
            ++acc.unkeyed;
          }
          ++rs.collectives;
          commIntervals.emplace_back(span.begin, span.end);
          if (span.flags & viewer::kSpanFailed) {
            ++acc.failed;
            ++rs.failed;
            continue;
          }
          const int64_t duration = span.duration();
          acc.durations.push_back(duration);
          if (bytes > 0) acc.bytes += static_cast<uint64_t>(bytes);
          const double busbw = busBandwidthGBps(op, bytes, duration, groupSize);
          if (busbw > 0) acc.busbw.push_back(busbw);
        }
      }
    }
    rs.commNs = unionLength(commIntervals);
    rs.commShare = rs.tracedNs > 0 ? static_cast<double>(rs.commNs) / rs.tracedNs : 0;
    s.droppedEvents += rs.dropped;
    if (rs.truncated) s.truncatedRanks.push_back(rs.rank);
    if (!rs.clockAligned) s.unalignedRanks.push_back(rs.rank);
    s.ranks.push_back(std::move(rs));
  }

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
      c.meanNs = meanOf(c.totalNs, acc.durations.size());
      c.p50Ns = percentile(acc.durations, 50);
      c.p99Ns = percentile(acc.durations, 99);
      c.maxNs = acc.durations.back();
    }
    c.busbwGBps = median(acc.busbw);
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

  summarizeSkew(store, s);

  // ---- the engines
  s.ddp = analyzeDdp(store);
  s.fsdp = analyzeFsdp(store);
  const uint32_t peakName = pool.find(trace::counters::kFsdpPeakBytes);
  const uint32_t shardedName = pool.find(trace::counters::kFsdpShardedBytes);
  for (const RankData& rank : store.ranks()) {
    if (const auto* c = peakName ? rank.findCounter(peakName) : nullptr)
      s.fsdpPeakBytes = std::max(s.fsdpPeakBytes, static_cast<int64_t>(c->maxValue));
    if (const auto* c = shardedName ? rank.findCounter(shardedName) : nullptr)
      s.fsdpShardedBytes = std::max(s.fsdpShardedBytes, static_cast<int64_t>(c->maxValue));
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
  const RankData* rank0 = store.findRank(0);
  for (const RankStats& r : s.ranks) {
    // Ranks on rank 0's host read the same steady clock, so offset 0 is right
    // for them; elsewhere it is a guess and cross-rank timings are off.
    if (r.clockAligned || (rank0 != nullptr && rank0->host == r.host)) continue;
    s.warnings.push_back(
        strCat("rank ", r.rank, " (host ", r.host.empty() ? "?" : r.host,
               ") has no clock-sync samples and runs on another host than rank 0: its times are "
               "not aligned, so arrival skew involving it is unreliable"));
  }
  return s;
}

Summary summarize(const trace::TraceSet& trace) {
  TraceStore store;
  viewer::ingestTraceSet(store, trace);
  Summary s = summarize(store, trace.path);
  s.worldSize = std::max(s.worldSize, trace.worldSize());
  return s;
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
    if (!r.clockKnown) {
      clock = "as recorded";
    } else if (r.clockReference) {
      clock = "reference";
    } else if (r.clockAligned) {
      clock = strCat("offset ", formatSignedDuration(r.clockOffsetNs), " +- ",
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
  const DdpAnalysis& d = s.ddp;
  if (!d.iterations.empty()) {
    appendEngineHeader(out, "DDP", d);
    appendf(out,
            "  communication hidden behind backward: %.0f%%; exposed after backward's compute: "
            "%s per iteration%s\n",
            100.0 * d.hiddenShare, formatDuration(d.exposedMeanNs).c_str(),
            d.rebuilds ? "; buckets rebuilt in gradient-ready order" : "");
    appendf(out, "  %6s %10s %6s %14s %10s %10s %12s %7s\n", "bucket", "bytes", "params",
            "wait to launch", "wire mean", "wire p50", "exposed mean", "hidden");
    for (const DdpBucketAverage& b : d.buckets) {
      appendf(out, "  %6" PRId64 " %10" PRId64 " %6" PRId64 " %14s %10s %10s %12s %6.0f%%\n",
              b.bucket, b.bytes, b.params, formatDuration(b.launchDelayMeanNs).c_str(),
              formatDuration(b.wireMeanNs).c_str(), formatDuration(b.wireP50Ns).c_str(),
              formatDuration(b.exposedMeanNs).c_str(), 100.0 * b.hiddenShare);
    }
  }

  // ---- FSDP
  const FsdpAnalysis& f = s.fsdp;
  if (!f.iterations.empty()) {
    appendEngineHeader(out, "FSDP", f);
    appendf(out,
            "  compute waiting for gathers: %s per iteration; memory per rank: shards %s, "
            "peak held %s\n",
            formatDuration(f.exposedMeanNs).c_str(), formatBytes(s.fsdpShardedBytes).c_str(),
            formatBytes(s.fsdpPeakBytes).c_str());
    appendf(out, "  %-20s %10s %8s %10s %10s %11s %14s %10s %10s %10s\n", "unit", "gathered",
            "gathers", "wire mean", "waited", "prefetched", "reduce_scatter", "allreduce",
            "forward", "backward");
    for (const FsdpUnitAnalysis& u : f.units) {
      appendf(out, "  %-20s %10s %8" PRIu64 " %10s %10s %10.0f%% %14s %10s %10s %10s\n",
              u.unit.c_str(), formatBytes(u.gatherBytes).c_str(), u.gathers,
              formatDuration(u.gatherWireMeanNs).c_str(), formatDuration(u.exposedMeanNs).c_str(),
              100.0 * u.prefetchedShare, formatDuration(u.reduceScatterMeanNs).c_str(),
              formatDuration(u.allreduceMeanNs).c_str(), formatDuration(u.forwardMeanNs).c_str(),
              formatDuration(u.backwardMeanNs).c_str());
    }
  }

  // ---- caveats
  if (!s.warnings.empty()) {
    out += "\nWarnings\n";
    for (const std::string& w : s.warnings) appendf(out, "  - %s\n", w.c_str());
  }
  return out;
}

}  // namespace ringx::analysis
