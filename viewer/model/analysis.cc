// The viewer's analyses (see analysis.h for what each computes and why).
//
// Every function walks the store's levels once. Argument keys are resolved to
// string ids once per call and each span's args are scanned directly: the
// store's intArg() looks the key text up in the pool on every call, which would
// dominate a pass over a million spans.
#include "viewer/model/analysis.h"

#include <algorithm>
#include <map>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "backend/common/error.h"
#include "backend/trace/schema.h"
#include "backend/trace/summary.h"

namespace ringx::viewer {
namespace {

namespace targ = trace::arg;
using trace::busBandwidthFactor;
using trace::isPointToPoint;
using trace::percentile;

bool startsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// The well-known argument keys as string ids (0: no event carries that key).
struct Keys {
  explicit Keys(const StringPool& p)
      : bytes(p.find(targ::kBytes)),
        seq(p.find(targ::kSeq)),
        group(p.find(targ::kGroup)),
        groupRank(p.find(targ::kGroupRank)),
        groupSize(p.find(targ::kGroupSize)),
        error(p.find(targ::kError)),
        step(p.find(targ::kStep)),
        bucket(p.find(targ::kBucket)),
        params(p.find(targ::kParams)),
        firstGrad(p.find(targ::kFirstGradNs)),
        ready(p.find(targ::kReadyNs)),
        launch(p.find(targ::kLaunchNs)),
        wireStart(p.find(targ::kWireStartNs)),
        wireEnd(p.find(targ::kWireEndNs)),
        copyBack(p.find(targ::kCopyBackNs)),
        exposed(p.find(targ::kExposedNs)),
        phase(p.find(targ::kPhase)),
        prefetched(p.find(targ::kPrefetched)) {}
  uint32_t bytes, seq, group, groupRank, groupSize, error, step, bucket, params, firstGrad, ready,
      launch, wireStart, wireEnd, copyBack, exposed, phase, prefetched;
};

// A span's args as a range, clipped to what the rank holds.
struct ArgRange {
  const ArgValue* begin;
  const ArgValue* end;
  ArgRange(const RankData& rank, uint32_t first, uint16_t count) {
    const size_t n = rank.args.size();
    const size_t lo = std::min<size_t>(first, n);
    const size_t hi = std::min<size_t>(size_t{first} + count, n);
    begin = rank.args.data() + lo;
    end = rank.args.data() + hi;
  }
  ArgRange(const RankData& rank, const Span& s) : ArgRange(rank, s.firstArg, s.argCount) {}

  const ArgValue* find(uint32_t key) const {
    if (key == 0) return nullptr;
    for (const ArgValue* a = begin; a != end; ++a)
      if (a->key == key) return a;
    return nullptr;
  }
  int64_t integer(uint32_t key, int64_t fallback) const {
    const ArgValue* a = find(key);
    if (!a) return fallback;
    if (a->kind == ArgKind::kInt) return a->intValue;
    if (a->kind == ArgKind::kDouble) return static_cast<int64_t>(a->doubleValue);
    return fallback;
  }
  uint32_t string(uint32_t key) const {
    const ArgValue* a = find(key);
    return a && a->kind == ArgKind::kString ? a->stringId : 0;
  }
};

// Bytes per ns is GB/s. 0 when there is nothing to divide.
double busbw(std::string_view op, int64_t bytes, int64_t durationNs, int64_t groupSize) {
  if (bytes <= 0 || durationNs <= 0) return 0;
  return static_cast<double>(bytes) / static_cast<double>(durationNs) *
         busBandwidthFactor(op, groupSize);
}

// Nearest-rank median (as the summary's), reordering `values`; 0 when empty.
double median(std::vector<double>& values) {
  if (values.empty()) return 0;
  const size_t k = (values.size() + 1) / 2 - 1;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(k), values.end());
  return values[k];
}

int64_t meanOf(int64_t total, uint64_t n) { return n ? total / static_cast<int64_t>(n) : 0; }

// Visits the spans of `level` that overlap [t0, t1]: f(const Span&, uint32_t index).
template <typename F>
void forOverlapping(const std::vector<Span>& level, int64_t t0, int64_t t1, F&& f) {
  // Within a level spans are disjoint, so ends are sorted like begins.
  size_t i =
      static_cast<size_t>(std::lower_bound(level.begin(), level.end(), t0,
                                           [](const Span& s, int64_t t) { return s.end < t; }) -
                          level.begin());
  for (; i < level.size() && level[i].begin <= t1; ++i) f(level[i], static_cast<uint32_t>(i));
}

// Visits every span of a track: f(levelIndex, spanIndex, span).
template <typename F>
void forAllSpans(const Track& track, F&& f) {
  for (size_t l = 0; l < track.levels.size(); ++l) {
    const auto& level = track.levels[l];
    for (size_t i = 0; i < level.size(); ++i)
      f(static_cast<uint32_t>(l), static_cast<uint32_t>(i), level[i]);
  }
}

// ---- selection statistics -------------------------------------------------------

struct RankAccumulator {
  int32_t rank = 0;
  uint64_t count = 0;
  int64_t total = 0;
  std::vector<double> busbw;
};

struct NameAccumulator {
  uint32_t name = 0;
  std::vector<int64_t> durations;
  uint64_t failed = 0;
  int64_t bytes = 0;
  std::vector<RankAccumulator> ranks;  // appended as ranks are walked in order
};

class StatsCollector {
 public:
  explicit StatsCollector(const TraceStore& store)
      : store_(store),
        keys_(store.strings()),
        defaultGroupSize_(static_cast<int64_t>(store.ranks().size())) {}

  void add(NameAccumulator& acc, const RankData& rank, const Span& s) {
    if (acc.ranks.empty() || acc.ranks.back().rank != rank.rank) {
      acc.ranks.emplace_back();
      acc.ranks.back().rank = rank.rank;
    }
    RankAccumulator& r = acc.ranks.back();
    const int64_t d = s.duration();
    acc.durations.push_back(d);
    ++r.count;
    r.total += d;
    if (s.flags & kSpanFailed) ++acc.failed;
    if (s.argCount == 0 || keys_.bytes == 0) return;
    const ArgRange args(rank, s);
    const int64_t bytes = args.integer(keys_.bytes, -1);
    if (bytes <= 0) return;
    acc.bytes += bytes;
    if (d > 0) {
      const int64_t n = args.integer(keys_.groupSize, defaultGroupSize_);
      r.busbw.push_back(busbw(store_.str(s.name), bytes, d, n));
    }
  }

  EventStats finish(NameAccumulator& acc) const {
    EventStats e;
    e.nameId = acc.name;
    e.name = std::string(store_.str(acc.name));
    e.count = acc.durations.size();
    e.failed = acc.failed;
    e.bytes = acc.bytes;
    std::sort(acc.durations.begin(), acc.durations.end());
    for (int64_t d : acc.durations) e.totalNs += d;
    if (!acc.durations.empty()) {
      e.meanNs = meanOf(e.totalNs, e.count);
      e.p50Ns = percentile(acc.durations, 50);
      e.p99Ns = percentile(acc.durations, 99);
      e.minNs = acc.durations.front();
      e.maxNs = acc.durations.back();
    }
    std::vector<double> all;
    for (RankAccumulator& r : acc.ranks) {
      all.insert(all.end(), r.busbw.begin(), r.busbw.end());
      RankEventStats rs;
      rs.rank = r.rank;
      rs.count = r.count;
      rs.totalNs = r.total;
      rs.meanNs = meanOf(r.total, r.count);
      rs.busbwGBps = median(r.busbw);
      e.perRank.push_back(rs);
    }
    e.busbwGBps = median(all);
    return e;
  }

 private:
  const TraceStore& store_;
  Keys keys_;
  int64_t defaultGroupSize_;
};

}  // namespace

EventStats statsForName(const TraceStore& store, uint32_t nameId, int64_t t0, int64_t t1) {
  StatsCollector collector(store);
  NameAccumulator acc;
  acc.name = nameId;
  for (const RankData& rank : store.ranks())
    for (const Track& track : rank.tracks)
      for (const auto& level : track.levels)
        forOverlapping(level, t0, t1, [&](const Span& s, uint32_t) {
          if (s.name == nameId) collector.add(acc, rank, s);
        });
  return collector.finish(acc);
}

std::vector<EventStats> statsForRange(const TraceStore& store, int64_t t0, int64_t t1) {
  StatsCollector collector(store);
  // Name id -> accumulator slot; a flat table beats hashing a million spans.
  std::vector<int32_t> slotOf(store.strings().size(), -1);
  std::vector<NameAccumulator> accs;
  for (const RankData& rank : store.ranks())
    for (const Track& track : rank.tracks)
      for (const auto& level : track.levels)
        forOverlapping(level, t0, t1, [&](const Span& s, uint32_t) {
          if (s.name >= slotOf.size()) slotOf.resize(s.name + 1, -1);
          int32_t& slot = slotOf[s.name];
          if (slot < 0) {
            slot = static_cast<int32_t>(accs.size());
            accs.emplace_back();
            accs.back().name = s.name;
          }
          collector.add(accs[static_cast<size_t>(slot)], rank, s);
        });
  std::vector<EventStats> out;
  out.reserve(accs.size());
  for (NameAccumulator& acc : accs) out.push_back(collector.finish(acc));
  std::sort(out.begin(), out.end(), [](const EventStats& a, const EventStats& b) {
    return a.totalNs != b.totalNs ? a.totalNs > b.totalNs : a.name < b.name;
  });
  return out;
}

// ---- collectives ------------------------------------------------------------------

namespace {

// A collective's identity: its group (a string id; see groupKey below) and seq.
struct CollectiveKey {
  uint32_t group;
  int64_t seq;
  bool operator==(const CollectiveKey& o) const { return seq == o.seq && group == o.group; }
};
struct CollectiveKeyHash {
  size_t operator()(const CollectiveKey& k) const {
    uint64_t x = (uint64_t{k.group} << 40) ^ static_cast<uint64_t>(k.seq);
    x ^= x >> 33;  // murmur's finalizer: seqs are dense, the table wants spread bits
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return static_cast<size_t>(x);
  }
};

// The arguments matching needs, read in one scan of a span's args.
struct CollectiveArgs {
  int64_t seq = -1, bytes = -1, groupRank = -1, groupSize = -1;
  uint32_t group = 0;
  bool error = false;
  CollectiveArgs(const RankData& rank, const Span& s, const Keys& k) {
    const ArgRange range(rank, s);
    for (const ArgValue* a = range.begin; a != range.end; ++a) {
      if (a->key == k.error) error = true;
      if (a->kind == ArgKind::kString) {
        if (a->key == k.group) group = a->stringId;
        continue;
      }
      const int64_t v =
          a->kind == ArgKind::kInt ? a->intValue : static_cast<int64_t>(a->doubleValue);
      if (a->key == k.seq) {
        seq = v;
      } else if (a->key == k.bytes) {
        bytes = v;
      } else if (a->key == k.groupRank) {
        groupRank = v;
      } else if (a->key == k.groupSize) {
        groupSize = v;
      }
    }
  }
};

std::string joinRanks(const std::vector<int32_t>& ranks) {
  std::string out;
  for (int32_t r : ranks) out += strCat(out.empty() ? "" : ", ", r);
  return out;
}

std::string rankList(const std::vector<int32_t>& ranks) {
  return strCat(ranks.size() == 1 ? "rank " : "ranks ", joinRanks(ranks));
}

// Fills a row's derived fields from its ranks (sorted and deduplicated here).
void finishRow(CollectiveRow& row, const std::vector<int32_t>& members) {
  auto& ranks = row.ranks;
  std::sort(ranks.begin(), ranks.end(), [](const CollectiveRank& a, const CollectiveRank& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.beginNs < b.beginNs;
  });
  ranks.erase(std::unique(ranks.begin(), ranks.end(),
                          [](const CollectiveRank& a, const CollectiveRank& b) {
                            return a.rank == b.rank;
                          }),
              ranks.end());

  // Ops: the most common one names the row; any second op is a mismatch.
  std::vector<std::pair<std::string_view, size_t>> ops;  // (op, ranks), first-seen order
  int64_t earliest = ranks.front().beginNs, latest = ranks.front().beginNs;
  int64_t longest = -1;
  int lastCount = 0;
  std::vector<double> bandwidths;
  row.firstBeginNs = ranks.front().beginNs;
  row.lastEndNs = ranks.front().endNs;
  for (const CollectiveRank& r : ranks) {
    auto it = std::find_if(ops.begin(), ops.end(), [&](const auto& o) { return o.first == r.op; });
    if (it == ops.end()) {
      ops.emplace_back(r.op, 1);
    } else {
      ++it->second;
    }
    row.bytes = std::max(row.bytes, r.bytes);
    row.failed |= r.failed;
    row.firstBeginNs = std::min(row.firstBeginNs, r.beginNs);
    row.lastEndNs = std::max(row.lastEndNs, r.endNs);
    earliest = std::min(earliest, r.beginNs);
    if (r.beginNs > latest || lastCount == 0) {
      latest = r.beginNs;
      row.lastArrivalRank = r.rank;
      lastCount = 1;
    } else if (r.beginNs == latest) {
      ++lastCount;
    }
    if (r.durationNs > longest) {
      longest = r.durationNs;
      row.slowestRank = r.rank;
    }
    if (!r.failed && r.busbwGBps > 0) bandwidths.push_back(r.busbwGBps);
  }
  size_t most = 0;
  for (size_t i = 1; i < ops.size(); ++i)
    if (ops[i].second > ops[most].second) most = i;
  row.op = std::string(ops[most].first);
  row.mismatch = ops.size() > 1;
  if (row.mismatch) {
    for (const auto& [op, count] : ops) {
      std::vector<int32_t> opRanks;
      for (const CollectiveRank& r : ranks)
        if (r.op == op) opRanks.push_back(r.rank);
      row.opsSeen += strCat(row.opsSeen.empty() ? "" : "; ", op, " (", rankList(opRanks), ")");
    }
  }
  row.arrivalSkewNs = latest - earliest;
  if (ranks.size() < 2 || lastCount != 1) row.lastArrivalRank = -1;
  row.busbwGBps = median(bandwidths);

  // Missing: members of the group (ranks that recorded any of its collectives)
  // absent here, and as many more as group_size says.
  size_t j = 0;
  for (int32_t m : members) {
    while (j < ranks.size() && ranks[j].rank < m) ++j;
    if (j == ranks.size() || ranks[j].rank != m) row.missingRanks.push_back(m);
  }
  const int64_t bySize = row.groupSize > 0 ? row.groupSize - static_cast<int64_t>(ranks.size()) : 0;
  row.missingCount = std::max<int64_t>(bySize, static_cast<int64_t>(row.missingRanks.size()));
}

}  // namespace

std::vector<CollectiveRow> matchCollectives(const TraceStore& store) {
  const auto& categories = store.categories();
  const auto cat = std::find(categories.begin(), categories.end(),
                             trace::categoryName(trace::Category::kCollective));
  if (cat == categories.end()) return {};
  const uint8_t collective = static_cast<uint8_t>(cat - categories.begin());
  const Keys keys(store.strings());
  const int64_t defaultGroupSize = static_cast<int64_t>(store.ranks().size());
  const std::string_view commPrefix = trace::track::kCommPrefix;

  // Visits every matchable span: f(rank, SpanRef, span, args, groupKey, groupName).
  // Two passes use it (find the rows, then fill them) rather than buffering every
  // span in between: the rows' own memory is the bulk of the cost already.
  auto forEachCollective = [&](auto&& f) {
    for (const RankData& rank : store.ranks()) {
      for (uint32_t t = 0; t < rank.tracks.size(); ++t) {
        const Track& track = rank.tracks[t];
        const std::string_view trackName = store.str(track.name);
        // The group of spans without a group argument: the track's suffix, keyed
        // by its id when interned, else by the track's id with the top bit set.
        const std::string_view trackGroup = startsWith(trackName, commPrefix)
                                                ? trackName.substr(commPrefix.size())
                                                : std::string_view();
        uint32_t trackGroupKey = store.strings().find(trackGroup);
        if (trackGroupKey == 0) trackGroupKey = track.name | 0x80000000u;
        forAllSpans(track, [&](uint32_t level, uint32_t index, const Span& s) {
          if (s.category != collective) return;
          const CollectiveArgs args(rank, s, keys);
          if (args.seq < 0 || isPointToPoint(store.str(s.name))) return;
          f(rank, SpanRef{rank.rank, t, level, index}, s, args,
            args.group ? args.group : trackGroupKey,
            args.group ? store.str(args.group) : trackGroup);
        });
      }
    }
  };

  // Pass 1: the rows, by (group, seq), and each group's members (every rank with
  // a collective in it; ranks come in ascending order, so a rank is new to a
  // group when it differs from the group's last).
  struct RowKey {
    uint32_t group;
    std::string_view groupName;
    int64_t seq;
    int64_t firstBegin;
    uint32_t arrivals;
  };
  std::vector<RowKey> keyOf;
  std::vector<uint32_t> rowOfArrival;  // in visiting order
  std::unordered_map<CollectiveKey, uint32_t, CollectiveKeyHash> rowOf;
  std::unordered_map<uint32_t, std::vector<int32_t>> members;
  std::vector<int32_t>* current = nullptr;
  uint32_t currentGroup = 0;
  forEachCollective([&](const RankData& rank, const SpanRef&, const Span& s,
                        const CollectiveArgs& args, uint32_t groupKey, std::string_view groupName) {
    auto [it, added] =
        rowOf.try_emplace(CollectiveKey{groupKey, args.seq}, static_cast<uint32_t>(keyOf.size()));
    if (added) keyOf.push_back(RowKey{groupKey, groupName, args.seq, s.begin, 0});
    RowKey& key = keyOf[it->second];
    key.firstBegin = std::min(key.firstBegin, s.begin);
    ++key.arrivals;
    rowOfArrival.push_back(it->second);
    if (!current || groupKey != currentGroup) {
      current = &members[groupKey];
      currentGroup = groupKey;
    }
    if (current->empty() || current->back() != rank.rank) current->push_back(rank.rank);
  });

  // Rows in timeline order, each with room for exactly its arrivals.
  std::vector<uint32_t> order(keyOf.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const RowKey &x = keyOf[a], &y = keyOf[b];
    if (x.firstBegin != y.firstBegin) return x.firstBegin < y.firstBegin;
    if (x.groupName != y.groupName) return x.groupName < y.groupName;
    return x.seq < y.seq;
  });
  std::vector<uint32_t> position(keyOf.size());
  std::vector<CollectiveRow> rows(keyOf.size());
  for (uint32_t i = 0; i < order.size(); ++i) {
    const RowKey& key = keyOf[order[i]];
    position[order[i]] = i;
    rows[i].group = std::string(key.groupName);
    rows[i].seq = key.seq;
    rows[i].ranks.reserve(key.arrivals);
  }

  // Pass 2: the same spans in the same order, into their rows.
  size_t next = 0;
  forEachCollective([&](const RankData& rank, const SpanRef& ref, const Span& s,
                        const CollectiveArgs& args, uint32_t, std::string_view) {
    CollectiveRow& row = rows[position[rowOfArrival[next++]]];
    row.groupSize = std::max(row.groupSize, args.groupSize);
    CollectiveRank r;
    r.rank = rank.rank;
    r.groupRank = args.groupRank;
    r.op = store.str(s.name);
    r.beginNs = s.begin;
    r.endNs = s.end;
    r.durationNs = s.duration();
    r.bytes = args.bytes;
    r.failed = (s.flags & kSpanFailed) || args.error;
    if (!r.failed)
      r.busbwGBps = busbw(r.op, r.bytes, r.durationNs,
                          args.groupSize > 0 ? args.groupSize : defaultGroupSize);
    r.span = ref;
    row.ranks.push_back(r);
  });
  for (uint32_t i = 0; i < order.size(); ++i) finishRow(rows[i], members[keyOf[order[i]].group]);
  return rows;
}

CollectiveOverview overviewOf(const std::vector<CollectiveRow>& rows) {
  CollectiveOverview o;
  o.total = rows.size();
  struct Group {
    std::map<int32_t, int64_t> lastSeq;                 // rank -> highest seq it recorded
    std::vector<std::pair<int64_t, int64_t>> rowBySeq;  // (seq, row index)
  };
  std::map<std::string, Group> groups;
  for (size_t i = 0; i < rows.size(); ++i) {
    const CollectiveRow& row = rows[i];
    if (row.mismatch) ++o.mismatched;
    if (row.missingCount > 0) ++o.incomplete;
    if (row.failed) ++o.failed;
    if (o.maxSkewRow < 0 || row.arrivalSkewNs > o.maxSkewNs) {
      o.maxSkewNs = row.arrivalSkewNs;
      o.maxSkewRow = static_cast<int64_t>(i);
    }
    Group& g = groups[row.group];
    g.rowBySeq.emplace_back(row.seq, static_cast<int64_t>(i));
    for (const CollectiveRank& r : row.ranks) {
      auto [it, added] = g.lastSeq.try_emplace(r.rank, row.seq);
      if (!added) it->second = std::max(it->second, row.seq);
    }
  }
  for (auto& [name, g] : groups) {
    std::sort(g.rowBySeq.begin(), g.rowBySeq.end());
    int64_t highest = -1;
    for (const auto& [rank, seq] : g.lastSeq) highest = std::max(highest, seq);
    for (const auto& [rank, seq] : g.lastSeq) {
      if (seq >= highest) continue;
      // The group's first collective after this rank's last: it never got there.
      const auto next =
          std::upper_bound(g.rowBySeq.begin(), g.rowBySeq.end(), std::make_pair(seq, INT64_MAX));
      if (next == g.rowBySeq.end()) continue;
      const CollectiveRow& missing = rows[static_cast<size_t>(next->second)];
      HangSuspect h;
      h.rank = rank;
      h.group = name;
      h.lastSeq = seq;
      h.missingSeq = missing.seq;
      h.op = missing.op;
      h.othersBeganNs = missing.firstBeginNs;
      h.row = next->second;
      for (const CollectiveRank& r : missing.ranks) h.arrivedRanks.push_back(r.rank);
      h.description = strCat("rank ", rank, " never arrived at ", h.op, " seq ", h.missingSeq,
                             " of group ", name.empty() ? "?" : name, " (",
                             rankList(h.arrivedRanks), " did", "; its last was seq ", seq, ")");
      o.hangSuspects.push_back(std::move(h));
    }
  }
  return o;
}

// ---- DDP --------------------------------------------------------------------------

namespace {

// Phase spans of one (rank, step) on the "ddp" or "fsdp" track.
struct Phases {
  int64_t forwardBegin = 0, forward = 0, backwardBegin = 0, backwardEnd = 0, backward = 0,
          optimizer = 0;
  bool hasBackward = false, hasForward = false, hasOptimizer = false;
};

// The names of the engines' phase spans as ids.
struct PhaseNames {
  explicit PhaseNames(const StringPool& p)
      : forward(p.find("forward")), backward(p.find("backward")), optimizer(p.find("optimizer")) {}
  uint32_t forward, backward, optimizer;
  // Adds a phase span to its step's phases; false when it is none of them.
  bool add(std::unordered_map<int64_t, Phases>& steps, const Span& s, int64_t step) const {
    if (s.name == 0) return false;
    if (s.name == forward) {
      Phases& p = steps[step];
      p.forwardBegin = p.hasForward ? std::min(p.forwardBegin, s.begin) : s.begin;
      p.forward += s.duration();
      p.hasForward = true;
    } else if (s.name == backward) {
      Phases& p = steps[step];
      p.backwardBegin = p.hasBackward ? std::min(p.backwardBegin, s.begin) : s.begin;
      p.backwardEnd = std::max(p.backwardEnd, s.end);
      p.backward += s.duration();
      p.hasBackward = true;
    } else if (s.name == optimizer) {
      Phases& p = steps[step];
      p.optimizer += s.duration();
      p.hasOptimizer = true;
    } else {
      return false;
    }
    return true;
  }
};

// The steps that have a backward span (the iterations), ascending.
std::vector<int64_t> sortedSteps(const std::unordered_map<int64_t, Phases>& steps) {
  std::vector<int64_t> out;
  for (const auto& [step, p] : steps)
    if (p.hasBackward) out.push_back(step);
  std::sort(out.begin(), out.end());
  return out;
}

int64_t positive(int64_t v) { return std::max<int64_t>(0, v); }
int64_t difference(int64_t later, int64_t earlier) {
  return later > 0 && earlier > 0 ? positive(later - earlier) : 0;
}

}  // namespace

DdpAnalysis analyzeDdp(const TraceStore& store) {
  DdpAnalysis d;
  const Keys keys(store.strings());
  const PhaseNames phases(store.strings());
  const uint32_t bucketName = store.strings().find("bucket");
  const uint32_t rebuildName = store.strings().find("bucket_rebuild");
  const std::string_view bucketPrefix = trace::track::kDdpBucketPrefix;

  struct BucketTotals {
    DdpBucketAverage avg;
    int64_t readyOffset = 0, launchDelay = 0, wire = 0, exposed = 0, hiddenExposed = 0;
    uint64_t withOffset = 0;
  };
  std::map<int64_t, BucketTotals> buckets;
  int64_t wireTotal = 0, hiddenExposedTotal = 0;
  int64_t forward = 0, optimizer = 0;
  uint64_t forwards = 0, optimizers = 0;

  for (const RankData& rank : store.ranks()) {
    std::unordered_map<int64_t, Phases> steps;
    std::vector<std::pair<int64_t, DdpBucketSample>> samples;  // (step, sample)
    for (uint32_t t = 0; t < rank.tracks.size(); ++t) {
      const Track& track = rank.tracks[t];
      if (track.kind == TrackKind::kDdp) {
        forAllSpans(track, [&](uint32_t, uint32_t, const Span& s) {
          if (s.name != 0 && s.name == rebuildName) {
            ++d.rebuilds;
            return;
          }
          phases.add(steps, s, ArgRange(rank, s).integer(keys.step, -1));
        });
      } else if (track.kind == TrackKind::kDdpBucket) {
        // The track's own index, should a span lack its bucket argument.
        const std::string_view suffix = store.str(track.name).substr(bucketPrefix.size());
        int64_t trackBucket = 0;
        for (char c : suffix) trackBucket = c >= '0' && c <= '9' ? trackBucket * 10 + (c - '0') : 0;
        forAllSpans(track, [&](uint32_t level, uint32_t index, const Span& s) {
          if (bucketName == 0 || s.name != bucketName) return;
          const ArgRange a(rank, s);
          DdpBucketSample b;
          b.bucket = a.integer(keys.bucket, trackBucket);
          b.bytes = a.integer(keys.bytes, 0);
          b.params = a.integer(keys.params, 0);
          b.seq = a.integer(keys.seq, -1);
          b.beginNs = s.begin;
          b.endNs = s.end;
          b.firstGradNs = a.integer(keys.firstGrad, 0);
          b.readyNs = a.integer(keys.ready, 0);
          b.launchNs = a.integer(keys.launch, 0);
          b.wireStartNs = a.integer(keys.wireStart, 0);
          b.wireEndNs = a.integer(keys.wireEnd, 0);
          b.copyBackNs = a.integer(keys.copyBack, 0);
          b.exposedNs = positive(a.integer(keys.exposed, 0));
          b.launchDelayNs = difference(b.launchNs, b.readyNs);
          b.wireNs = difference(b.wireEndNs, b.wireStartNs);
          b.hiddenShare =
              b.wireNs > 0 ? 1.0 - static_cast<double>(std::min(b.exposedNs, b.wireNs)) / b.wireNs
                           : 0;
          b.span = SpanRef{rank.rank, t, level, index};
          samples.emplace_back(a.integer(keys.step, -1), b);
        });
      }
    }

    const std::vector<int64_t> order = sortedSteps(steps);
    const size_t first = d.iterations.size();
    std::unordered_map<int64_t, size_t> iterationOf;
    for (int64_t step : order) {
      const Phases& p = steps[step];
      DdpIteration it;
      it.rank = rank.rank;
      it.step = step;
      it.forwardBeginNs = p.forwardBegin;
      it.forwardNs = p.forward;
      it.backwardBeginNs = p.backwardBegin;
      it.backwardEndNs = p.backwardEnd;
      it.backwardNs = p.backward;
      it.optimizerNs = p.optimizer;
      if (p.hasForward) {
        forward += p.forward;
        ++forwards;
      }
      if (p.hasOptimizer) {
        optimizer += p.optimizer;
        ++optimizers;
      }
      iterationOf[step] = d.iterations.size();
      d.iterations.push_back(std::move(it));
    }
    for (auto& [step, b] : samples) {
      auto found = iterationOf.find(step);
      DdpIteration* it = found == iterationOf.end() ? nullptr : &d.iterations[found->second];
      if (it && b.readyNs > 0) b.readyOffsetNs = b.readyNs - it->backwardBeginNs;
      BucketTotals& bt = buckets[b.bucket];
      bt.avg.bucket = b.bucket;
      ++bt.avg.samples;
      bt.avg.bytes = b.bytes;
      bt.avg.params = b.params;
      if (it && b.readyNs > 0) {
        bt.readyOffset += b.readyOffsetNs;
        ++bt.withOffset;
      }
      bt.launchDelay += b.launchDelayNs;
      bt.wire += b.wireNs;
      bt.exposed += b.exposedNs;
      bt.hiddenExposed += std::min(b.exposedNs, b.wireNs);
      wireTotal += b.wireNs;
      hiddenExposedTotal += std::min(b.exposedNs, b.wireNs);
      if (it) {
        it->exposedNs = std::max(it->exposedNs, b.exposedNs);
        it->wireNs += b.wireNs;
        it->buckets.push_back(b);
      }
    }
    for (size_t i = first; i < d.iterations.size(); ++i) {
      auto& bs = d.iterations[i].buckets;
      std::sort(bs.begin(), bs.end(), [](const DdpBucketSample& a, const DdpBucketSample& b) {
        return a.bucket < b.bucket;
      });
    }
  }

  int64_t backward = 0, exposed = 0;
  for (const DdpIteration& it : d.iterations) {
    backward += it.backwardNs;
    exposed += it.exposedNs;
  }
  d.forwardMeanNs = meanOf(forward, forwards);
  d.backwardMeanNs = meanOf(backward, d.iterations.size());
  d.optimizerMeanNs = meanOf(optimizer, optimizers);
  d.exposedMeanNs = meanOf(exposed, d.iterations.size());
  d.hiddenShare = wireTotal > 0 ? 1.0 - static_cast<double>(hiddenExposedTotal) / wireTotal : 0;
  for (auto& [index, bt] : buckets) {
    DdpBucketAverage a = bt.avg;
    a.readyOffsetMeanNs = meanOf(bt.readyOffset, bt.withOffset);
    a.launchDelayMeanNs = meanOf(bt.launchDelay, a.samples);
    a.wireMeanNs = meanOf(bt.wire, a.samples);
    a.exposedMeanNs = meanOf(bt.exposed, a.samples);
    a.hiddenShare = bt.wire > 0 ? 1.0 - static_cast<double>(bt.hiddenExposed) / bt.wire : 0;
    d.buckets.push_back(a);
  }
  return d;
}

// ---- FSDP -------------------------------------------------------------------------

FsdpAnalysis analyzeFsdp(const TraceStore& store) {
  FsdpAnalysis f;
  const StringPool& pool = store.strings();
  const Keys keys(pool);
  const PhaseNames phases(pool);
  const uint32_t allGather = pool.find("all_gather"), reshard = pool.find("reshard"),
                 reduceScatter = pool.find("reduce_scatter"), allreduce = pool.find("allreduce"),
                 backwardValue = pool.find("backward");
  const std::string_view unitPrefix = trace::track::kFsdpUnitPrefix;

  struct UnitTotals {
    FsdpUnitAnalysis u;
    int64_t gather = 0, gatherWire = 0, forward = 0, backward = 0, reduceScatter = 0, allreduce = 0;
    bool seen = false;
  };
  std::unordered_map<uint32_t, UnitTotals> units;  // by track name id (shared by every rank)
  int64_t forward = 0, backward = 0, optimizer = 0, exposed = 0;
  uint64_t forwards = 0, optimizers = 0;

  for (const RankData& rank : store.ranks()) {
    std::unordered_map<int64_t, Phases> steps;
    std::unordered_map<int64_t, FsdpIteration> perStep;
    for (const Track& track : rank.tracks) {
      if (track.kind == TrackKind::kFsdp) {
        forAllSpans(track, [&](uint32_t, uint32_t, const Span& s) {
          phases.add(steps, s, ArgRange(rank, s).integer(keys.step, -1));
        });
        continue;
      }
      if (track.kind != TrackKind::kFsdpUnit) continue;
      UnitTotals& ut = units[track.name];
      if (!ut.seen) {
        ut.u.unit = std::string(store.str(track.name).substr(unitPrefix.size()));
        ut.u.firstBeginNs = INT64_MAX;
        ut.seen = true;
      }
      FsdpUnitAnalysis& u = ut.u;
      forAllSpans(track, [&](uint32_t, uint32_t, const Span& s) {
        u.firstBeginNs = std::min(u.firstBeginNs, s.begin);
        if (s.name == 0) return;
        const ArgRange a(rank, s);
        const int64_t wire = difference(a.integer(keys.wireEnd, 0), a.integer(keys.wireStart, 0));
        const int64_t bytes = a.integer(keys.bytes, 0);
        if (s.name == allGather) {
          const int64_t waited = positive(a.integer(keys.exposed, 0));
          const bool prefetched = a.integer(keys.prefetched, 0) != 0;
          ++u.gathers;
          if (a.string(keys.phase) == backwardValue && backwardValue != 0) {
            ++u.backwardGathers;
          } else {
            ++u.forwardGathers;
          }
          u.prefetched += prefetched;
          u.gatherBytes = std::max(u.gatherBytes, bytes);
          u.gatherBytesTotal += bytes;
          u.exposedTotalNs += waited;
          ut.gather += s.duration();
          ut.gatherWire += wire;
          FsdpIteration& it = perStep[a.integer(keys.step, -1)];
          ++it.gathers;
          it.prefetched += prefetched;
          it.gatherBytes += bytes;
          it.gatherWireNs += wire;
          it.exposedNs += waited;
        } else if (s.name == phases.forward) {
          ++u.forwards;
          ut.forward += s.duration();
        } else if (s.name == phases.backward) {
          ++u.backwards;
          ut.backward += s.duration();
        } else if (s.name == reshard) {
          ++u.reshards;
        } else if (s.name == reduceScatter || s.name == allreduce) {
          if (s.name == reduceScatter) {
            ++u.reduceScatters;
            u.reduceScatterBytes = std::max(u.reduceScatterBytes, bytes);
            ut.reduceScatter += wire;
          } else {
            ++u.allreduces;
            ut.allreduce += wire;
          }
          FsdpIteration& it = perStep[a.integer(keys.step, -1)];
          ++it.reductions;
          it.reduceBytes += bytes;
          it.reduceWireNs += wire;
        }
      });
    }
    for (int64_t step : sortedSteps(steps)) {
      const Phases& p = steps[step];
      auto found = perStep.find(step);
      FsdpIteration it = found == perStep.end() ? FsdpIteration{} : found->second;
      it.rank = rank.rank;
      it.step = step;
      it.forwardBeginNs = p.forwardBegin;
      it.forwardNs = p.forward;
      it.backwardBeginNs = p.backwardBegin;
      it.backwardNs = p.backward;
      it.optimizerNs = p.optimizer;
      if (p.hasForward) {
        forward += p.forward;
        ++forwards;
      }
      if (p.hasOptimizer) {
        optimizer += p.optimizer;
        ++optimizers;
      }
      backward += p.backward;
      exposed += it.exposedNs;
      f.iterations.push_back(it);
    }
  }

  f.forwardMeanNs = meanOf(forward, forwards);
  f.backwardMeanNs = meanOf(backward, f.iterations.size());
  f.optimizerMeanNs = meanOf(optimizer, optimizers);
  f.exposedMeanNs = meanOf(exposed, f.iterations.size());
  for (auto& [id, ut] : units) {
    FsdpUnitAnalysis u = ut.u;
    if (u.firstBeginNs == INT64_MAX) u.firstBeginNs = 0;
    u.gatherMeanNs = meanOf(ut.gather, u.gathers);
    u.gatherWireMeanNs = meanOf(ut.gatherWire, u.gathers);
    u.exposedMeanNs = meanOf(u.exposedTotalNs, u.gathers);
    u.forwardMeanNs = meanOf(ut.forward, u.forwards);
    u.backwardMeanNs = meanOf(ut.backward, u.backwards);
    u.reduceScatterMeanNs = meanOf(ut.reduceScatter, u.reduceScatters);
    u.allreduceMeanNs = meanOf(ut.allreduce, u.allreduces);
    f.units.push_back(std::move(u));
  }
  std::sort(
      f.units.begin(), f.units.end(), [](const FsdpUnitAnalysis& a, const FsdpUnitAnalysis& b) {
        return a.firstBeginNs != b.firstBeginNs ? a.firstBeginNs < b.firstBeginNs : a.unit < b.unit;
      });
  return f;
}

// ---- memory -----------------------------------------------------------------------

std::vector<MemoryPeak> memoryPeaks(const TraceStore& store) {
  std::vector<MemoryPeak> out;
  for (const RankData& rank : store.ranks()) {
    const size_t first = out.size();
    for (const CounterSeries& c : rank.counters) {
      if (c.values.empty()) continue;
      MemoryPeak p;
      p.rank = rank.rank;
      p.counter = std::string(store.str(c.name));
      p.peakValue = c.maxValue;  // finalize() keeps the first time the maximum was reached
      p.peakTimeNs = c.maxTime;
      p.samples = c.values.size();
      out.push_back(std::move(p));
    }
    std::sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
              [](const MemoryPeak& a, const MemoryPeak& b) { return a.counter < b.counter; });
  }
  return out;
}

namespace {

// What a DDP bucket was doing at t, from its time arguments.
const char* bucketState(const ArgRange& a, const Keys& keys, int64_t t) {
  const int64_t ready = a.integer(keys.ready, 0), wireStart = a.integer(keys.wireStart, 0),
                wireEnd = a.integer(keys.wireEnd, 0);
  if (ready > 0 && t < ready) return "filling";
  if (wireStart > 0 && t < wireStart) return "waiting to launch";
  if (wireEnd > 0 && t <= wireEnd) return "on the wire";
  if (wireEnd > 0) return "copy back";
  return nullptr;
}

// How far back a level is searched for a unit's last gather or reshard: a unit
// has a handful of spans per iteration, so the answer is always near.
constexpr size_t kGatherLookback = 256;

}  // namespace

std::vector<std::string> aliveAt(const TraceStore& store, int32_t rankId, int64_t t) {
  std::vector<std::string> out;
  const RankData* rank = store.findRank(rankId);
  if (!rank) return out;
  const Keys keys(store.strings());
  const uint32_t allGather = store.strings().find("all_gather");
  const uint32_t reshard = store.strings().find("reshard");
  const std::string_view bucketPrefix = trace::track::kDdpBucketPrefix;
  const std::string_view unitPrefix = trace::track::kFsdpUnitPrefix;

  for (const Track& track : rank->tracks) {
    const std::string_view trackName = store.str(track.name);
    if (track.kind == TrackKind::kDdpBucket) {
      for (const auto& level : track.levels) {
        forOverlapping(level, t, t, [&](const Span& s, uint32_t) {
          const ArgRange a(*rank, s);
          const int64_t index = a.integer(keys.bucket, -1);
          std::string label = index >= 0 ? strCat("bucket ", index)
                                         : strCat("bucket ", trackName.substr(bucketPrefix.size()));
          if (const char* state = bucketState(a, keys, t)) label += strCat(" (", state, ")");
          out.push_back(std::move(label));
        });
      }
    } else if (track.kind == TrackKind::kFsdpUnit) {
      const std::string_view unit = trackName.substr(unitPrefix.size());
      std::vector<std::pair<int64_t, std::string_view>> covering;  // (begin, name)
      // The latest gather or reshard that began at or before t: the parameters
      // are held from a gather until the next reshard.
      const Span* latest = nullptr;
      for (const auto& level : track.levels) {
        forOverlapping(level, t, t, [&](const Span& s, uint32_t) {
          covering.emplace_back(s.begin, store.str(s.name));
        });
        size_t i = static_cast<size_t>(
            std::upper_bound(level.begin(), level.end(), t,
                             [](int64_t v, const Span& s) { return v < s.begin; }) -
            level.begin());
        for (size_t k = 0; i > 0 && k < kGatherLookback; ++k) {
          const Span& s = level[--i];
          if (s.name == 0 || (s.name != allGather && s.name != reshard)) continue;
          if (!latest || latest->begin < s.begin) latest = &s;
          break;
        }
      }
      if (!covering.empty()) {
        std::sort(covering.begin(), covering.end());
        std::vector<std::string_view> names;  // nested repeats once
        std::string text;
        for (const auto& [begin, name] : covering) {
          if (std::find(names.begin(), names.end(), name) != names.end()) continue;
          names.push_back(name);
          text += strCat(text.empty() ? "" : ", ", name);
        }
        out.push_back(strCat(unit, " (", text, ")"));
      } else if (latest && latest->name == allGather && latest->end <= t) {
        out.push_back(strCat(unit, " (gathered)"));
      }
    }
  }
  return out;
}

}  // namespace ringx::viewer
