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
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>

#include "analysis/profiler_ddp.h"
#include "analysis/profiler_fsdp.h"
#include "analysis/store_reading.h"
#include "base/text.h"
#include "trace/format/collective_key.h"
#include "trace/format/schema.h"
#include "trace/model/ringx_ingest.h"
#include "trace/read/alignment.h"

namespace ringx::analysis {
using namespace store_reading;

namespace {

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

// ---- one rank's part --------------------------------------------------------------

// Durations and bandwidths of one (op, size class).
struct OpPart {
  Distribution durations;
  Distribution busbw;
  int64_t totalNs = 0;
  uint64_t unkeyed = 0;  // spans without a sequence number (or point-to-point)
  uint64_t failed = 0;
  uint64_t bytes = 0;
  void merge(const OpPart& o) {
    durations.merge(o.durations);
    busbw.merge(o.busbw);
    totalNs += o.totalNs;
    unkeyed += o.unkeyed;
    failed += o.failed;
    bytes += o.bytes;
  }
};
using OpKey = std::pair<std::string, int>;  // (op, size class)

// One rank's part in one (group, seq): its earliest span (the arrival, as
// matchCollectives counts a rank once) and the (op, size) classes of all its
// spans (for the calls column).
struct CollectivePart {
  std::string group;  // trace::collectiveGroup()
  int64_t seq = 0;
  int64_t beginNs = 0;
  std::string op;  // of the earliest span
  int64_t groupSize = -1;
  std::vector<uint32_t> opKeys;  // indices into RankPart::opKeys
};

// Everything the summary keeps of one rank once its events are gone.
struct RankPart {
  RankStats stats;
  bool hasEvents = false;
  int64_t beginNs = 0, endNs = 0;
  std::vector<OpKey> opKeys;
  std::vector<OpPart> ops;  // by opKeys index
  std::vector<CollectivePart> collectives;
  std::map<std::string, uint64_t> matchedBy;  // spans numbered by a rule (trace::kMatchedByArg)
  DdpBuilder ddp{false};
  FsdpBuilder fsdp{false};
  int64_t fsdpPeakBytes = 0, fsdpShardedBytes = 0;
  std::vector<std::string> warnings;  // its store's own
};

// Sorted, disjoint runs of [begin, end) intervals (sorted in place).
std::vector<std::pair<int64_t, int64_t>> mergedRuns(std::vector<std::pair<int64_t, int64_t>>& in) {
  std::sort(in.begin(), in.end());
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& [b, e] : in) {
    if (!out.empty() && b <= out.back().second) {
      out.back().second = std::max(out.back().second, e);
    } else {
      out.emplace_back(b, e);
    }
  }
  return out;
}

// Time in both of two sets of disjoint sorted runs.
int64_t overlapLength(const std::vector<std::pair<int64_t, int64_t>>& a,
                      const std::vector<std::pair<int64_t, int64_t>>& b) {
  int64_t total = 0;
  for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    total +=
        std::max<int64_t>(0, std::min(a[i].second, b[j].second) - std::max(a[i].first, b[j].first));
    if (a[i].second < b[j].second) {
      ++i;
    } else {
      ++j;
    }
  }
  return total;
}

// A rank's GPU streams (RankStats::gpuSpanNs...).
void gpuFigures(const TraceStore& store, const RankData& rank, RankStats& rs) {
  std::vector<std::pair<int64_t, int64_t>> all, compute, comm;
  for (const Track& track : rank.tracks) {
    if (!startsWith(store.str(track.name), "GPU ")) continue;
    for (const auto& level : track.levels) {
      for (const Span& span : level) {
        const GpuWork work = gpuWorkOf(span.category < store.categories().size()
                                           ? std::string_view(store.categories()[span.category])
                                           : std::string_view(),
                                       store.str(span.name));
        if (work == GpuWork::kNotKernel) continue;
        all.emplace_back(span.begin, span.end);
        if (work == GpuWork::kCompute) compute.emplace_back(span.begin, span.end);
        if (work == GpuWork::kCommunication) comm.emplace_back(span.begin, span.end);
      }
    }
  }
  if (all.empty()) return;
  const auto runs = mergedRuns(all), computeRuns = mergedRuns(compute), commRuns = mergedRuns(comm);
  auto length = [](const std::vector<std::pair<int64_t, int64_t>>& r) {
    int64_t total = 0;
    for (const auto& [b, e] : r) total += e - b;
    return total;
  };
  rs.gpuSpanNs = runs.back().second - runs.front().first;
  rs.gpuIdleNs = rs.gpuSpanNs - length(runs);
  rs.gpuComputeNs = length(computeRuns);
  rs.gpuCommNs = length(commRuns);
  rs.gpuOverlapNs = overlapLength(commRuns, computeRuns);
}

RankPart reduceRank(const TraceStore& store, const RankData& rank, int64_t defaultGroupSize) {
  RankPart part;
  RankStats& rs = part.stats;
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
  part.hasEvents = rank.events > 0;
  part.beginNs = rank.beginNs;
  part.endNs = rank.endNs;

  const Keys keys(store.strings());
  const uint32_t matchedByKey = store.strings().find(trace::kMatchedByArg);
  const int collective = store.findCategory(trace::categoryName(trace::Category::kCollective));

  // The op's part through a cache keyed by name id and size class: a map
  // lookup with a fresh string per span would dominate.
  std::unordered_map<uint64_t, uint32_t> opOf;
  std::map<OpKey, uint32_t> opIndex;
  std::unordered_map<trace::CollectiveKey, size_t, trace::CollectiveKeyHash> collectiveOf;
  std::unordered_map<std::string_view, uint32_t> groupIds;  // this rank's ids of group names
  auto groupIdOf = [&](std::string_view name) {
    return groupIds.try_emplace(name, static_cast<uint32_t>(groupIds.size())).first->second;
  };
  std::vector<std::pair<int64_t, int64_t>> commIntervals;
  for (const Track& track : rank.tracks) {
    const std::string_view trackName = store.str(track.name);
    for (const auto& level : track.levels) {
      for (const Span& span : level) {
        if (collective < 0 || span.category != collective) continue;
        const ArgRange args(rank, span);
        const int64_t bytes = args.integer(keys.bytes, -1);
        const int64_t seq = args.integer(keys.seq, -1);
        const int64_t groupSizeArg = args.integer(keys.groupSize, -1);
        const int64_t groupSize = groupSizeArg > 0 ? groupSizeArg : defaultGroupSize;
        const std::string_view op = store.str(span.name);
        const std::string_view group =
            trace::collectiveGroup(store.str(args.string(keys.group)), trackName);

        const int cls = sizeClass(bytes);
        const uint64_t cacheKey = uint64_t{span.name} << 8 | static_cast<uint64_t>(cls + 2);
        auto [cached, fresh] = opOf.try_emplace(cacheKey, 0);
        if (fresh) {
          auto [at, added] = opIndex.try_emplace(OpKey{std::string(op), cls},
                                                 static_cast<uint32_t>(part.opKeys.size()));
          if (added) {
            part.opKeys.push_back(at->first);
            part.ops.emplace_back();
          }
          cached->second = at->second;
        }
        const uint32_t opKey = cached->second;
        OpPart& acc = part.ops[opKey];
        if (const auto key = trace::collectiveKeyOf(op, seq, group, groupIdOf)) {
          if (const uint32_t rule = matchedByKey ? args.string(matchedByKey) : 0) {
            ++part.matchedBy[std::string(store.str(rule))];
          }
          auto [at, added] = collectiveOf.try_emplace(*key, 0);
          if (added) {
            at->second = part.collectives.size();
            part.collectives.push_back(CollectivePart{
                std::string(group), seq, span.begin, std::string(op), groupSizeArg, {}});
          }
          CollectivePart& c = part.collectives[at->second];
          if (span.begin < c.beginNs) {
            c.beginNs = span.begin;
            c.op = std::string(op);
          }
          c.groupSize = std::max(c.groupSize, groupSizeArg);
          if (std::find(c.opKeys.begin(), c.opKeys.end(), opKey) == c.opKeys.end())
            c.opKeys.push_back(opKey);
        } else {
          ++acc.unkeyed;
        }
        ++rs.collectives;
        commIntervals.emplace_back(span.begin, span.end);
        if (span.flags & model::kSpanFailed) {
          ++acc.failed;
          ++rs.failed;
          continue;
        }
        const int64_t duration = span.duration();
        acc.durations.add(static_cast<double>(duration));
        acc.totalNs += duration;
        if (bytes > 0) acc.bytes += static_cast<uint64_t>(bytes);
        const double busbw = busBandwidthGBps(op, bytes, duration, groupSize);
        if (busbw > 0) acc.busbw.add(busbw);
      }
    }
  }
  rs.commNs = unionLength(commIntervals);
  gpuFigures(store, rank, rs);
  rs.commShare = rs.tracedNs > 0 ? static_cast<double>(rs.commNs) / rs.tracedNs : 0;

  part.ddp.addRank(store, rank);
  part.fsdp.addRank(store, rank);
  const StringPool& pool = store.strings();
  const uint32_t peakName = pool.find(trace::counters::kFsdpPeakBytes);
  const uint32_t shardedName = pool.find(trace::counters::kFsdpShardedBytes);
  if (const auto* c = peakName ? rank.findCounter(peakName) : nullptr)
    part.fsdpPeakBytes = static_cast<int64_t>(c->maxValue);
  if (const auto* c = shardedName ? rank.findCounter(shardedName) : nullptr)
    part.fsdpShardedBytes = static_cast<int64_t>(c->maxValue);
  return part;
}

// One rank of a ringx trace, on its own: ingested into a store of one rank
// (aligned as the viewer aligns it), reduced, and the store dropped.
RankPart reduceRankTrace(const trace::RankTrace& trace) {
  TraceStore store;
  model::ingestRankTrace(store, trace, trace::ClockModel::forRank(trace), 0, nullptr);
  store.finalize();
  RankPart part = reduceRank(store, store.ranks().front(), trace.header.worldSize);
  part.warnings = store.warnings();
  return part;
}

// ---- the job, rank by rank ---------------------------------------------------------

// Merges ranks' parts (in any order, one at a time: callers on several threads
// lock) into the job's figures. What it keeps: per rank its RankStats and runs
// of seqs; per (op, size) a part; per (group, seq) the arrivals. Nothing per event.
class SummaryBuilder {
 public:
  void add(RankPart&& part);
  Summary finish(std::string source, int32_t worldSize, std::vector<std::string> warnings);

 private:
  // One (group, seq) over every rank that recorded it.
  struct Collective {
    ArrivalTracker arrivals;
    int64_t groupSize = 0;         // the largest group_size argument; 0 when unknown
    std::vector<uint32_t> opKeys;  // (op, size) classes of its spans, global indices
    // The op each rank began it with: (op, ranks, lowest rank); the row's op is
    // the most common, ties to the lowest rank's (as matchCollectives names it).
    struct Op {
      uint32_t op;
      uint32_t ranks;
      int32_t lowestRank;
    };
    std::vector<Op> ops;
  };
  // A rank's collectives in one group, for its lateness: the seqs it recorded
  // as runs (usually one: every seq), and the sum of its begins. Its lateness
  // sum is that minus the collectives' earliest begins summed over the runs,
  // so no rank's arrivals need to be kept until every rank is in.
  struct GroupRuns {
    uint32_t group;
    std::vector<std::pair<int64_t, int64_t>> runs;  // [first, last] seq
    __int128 beginSum = 0;  // 128 bits: 10^5 collectives x 10^15 ns overflow 64
  };
  struct Rank {
    RankStats stats;
    std::vector<GroupRuns> groups;
  };

  static uint32_t intern(std::vector<std::string>& names,
                         std::unordered_map<std::string, uint32_t>& ids, const std::string& name) {
    auto [at, added] = ids.try_emplace(name, static_cast<uint32_t>(names.size()));
    if (added) names.push_back(name);
    return at->second;
  }

  std::vector<Rank> ranks_;
  std::vector<std::string> groupNames_, opNames_;
  std::unordered_map<std::string, uint32_t> groupIds_, opIds_;
  std::map<OpKey, uint32_t> opKeyIds_;
  std::vector<OpKey> opKeys_;
  std::vector<OpPart> ops_;
  std::unordered_map<trace::CollectiveKey, Collective, trace::CollectiveKeyHash> collectives_;
  DdpBuilder ddp_{false};
  FsdpBuilder fsdp_{false};
  int64_t fsdpPeakBytes_ = 0, fsdpShardedBytes_ = 0;
  bool hasEvents_ = false;
  int64_t beginNs_ = 0, endNs_ = 0;
  std::vector<std::pair<int32_t, std::string>> rankWarnings_;
  std::map<std::string, uint64_t> matchedBy_;
};

void SummaryBuilder::add(RankPart&& part) {
  const int32_t rankId = part.stats.rank;
  if (part.hasEvents) {
    beginNs_ = hasEvents_ ? std::min(beginNs_, part.beginNs) : part.beginNs;
    endNs_ = hasEvents_ ? std::max(endNs_, part.endNs) : part.endNs;
    hasEvents_ = true;
  }
  std::vector<uint32_t> opKeyOf(part.opKeys.size());
  for (size_t i = 0; i < part.opKeys.size(); ++i) {
    auto [at, added] = opKeyIds_.try_emplace(part.opKeys[i], static_cast<uint32_t>(ops_.size()));
    if (added) {
      opKeys_.push_back(part.opKeys[i]);
      ops_.emplace_back();
    }
    opKeyOf[i] = at->second;
    ops_[at->second].merge(part.ops[i]);
  }

  for (const auto& [rule, count] : part.matchedBy) matchedBy_[rule] += count;
  Rank rank;
  rank.stats = std::move(part.stats);
  // By group, then seq: the runs come out in one pass.
  std::sort(part.collectives.begin(), part.collectives.end(),
            [](const CollectivePart& a, const CollectivePart& b) {
              return a.group != b.group ? a.group < b.group : a.seq < b.seq;
            });
  for (const CollectivePart& c : part.collectives) {
    const uint32_t group = intern(groupNames_, groupIds_, c.group);
    Collective& row = collectives_[trace::CollectiveKey{group, c.seq}];
    row.arrivals.add(Arrival{rankId, c.beginNs});
    row.groupSize = std::max(row.groupSize, c.groupSize);
    for (uint32_t k : c.opKeys) {
      const uint32_t global = opKeyOf[k];
      if (std::find(row.opKeys.begin(), row.opKeys.end(), global) == row.opKeys.end())
        row.opKeys.push_back(global);
    }
    const uint32_t op = intern(opNames_, opIds_, c.op);
    auto it = std::find_if(row.ops.begin(), row.ops.end(),
                           [&](const Collective::Op& o) { return o.op == op; });
    if (it == row.ops.end()) {
      row.ops.push_back(Collective::Op{op, 1, rankId});
    } else {
      ++it->ranks;
      it->lowestRank = std::min(it->lowestRank, rankId);
    }
    if (rank.groups.empty() || rank.groups.back().group != group)
      rank.groups.push_back(GroupRuns{group, {}, 0});
    GroupRuns& g = rank.groups.back();
    if (!g.runs.empty() && g.runs.back().second + 1 == c.seq) {
      g.runs.back().second = c.seq;
    } else {
      g.runs.emplace_back(c.seq, c.seq);
    }
    g.beginSum += c.beginNs;
  }
  ranks_.push_back(std::move(rank));

  ddp_.merge(std::move(part.ddp));
  fsdp_.merge(std::move(part.fsdp));
  fsdpPeakBytes_ = std::max(fsdpPeakBytes_, part.fsdpPeakBytes);
  fsdpShardedBytes_ = std::max(fsdpShardedBytes_, part.fsdpShardedBytes);
  for (std::string& w : part.warnings) rankWarnings_.emplace_back(rankId, std::move(w));
}

Summary SummaryBuilder::finish(std::string source, int32_t worldSize,
                               std::vector<std::string> warnings) {
  Summary s;
  s.source = std::move(source);
  s.worldSize = worldSize;
  std::sort(ranks_.begin(), ranks_.end(),
            [](const Rank& a, const Rank& b) { return a.stats.rank < b.stats.rank; });
  std::stable_sort(rankWarnings_.begin(), rankWarnings_.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  s.warnings = std::move(warnings);
  for (auto& [rank, w] : rankWarnings_) s.warnings.push_back(std::move(w));
  if (hasEvents_) s.tracedNs = endNs_ - beginNs_;

  // ---- per op and size class
  std::vector<uint64_t> calls(ops_.size(), 0);
  for (const auto& [key, row] : collectives_)
    for (uint32_t k : row.opKeys) ++calls[k];
  std::map<std::string, int64_t> opTotal;
  for (size_t i = 0; i < ops_.size(); ++i) {
    const OpPart& acc = ops_[i];
    CollectiveStats c;
    c.op = opKeys_[i].first;
    c.sizeClass = opKeys_[i].second;
    c.sizeLabel = sizeClassLabel(c.sizeClass);
    c.calls = calls[i] + acc.unkeyed;
    c.spans = acc.durations.count();
    c.failed = acc.failed;
    c.bytes = acc.bytes;
    c.totalNs = acc.totalNs;
    if (c.spans > 0) {
      c.meanNs = meanOf(c.totalNs, c.spans);
      c.p50Ns = static_cast<int64_t>(acc.durations.percentile(50));
      c.p99Ns = static_cast<int64_t>(acc.durations.percentile(99));
      c.maxNs = static_cast<int64_t>(acc.durations.max());
    }
    c.busbwGBps = acc.busbw.percentile(50);
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

  // ---- arrival skew, over the collectives seen on two or more ranks
  std::vector<uint32_t> members(groupNames_.size(), 0);  // ranks with any collective in a group
  for (const Rank& r : ranks_)
    for (const GroupRuns& g : r.groups) ++members[g.group];
  // Per group, by seq: the collectives' earliest begins and whether matched,
  // summed from the first seq, for the ranks' lateness below.
  struct SeqSums {
    std::vector<int64_t> seqs;
    std::vector<__int128> earliest;  // prefix sums, one longer than seqs
    std::vector<uint64_t> matched;
  };
  std::vector<SeqSums> sums(groupNames_.size());
  {
    std::vector<std::vector<std::pair<int64_t, const Collective*>>> bySeq(groupNames_.size());
    for (const auto& [key, row] : collectives_) bySeq[key.group].emplace_back(key.seq, &row);
    for (size_t g = 0; g < bySeq.size(); ++g) {
      auto& rows = bySeq[g];
      std::sort(rows.begin(), rows.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
      SeqSums& out = sums[g];
      out.earliest.push_back(0);
      out.matched.push_back(0);
      for (const auto& [seq, row] : rows) {
        out.seqs.push_back(seq);
        out.earliest.push_back(out.earliest.back() + row->arrivals.earliestNs());
        out.matched.push_back(out.matched.back() + (row->arrivals.count() >= 2 ? 1 : 0));
      }
    }
  }
  SkewStats& skew = s.skew;
  skew.matchedBy = matchedBy_;
  std::vector<int64_t> skews;
  for (const auto& [key, row] : collectives_) {
    const int64_t n = row.arrivals.count();
    if (n < 2) continue;
    ++skew.matched;
    // Missing, as matchCollectives counts it: by group_size, or the group's
    // members (ranks with any collective in it) absent here.
    const int64_t bySize = row.groupSize > 0 ? row.groupSize - n : 0;
    if (std::max<int64_t>(bySize, members[key.group] - n) > 0) ++skew.incomplete;
    const ArrivalSkew a = row.arrivals.skew();
    skews.push_back(a.skewNs);
    if (a.lastRank >= 0) ++skew.lastArrivals[a.lastRank];
    const std::string_view group = groupNames_[key.group];
    // Ties on the largest skew go to the lowest (group, seq), so the answer
    // does not depend on the order ranks were read in.
    if (skew.maxSeq < 0 || a.skewNs > skew.maxNs ||
        (a.skewNs == skew.maxNs &&
         std::make_pair(group, key.seq) <
             std::make_pair(std::string_view(skew.maxGroup), skew.maxSeq))) {
      const Collective::Op* op = &row.ops.front();
      for (const Collective::Op& o : row.ops) {
        if (o.ranks > op->ranks || (o.ranks == op->ranks && o.lowestRank < op->lowestRank)) op = &o;
      }
      skew.maxNs = a.skewNs;
      skew.maxOp = opNames_[op->op];
      skew.maxGroup = std::string(group);
      skew.maxSeq = key.seq;
      skew.maxLastRank = a.lastRank;
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

  // ---- per rank: lateness from the runs; per host: sums
  std::map<std::string, HostStats> hosts;
  std::map<std::string, std::pair<__int128, uint64_t>> hostLateness;
  for (Rank& r : ranks_) {
    RankStats& rs = r.stats;
    __int128 late = 0;
    for (const GroupRuns& g : r.groups) {
      const SeqSums& ss = sums[g.group];
      late += g.beginSum;
      for (const auto& [first, last] : g.runs) {
        const size_t lo = static_cast<size_t>(
            std::lower_bound(ss.seqs.begin(), ss.seqs.end(), first) - ss.seqs.begin());
        const size_t hi = static_cast<size_t>(
            std::upper_bound(ss.seqs.begin(), ss.seqs.end(), last) - ss.seqs.begin());
        late -= ss.earliest[hi] - ss.earliest[lo];
        rs.matchedCollectives += ss.matched[hi] - ss.matched[lo];
      }
    }
    rs.latenessMeanNs =
        rs.matchedCollectives ? static_cast<int64_t>(late / rs.matchedCollectives) : 0;
    const auto last = skew.lastArrivals.find(rs.rank);
    rs.timesLast = last == skew.lastArrivals.end() ? 0 : last->second;
    if (rs.matchedCollectives > 0)
      skew.clockUncertaintyNs = std::max(skew.clockUncertaintyNs, rs.clockUncertaintyNs);

    const std::string host = rs.host.empty() ? "?" : rs.host;
    HostStats& h = hosts[host];
    h.host = host;
    h.ranks.push_back(rs.rank);
    h.commNs += rs.commNs;
    h.tracedNs += rs.tracedNs;
    h.timesLast += rs.timesLast;
    hostLateness[host].first += late;
    hostLateness[host].second += rs.matchedCollectives;

    s.events += rs.events;
    s.droppedEvents += rs.dropped;
    if (rs.truncated) s.truncatedRanks.push_back(rs.rank);
    if (!rs.clockAligned) s.unalignedRanks.push_back(rs.rank);
    s.ranks.push_back(std::move(rs));
  }
  for (auto& [name, h] : hosts) {
    h.commShare = h.tracedNs > 0 ? static_cast<double>(h.commNs) / h.tracedNs : 0;
    const auto& [late, n] = hostLateness[name];
    h.latenessMeanNs = n ? static_cast<int64_t>(late / n) : 0;
    s.hosts.push_back(std::move(h));
  }
  std::sort(s.hosts.begin(), s.hosts.end(), [](const HostStats& a, const HostStats& b) {
    return a.latenessMeanNs != b.latenessMeanNs ? a.latenessMeanNs > b.latenessMeanNs
                                                : a.host < b.host;
  });

  // ---- the engines
  s.ddp = ddp_.finish();
  s.fsdp = fsdp_.finish();
  s.fsdpPeakBytes = fsdpPeakBytes_;
  s.fsdpShardedBytes = fsdpShardedBytes_;

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
  const RankStats* rank0 =
      !s.ranks.empty() && s.ranks.front().rank == 0 ? &s.ranks.front() : nullptr;
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

}  // namespace

Summary summarize(const TraceStore& store, const std::string& source) {
  SummaryBuilder builder;
  const int64_t worldSize = static_cast<int64_t>(store.ranks().size());
  for (const RankData& rank : store.ranks()) builder.add(reduceRank(store, rank, worldSize));
  Summary s = builder.finish(source, static_cast<int32_t>(worldSize), store.warnings());
  // Profiler traces of a torch DDP or FSDP2 job: the engine recovered from them, or why not.
  std::string why;
  if (s.ddp.iterationCount == 0 && holdsProfiledTorchDdp(store)) {
    s.ddp = analyzeDdp(store, &why);
    if (!why.empty()) s.warnings.push_back("torch DDP's buckets not recovered: " + why);
  }
  why.clear();
  if (s.fsdp.iterationCount == 0 && holdsProfiledTorchFsdp2(store)) {
    s.fsdp = analyzeFsdp(store, &why);
    if (!why.empty()) s.warnings.push_back("FSDP2's units not recovered: " + why);
  }
  return s;
}

Summary summarize(const trace::TraceSet& trace) {
  SummaryBuilder builder;
  for (const trace::RankTrace& rank : trace.ranks) builder.add(reduceRankTrace(rank));
  return builder.finish(trace.path,
                        std::max(static_cast<int32_t>(trace.ranks.size()), trace.worldSize()),
                        trace.warnings);
}

Summary summarizeTrace(const std::string& path, unsigned threads) {
  SummaryBuilder builder;
  std::mutex mutex;
  const trace::TraceScan scan = trace::scanTrace(path, threads, [&](trace::RankTrace&& rank) {
    RankPart part = reduceRankTrace(rank);
    rank = trace::RankTrace();  // its events go before this thread reads the next rank
    std::lock_guard<std::mutex> lock(mutex);
    builder.add(std::move(part));
  });
  return builder.finish(scan.path,
                        std::max(static_cast<int32_t>(scan.headers.size()), scan.worldSize()),
                        scan.warnings);
}

}  // namespace ringx::analysis
