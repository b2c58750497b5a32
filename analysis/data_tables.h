// The trace as tables, for the data tools people already use (pandas, a spreadsheet, SQL):
// `ringx-trace export --format csv` and Python's ringx.trace.load read these. Times are the
// store's aligned nanoseconds (every rank on rank 0's clock, as the viewer draws them).
//
//   events       one row per span or instant: rank, track, kind (span | instant), category,
//                name, begin_ns, end_ns, duration_ns, failed, then one column per argument key
//                any event carries (a key that is also a column above gets "arg:" before it)
//   collectives  the collectives matched across ranks (matchCollectives), one row per rank's
//                part: group, seq, op, bytes, group_size, rank, group_rank, begin_ns, end_ns,
//                duration_ns, busbw_gbps, failed, and the collective's arrival_skew_ns,
//                last_arrival_rank, slowest_rank, mismatch, missing_ranks
//   counters     one row per sample: rank, counter, time_ns, value
//
// Each table is one function that hands its rows to a sink: delimited text (CSV, TSV) or Parquet
// (base/parquet_writer.h), whose column types it declares first: an argument column is INT64 where
// every value is an integer, DOUBLE where they are numbers, else text.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/delimited_text.h"
#include "trace/model/trace_store.h"

namespace ringx::analysis {

class TableSink {
 public:
  enum class Type { kInt, kDouble, kString };
  virtual ~TableSink() = default;
  virtual void begin(const std::vector<std::pair<std::string, Type>>& columns) = 0;
  virtual void cell(int64_t value) = 0;
  virtual void cell(double value) = 0;
  virtual void cell(std::string_view value) = 0;
  virtual void empty() = 0;  // a missing value
  virtual void endRow() = 0;
  virtual void end() = 0;  // after the last row (Parquet's footer)
};
std::unique_ptr<TableSink> delimitedSink(std::ostream& out, Delimiter delimiter);
// Parquet: a row group every `rowGroup` rows (readers read a row group at a time).
std::unique_ptr<TableSink> parquetSink(std::ostream& out, size_t rowGroup = 65536);

void writeEventTable(const model::TraceStore& store, TableSink& sink);
void writeCollectiveTable(const model::TraceStore& store, TableSink& sink);
void writeCounterTable(const model::TraceStore& store, TableSink& sink);
// The same as delimited text.
void writeEventTable(const model::TraceStore& store, std::ostream& out, Delimiter delimiter);
void writeCollectiveTable(const model::TraceStore& store, std::ostream& out, Delimiter delimiter);
void writeCounterTable(const model::TraceStore& store, std::ostream& out, Delimiter delimiter);

}  // namespace ringx::analysis
