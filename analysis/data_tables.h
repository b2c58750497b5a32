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
#pragma once

#include <ostream>

#include "base/delimited_text.h"
#include "trace/model/trace_store.h"

namespace ringx::analysis {

void writeEventTable(const model::TraceStore& store, std::ostream& out, Delimiter delimiter);
void writeCollectiveTable(const model::TraceStore& store, std::ostream& out, Delimiter delimiter);
void writeCounterTable(const model::TraceStore& store, std::ostream& out, Delimiter delimiter);

}  // namespace ringx::analysis
