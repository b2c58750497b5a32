// Collectives matched across ranks, and hang suspects (see trace_analyses.h for what each computes
// and why).
#include "analysis/trace_analyses.h"

#include <algorithm>
#include <map>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "analysis/store_reading.h"
#include "base/error.h"
#include "trace/format/collective_key.h"

namespace ringx::analysis {
using namespace store_reading;

// ---- collectives ------------------------------------------------------------------

namespace {

// The arguments matching needs, read in one scan of a span's args.
struct CollectiveArgs {
  int64_t seq = -1, bytes = -1, groupRank = -1, groupSize = -1;
  uint32_t group = 0;
  bool error = false;
  CollectiveArgs(const RankData& rank, const Span& s, const Keys& k) {
    const ArgRange range(rank, s);
    for (const ArgValue* a = range.begin(); a != range.end(); ++a) {
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
  std::vector<analysis::Arrival> arrivals;
  int64_t longest = -1;
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
    arrivals.push_back(analysis::Arrival{r.rank, r.beginNs});
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
  const analysis::ArrivalSkew skew = analysis::arrivalSkew(arrivals);
  row.arrivalSkewNs = skew.skewNs;
  row.lastArrivalRank = skew.lastRank;
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

  // Visits every matchable span: f(rank, SpanRef, span, args, groupKey, groupName).
  // Two passes use it (find the rows, then fill them) rather than buffering every
  // span in between: the rows' own memory is the bulk of the cost already.
  auto forEachCollective = [&](auto&& f) {
    for (const RankData& rank : store.ranks()) {
      for (uint32_t t = 0; t < rank.tracks.size(); ++t) {
        const Track& track = rank.tracks[t];
        const std::string_view trackName = store.str(track.name);
        // The group of spans without a group argument (trace::collectiveGroup), keyed by
        // its id when interned, else by the track's id with the top bit set.
        const std::string_view trackGroup = trace::collectiveGroup({}, trackName);
        uint32_t trackGroupKey = store.strings().find(trackGroup);
        if (trackGroupKey == 0) trackGroupKey = track.name | 0x80000000u;
        forAllSpans(track, [&](uint32_t level, uint32_t index, const Span& s) {
          if (s.category != collective) return;
          const CollectiveArgs args(rank, s, keys);
          const std::string_view group =
              trace::collectiveGroup(args.group ? store.str(args.group) : "", trackName);
          const auto key = trace::collectiveKeyOf(
              store.str(s.name), args.seq, group, [&](std::string_view name) {
                return name == trackGroup ? trackGroupKey : args.group;
              });
          if (key) f(rank, SpanRef{rank.rank, t, level, index}, s, args, key->group, group);
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
  std::unordered_map<trace::CollectiveKey, uint32_t, trace::CollectiveKeyHash> rowOf;
  std::unordered_map<uint32_t, std::vector<int32_t>> members;
  std::vector<int32_t>* current = nullptr;
  uint32_t currentGroup = 0;
  forEachCollective([&](const RankData& rank, const SpanRef&, const Span& s,
                        const CollectiveArgs& args, uint32_t groupKey, std::string_view groupName) {
    auto [it, added] = rowOf.try_emplace(trace::CollectiveKey{groupKey, args.seq},
                                         static_cast<uint32_t>(keyOf.size()));
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

}  // namespace ringx::analysis
