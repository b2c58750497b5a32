#include "tools/ringx_trace/summary_text.h"

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <map>

#include "analysis/figures.h"

namespace ringx::analysis {
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

// An engine section's title and phase means (DdpAnalysis and FsdpAnalysis alike).
template <typename Engine>
void appendEngineHeader(std::string& out, const char* name, const Engine& e) {
  appendf(out, "\n%s engine (%" PRIu64 " iterations over all ranks; means)\n", name,
          e.iterationCount);
  appendf(out, "  forward %s, backward %s, optimizer and the rest until the next forward %s\n",
          formatDuration(e.forwardMeanNs).c_str(), formatDuration(e.backwardMeanNs).c_str(),
          formatDuration(e.optimizerMeanNs).c_str());
}

}  // namespace

std::string formatSummary(const Summary& s, const SummaryFormat& format) {
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
  if (s.ranks.size() <= format.rankTableLimit || format.allRanks) {
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
  } else {
    // A thousand rows hide the few that matter: the hosts and the stragglers
    // below stand for them.
    const auto [least, most] = std::minmax_element(
        s.ranks.begin(), s.ranks.end(),
        [](const RankStats& a, const RankStats& b) { return a.commShare < b.commShare; });
    appendf(out,
            "\nCommunication time per rank: %zu ranks, share of the traced span from %.1f%% "
            "(rank %d) to %.1f%% (rank %d); --ranks prints every rank\n",
            s.ranks.size(), 100.0 * least->commShare, least->rank, 100.0 * most->commShare,
            most->rank);
  }

  // ---- GPU streams (profiler traces)
  if (std::any_of(s.ranks.begin(), s.ranks.end(),
                  [](const RankStats& r) { return r.gpuSpanNs > 0; })) {
    out +=
        "\nGPU kernels per rank (first kernel to last: idle, no kernel on any stream; compute "
        "and\nnon-compute shares; communication kernels' time under a compute kernel; as HTA's "
        "temporal\nbreakdown and comm/compute overlap count them)\n";
    appendf(out, "  %4s %10s %8s %8s %12s %10s %8s\n", "rank", "span", "idle", "compute",
            "non-compute", "comm", "overlap");
    for (const RankStats& r : s.ranks) {
      if (r.gpuSpanNs <= 0) continue;
      const double span = static_cast<double>(r.gpuSpanNs);
      const int64_t nonCompute = r.gpuSpanNs - r.gpuIdleNs - r.gpuComputeNs;
      appendf(out, "  %4d %10s %7.2f%% %7.2f%% %11.2f%% %10s ", r.rank,
              formatDuration(r.gpuSpanNs).c_str(), 100.0 * r.gpuIdleNs / span,
              100.0 * r.gpuComputeNs / span, 100.0 * nonCompute / span,
              formatDuration(r.gpuCommNs).c_str());
      if (r.gpuCommNs > 0) {
        appendf(out, "%7.2f%%\n", 100.0 * r.gpuOverlapNs / r.gpuCommNs);
      } else {
        out += "       -\n";
      }
    }
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
    for (const auto& [rule, spans] : k.matchedBy) {
      // A CPU backend's scopes are collectives too (chrome_nccl.cc), numbered by their own rule.
      const bool scopes = rule.rfind("backend scope", 0) == 0;
      appendf(out,
              "  %" PRIu64
              " %s of profiler traces numbered by %s (they carry no "
              "sequence number)\n",
              spans, scopes ? "backend scopes" : "NCCL kernels", rule.c_str());
    }
    if (k.mostOftenLast >= 0) {
      appendf(out, "  last to arrive most often: rank %d (%" PRIu64 " of %" PRIu64 ")",
              k.mostOftenLast, k.mostOftenLastCount, k.matched);
      // The runners-up, most often last first; a thousand of them would be a wall.
      std::vector<std::pair<uint64_t, int32_t>> others;
      for (const auto& [rank, count] : k.lastArrivals)
        if (rank != k.mostOftenLast) others.emplace_back(count, rank);
      std::stable_sort(others.begin(), others.end(),
                       [](const auto& a, const auto& b) { return a.first > b.first; });
      std::string then;
      for (size_t i = 0; i < others.size() && i < format.topRanks - 1; ++i)
        then += strCat(then.empty() ? "" : ", ", "rank ", others[i].second, ": ", others[i].first);
      if (others.size() + 1 > format.topRanks)
        then += strCat(" and ", others.size() + 1 - format.topRanks, " more ranks");
      if (!then.empty()) appendf(out, "; then %s", then.c_str());
      out += "\n";
    }
    if (k.clockUncertaintyNs > 0) {
      appendf(out, "  clock uncertainty up to %s: smaller skews are within measurement error\n",
              formatDuration(k.clockUncertaintyNs).c_str());
    }
  }

  // ---- stragglers: ranks and hosts that arrive late
  if (k.matched > 0 && s.ranks.size() >= 2) {
    out +=
        "\nStragglers (lateness: how long after the first rank a rank began the matched "
        "collectives it was in, mean)\n";
    if (s.hosts.size() >= 2) {
      size_t hostWidth = 16;
      for (const HostStats& h : s.hosts) hostWidth = std::max(hostWidth, h.host.size());
      appendf(out, "  %-*s %-20s %6s %10s %10s\n", static_cast<int>(hostWidth), "host", "ranks",
              "share", "lateness", "times last");
      const size_t rows = s.hosts.size() <= format.topHosts + 1 ? s.hosts.size() : format.topHosts;
      for (size_t i = 0; i < rows; ++i) {
        const HostStats& h = s.hosts[i];
        appendf(out, "  %-*s %-20s %5.1f%% %10s %10" PRIu64 "\n", static_cast<int>(hostWidth),
                h.host.c_str(), rankList(h.ranks).c_str(), 100.0 * h.commShare,
                formatDuration(h.latenessMeanNs).c_str(), h.timesLast);
      }
      if (rows < s.hosts.size()) {
        std::vector<int64_t> rest;
        for (size_t i = rows; i < s.hosts.size(); ++i) rest.push_back(s.hosts[i].latenessMeanNs);
        std::sort(rest.begin(), rest.end());
        appendf(out, "  ... %zu more hosts, lateness p50 %s, max %s\n", rest.size(),
                formatDuration(percentile(rest, 50)).c_str(), formatDuration(rest.back()).c_str());
      }
    }
    std::vector<const RankStats*> late;
    for (const RankStats& r : s.ranks)
      if (r.matchedCollectives > 0) late.push_back(&r);
    std::stable_sort(late.begin(), late.end(), [](const RankStats* a, const RankStats* b) {
      return a->latenessMeanNs > b->latenessMeanNs;
    });
    std::string top;
    for (size_t i = 0; i < late.size() && i < format.topRanks; ++i) {
      const RankStats& r = *late[i];
      top += strCat(top.empty() ? "" : "; ", "rank ", r.rank, " (", r.host.empty() ? "?" : r.host,
                    ") ", formatDuration(r.latenessMeanNs), ", last ", r.timesLast, " of ",
                    r.matchedCollectives);
    }
    if (!top.empty()) appendf(out, "  latest ranks: %s\n", top.c_str());
  }

  // ---- DDP
  const DdpAnalysis& d = s.ddp;
  if (d.iterationCount > 0) {
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
  if (f.iterationCount > 0) {
    appendEngineHeader(out, "FSDP", f);
    appendf(out, "  compute waiting for gathers: %s per iteration; ",
            formatDuration(f.exposedMeanNs).c_str());
    // Profiler traces of FSDP2 keep no memory counters.
    out += s.fsdpPeakBytes > 0 ? strCat("memory per rank: shards ", formatBytes(s.fsdpShardedBytes),
                                        ", peak held ", formatBytes(s.fsdpPeakBytes), "\n")
                               : std::string("memory per rank not recorded\n");
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
