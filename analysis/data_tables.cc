// The trace as tables (data_tables.h).
#include "analysis/data_tables.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "analysis/store_reading.h"
#include "analysis/trace_analyses.h"

namespace ringx::analysis {
using namespace store_reading;

namespace {

constexpr const char* kEventColumns[] = {"rank",     "track",  "kind",        "category", "name",
                                         "begin_ns", "end_ns", "duration_ns", "failed"};

void writeArg(DelimitedWriter& row, const TraceStore& store, const ArgValue& a) {
  switch (a.kind) {
    case ArgKind::kInt:
      row.field(a.intValue);
      break;
    case ArgKind::kDouble:
      row.field(a.doubleValue);
      break;
    case ArgKind::kString:
      row.field(store.str(a.stringId));
      break;
  }
}

}  // namespace

void writeEventTable(const TraceStore& store, std::ostream& out, Delimiter delimiter) {
  // The argument columns: every key an event carries, by name.
  std::map<std::string, uint32_t> keys;
  for (const RankData& rank : store.ranks()) {
    for (const Track& track : rank.tracks) {
      auto note = [&](const auto& event) {
        const model::ArgList args(rank, event);
        for (const ArgValue& a : args) keys.emplace(std::string(store.str(a.key)), a.key);
      };
      forAllSpans(track, [&](uint32_t, uint32_t, const Span& s) { note(s); });
      for (const Instant& i : track.instants) note(i);
    }
  }
  std::vector<uint32_t> keyIds;
  std::map<uint32_t, size_t> column;  // key id -> its place among the argument columns
  DelimitedWriter row(out, delimiter);
  for (const char* name : kEventColumns) row.field(name);
  for (const auto& [name, id] : keys) {
    const bool taken =
        std::find_if(std::begin(kEventColumns), std::end(kEventColumns),
                     [&](const char* c) { return name == c; }) != std::end(kEventColumns);
    row.field(taken ? "arg:" + name : name);
    column[id] = keyIds.size();
    keyIds.push_back(id);
  }
  row.endRow();

  // Per rank, its events in time order (a span before an instant at the same time).
  struct Ref {
    int64_t begin;
    uint32_t track, level, index;
    bool instant;
  };
  std::vector<const ArgValue*> values(keyIds.size());
  for (const RankData& rank : store.ranks()) {
    std::vector<Ref> refs;
    for (uint32_t t = 0; t < rank.tracks.size(); ++t) {
      const Track& track = rank.tracks[t];
      forAllSpans(track, [&](uint32_t level, uint32_t index, const Span& s) {
        refs.push_back({s.begin, t, level, index, false});
      });
      for (uint32_t i = 0; i < track.instants.size(); ++i) {
        refs.push_back({track.instants[i].time, t, 0, i, true});
      }
    }
    std::stable_sort(refs.begin(), refs.end(), [](const Ref& a, const Ref& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.instant < b.instant;
    });
    for (const Ref& r : refs) {
      const Track& track = rank.tracks[r.track];
      auto emit = [&](const auto& event, int64_t begin, int64_t end, bool failed) {
        row.field(int64_t{rank.rank}).field(store.str(track.name));
        row.field(r.instant ? "instant" : "span");
        row.field(event.category < store.categories().size()
                      ? std::string_view(store.categories()[event.category])
                      : std::string_view());
        row.field(store.str(event.name)).field(begin).field(end).field(end - begin);
        row.field(int64_t{failed ? 1 : 0});
        std::fill(values.begin(), values.end(), nullptr);
        const model::ArgList args(rank, event);
        for (const ArgValue& a : args) values[column[a.key]] = &a;
        for (const ArgValue* a : values) {
          if (a) {
            writeArg(row, store, *a);
          } else {
            row.empty();
          }
        }
        row.endRow();
      };
      if (r.instant) {
        const Instant& i = track.instants[r.index];
        emit(i, i.time, i.time, false);
      } else {
        const Span& s = track.levels[r.level][r.index];
        emit(s, s.begin, s.end, (s.flags & model::kSpanFailed) != 0);
      }
    }
  }
}

void writeCollectiveTable(const TraceStore& store, std::ostream& out, Delimiter delimiter) {
  DelimitedWriter row(out, delimiter);
  for (const char* name :
       {"group", "seq", "op", "bytes", "group_size", "rank", "group_rank", "begin_ns", "end_ns",
        "duration_ns", "busbw_gbps", "failed", "arrival_skew_ns", "last_arrival_rank",
        "slowest_rank", "mismatch", "missing_ranks"}) {
    row.field(name);
  }
  row.endRow();
  auto known = [&](int64_t v) -> DelimitedWriter& { return v >= 0 ? row.field(v) : row.empty(); };
  for (const CollectiveRow& c : matchCollectives(store)) {
    std::string missing;  // "3 5": space-separated, as a column of numbers splits
    for (int32_t m : c.missingRanks) {
      if (!missing.empty()) missing += ' ';
      missing += std::to_string(m);
    }
    for (const CollectiveRank& r : c.ranks) {
      row.field(c.group).field(c.seq).field(r.op);
      known(r.bytes >= 0 ? r.bytes : c.bytes);
      if (c.groupSize > 0) {
        row.field(c.groupSize);
      } else {
        row.empty();
      }
      row.field(int64_t{r.rank});
      known(r.groupRank);
      row.field(r.beginNs).field(r.endNs).field(r.durationNs);
      if (r.busbwGBps > 0) {
        row.field(r.busbwGBps);
      } else {
        row.empty();
      }
      row.field(int64_t{r.failed ? 1 : 0}).field(c.arrivalSkewNs);
      known(c.lastArrivalRank);
      known(c.slowestRank);
      row.field(int64_t{c.mismatch ? 1 : 0}).field(missing);
      row.endRow();
    }
  }
}

void writeCounterTable(const TraceStore& store, std::ostream& out, Delimiter delimiter) {
  DelimitedWriter row(out, delimiter);
  for (const char* name : {"rank", "counter", "time_ns", "value"}) row.field(name);
  row.endRow();
  for (const RankData& rank : store.ranks()) {
    for (const model::CounterSeries& series : rank.counters) {
      for (size_t i = 0; i < series.times.size(); ++i) {
        row.field(int64_t{rank.rank}).field(store.str(series.name));
        row.field(series.times[i]).field(series.values[i]);
        row.endRow();
      }
    }
  }
}

}  // namespace ringx::analysis
