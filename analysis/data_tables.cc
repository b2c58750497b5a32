// The trace as tables (data_tables.h).
#include "analysis/data_tables.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <string>
#include <vector>

#include "analysis/store_reading.h"
#include "analysis/trace_analyses.h"
#include "base/parquet_writer.h"

namespace ringx::analysis {
using namespace store_reading;

namespace {

using Type = TableSink::Type;

class DelimitedSink : public TableSink {
 public:
  DelimitedSink(std::ostream& out, Delimiter delimiter) : writer_(out, delimiter) {}
  void begin(const std::vector<std::pair<std::string, Type>>& columns) override {
    for (const auto& [name, type] : columns) writer_.field(name);
    writer_.endRow();
  }
  void cell(int64_t v) override { writer_.field(v); }
  void cell(double v) override { writer_.field(v); }
  void cell(std::string_view v) override { writer_.field(v); }
  void empty() override { writer_.empty(); }
  void endRow() override { writer_.endRow(); }
  void end() override {}

 private:
  DelimitedWriter writer_;
};

// Rows buffered by column, a row group written every rowGroup rows.
class ParquetSink : public TableSink {
 public:
  ParquetSink(std::ostream& out, size_t rowGroup)
      : out_(out), rowGroup_(std::max<size_t>(rowGroup, 1)) {}
  void begin(const std::vector<std::pair<std::string, Type>>& columns) override {
    std::vector<ParquetWriter::Column> schema;
    for (const auto& [name, type] : columns) {
      schema.push_back({name, type == Type::kInt      ? ParquetWriter::Type::kInt64
                              : type == Type::kDouble ? ParquetWriter::Type::kDouble
                                                      : ParquetWriter::Type::kString});
    }
    types_.clear();
    for (const auto& c : columns) types_.push_back(c.second);
    cells_.assign(columns.size(), {});
    writer_ = std::make_unique<ParquetWriter>(out_, std::move(schema));
  }
  void cell(int64_t v) override {
    ParquetWriter::Cells& c = next();
    c.ints.push_back(v);
    c.doubles.push_back(double(v));
    c.strings.emplace_back();
    c.present.push_back(1);
  }
  void cell(double v) override {
    ParquetWriter::Cells& c = next();
    c.ints.push_back(int64_t(v));
    c.doubles.push_back(v);
    c.strings.emplace_back();
    c.present.push_back(1);
  }
  void cell(std::string_view v) override {
    ParquetWriter::Cells& c = next();
    c.ints.push_back(0);
    c.doubles.push_back(0);
    c.strings.emplace_back(v);
    c.present.push_back(1);
  }
  void empty() override {
    ParquetWriter::Cells& c = next();
    c.ints.push_back(0);
    c.doubles.push_back(0);
    c.strings.emplace_back();
    c.present.push_back(0);
  }
  void endRow() override {
    while (column_ < cells_.size()) empty();  // a short row: the rest missing
    column_ = 0;
    if (++rows_ == rowGroup_) flush();
  }
  void end() override {
    flush();
    writer_->finish();
  }

 private:
  ParquetWriter::Cells& next() { return cells_[std::min(column_++, cells_.size() - 1)]; }
  void flush() {
    writer_->writeRowGroup(cells_, rows_);
    for (auto& c : cells_) c.clear();
    rows_ = 0;
  }
  std::ostream& out_;
  std::unique_ptr<ParquetWriter> writer_;
  std::vector<Type> types_;
  std::vector<ParquetWriter::Cells> cells_;
  size_t rowGroup_;
  size_t column_ = 0, rows_ = 0;
};

constexpr const char* kEventColumns[] = {"rank",     "track",  "kind",        "category", "name",
                                         "begin_ns", "end_ns", "duration_ns", "failed"};
constexpr Type kEventTypes[] = {Type::kInt,    Type::kString, Type::kString,
                                Type::kString, Type::kString, Type::kInt,
                                Type::kInt,    Type::kInt,    Type::kInt};

// An argument into a column of `type` (numbers as text in a text column).
void writeArgCell(TableSink& sink, const TraceStore& store, const ArgValue& a, Type type) {
  char text[32];
  switch (a.kind) {
    case ArgKind::kInt:
      if (type == Type::kInt) {
        sink.cell(a.intValue);
      } else if (type == Type::kDouble) {
        sink.cell(double(a.intValue));
      } else {
        sink.cell(
            std::string_view(text, size_t(std::to_chars(text, text + 32, a.intValue).ptr - text)));
      }
      break;
    case ArgKind::kDouble:
      if (type == Type::kString) {
        sink.cell(std::string_view(
            text, size_t(std::to_chars(text, text + 32, a.doubleValue).ptr - text)));
      } else {
        sink.cell(a.doubleValue);
      }
      break;
    case ArgKind::kString:
      sink.cell(store.str(a.stringId));
      break;
  }
}

}  // namespace

std::unique_ptr<TableSink> delimitedSink(std::ostream& out, Delimiter delimiter) {
  return std::make_unique<DelimitedSink>(out, delimiter);
}
std::unique_ptr<TableSink> parquetSink(std::ostream& out, size_t rowGroup) {
  return std::make_unique<ParquetSink>(out, rowGroup);
}

void writeEventTable(const TraceStore& store, TableSink& sink) {
  // The argument columns: every key an event carries, by name, and the kinds of its values.
  std::map<std::string, std::pair<uint32_t, int>> keys;  // name -> (id, kinds seen: bits)
  for (const RankData& rank : store.ranks()) {
    for (const Track& track : rank.tracks) {
      auto note = [&](const auto& event) {
        const model::ArgList args(rank, event);
        for (const ArgValue& a : args) {
          auto& [id, kinds] = keys[std::string(store.str(a.key))];
          id = a.key;
          kinds |= a.kind == ArgKind::kInt ? 1 : a.kind == ArgKind::kDouble ? 2 : 4;
        }
      };
      forAllSpans(track, [&](uint32_t, uint32_t, const Span& s) { note(s); });
      for (const Instant& i : track.instants) note(i);
    }
  }
  std::vector<std::pair<std::string, Type>> columns;
  for (size_t i = 0; i < std::size(kEventColumns); ++i)
    columns.emplace_back(kEventColumns[i], kEventTypes[i]);
  std::vector<Type> argTypes;
  std::map<uint32_t, size_t> column;  // key id -> its place among the argument columns
  for (const auto& entry : keys) {
    const std::string& name = entry.first;  // a plain name: lambdas cannot capture bindings
    const auto [id, kinds] = entry.second;
    const Type type = kinds == 1 ? Type::kInt : (kinds & 4) ? Type::kString : Type::kDouble;
    const bool taken =
        std::find_if(std::begin(kEventColumns), std::end(kEventColumns),
                     [&](const char* c) { return name == c; }) != std::end(kEventColumns);
    columns.emplace_back(taken ? "arg:" + name : name, type);
    column[id] = argTypes.size();
    argTypes.push_back(type);
  }
  sink.begin(columns);

  // Per rank, its events in time order (a span before an instant at the same time).
  struct Ref {
    int64_t begin;
    uint32_t track, level, index;
    bool instant;
  };
  std::vector<const ArgValue*> values(argTypes.size());
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
        sink.cell(int64_t{rank.rank});
        sink.cell(store.str(track.name));
        sink.cell(std::string_view(r.instant ? "instant" : "span"));
        sink.cell(event.category < store.categories().size()
                      ? std::string_view(store.categories()[event.category])
                      : std::string_view());
        sink.cell(store.str(event.name));
        sink.cell(begin);
        sink.cell(end);
        sink.cell(end - begin);
        sink.cell(int64_t{failed ? 1 : 0});
        std::fill(values.begin(), values.end(), nullptr);
        const model::ArgList args(rank, event);
        for (const ArgValue& a : args) values[column[a.key]] = &a;
        for (size_t c = 0; c < values.size(); ++c) {
          if (values[c]) {
            writeArgCell(sink, store, *values[c], argTypes[c]);
          } else {
            sink.empty();
          }
        }
        sink.endRow();
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
  sink.end();
}

void writeCollectiveTable(const TraceStore& store, TableSink& sink) {
  sink.begin({{"group", Type::kString},
              {"seq", Type::kInt},
              {"op", Type::kString},
              {"bytes", Type::kInt},
              {"group_size", Type::kInt},
              {"rank", Type::kInt},
              {"group_rank", Type::kInt},
              {"begin_ns", Type::kInt},
              {"end_ns", Type::kInt},
              {"duration_ns", Type::kInt},
              {"busbw_gbps", Type::kDouble},
              {"failed", Type::kInt},
              {"arrival_skew_ns", Type::kInt},
              {"last_arrival_rank", Type::kInt},
              {"slowest_rank", Type::kInt},
              {"mismatch", Type::kInt},
              {"missing_ranks", Type::kString}});
  auto known = [&](int64_t v) {
    if (v >= 0) {
      sink.cell(v);
    } else {
      sink.empty();
    }
  };
  for (const CollectiveRow& c : matchCollectives(store)) {
    std::string missing;  // "3 5": space-separated, as a column of numbers splits
    for (int32_t m : c.missingRanks) {
      if (!missing.empty()) missing += ' ';
      missing += std::to_string(m);
    }
    for (const CollectiveRank& r : c.ranks) {
      sink.cell(std::string_view(c.group));
      sink.cell(c.seq);
      sink.cell(r.op);
      known(r.bytes >= 0 ? r.bytes : c.bytes);
      known(c.groupSize > 0 ? c.groupSize : -1);
      sink.cell(int64_t{r.rank});
      known(r.groupRank);
      sink.cell(r.beginNs);
      sink.cell(r.endNs);
      sink.cell(r.durationNs);
      if (r.busbwGBps > 0) {
        sink.cell(r.busbwGBps);
      } else {
        sink.empty();
      }
      sink.cell(int64_t{r.failed ? 1 : 0});
      sink.cell(c.arrivalSkewNs);
      known(c.lastArrivalRank);
      known(c.slowestRank);
      sink.cell(int64_t{c.mismatch ? 1 : 0});
      sink.cell(std::string_view(missing));
      sink.endRow();
    }
  }
  sink.end();
}

void writeCounterTable(const TraceStore& store, TableSink& sink) {
  sink.begin({{"rank", Type::kInt},
              {"counter", Type::kString},
              {"time_ns", Type::kInt},
              {"value", Type::kDouble}});
  for (const RankData& rank : store.ranks()) {
    for (const model::CounterSeries& series : rank.counters) {
      for (size_t i = 0; i < series.times.size(); ++i) {
        sink.cell(int64_t{rank.rank});
        sink.cell(store.str(series.name));
        sink.cell(series.times[i]);
        sink.cell(series.values[i]);
        sink.endRow();
      }
    }
  }
  sink.end();
}

void writeEventTable(const TraceStore& store, std::ostream& out, Delimiter delimiter) {
  writeEventTable(store, *delimitedSink(out, delimiter));
}
void writeCollectiveTable(const TraceStore& store, std::ostream& out, Delimiter delimiter) {
  writeCollectiveTable(store, *delimitedSink(out, delimiter));
}
void writeCounterTable(const TraceStore& store, std::ostream& out, Delimiter delimiter) {
  writeCounterTable(store, *delimitedSink(out, delimiter));
}

}  // namespace ringx::analysis
