// Ingest of ringx's own trace streams (backend/trace) into the viewer's store:
// files and directories through trace_dir.h, live streams through the same
// RankTrace a LiveStream decodes into. Every time is moved onto rank 0's clock
// with the rank's ClockModel (alignment.h), the same mapping ringx-trace export
// uses, so the viewer and Perfetto line events up identically.
#pragma once

#include <cstddef>

#include "backend/trace/alignment.h"
#include "backend/trace/trace_dir.h"
#include "viewer/model/trace_store.h"

namespace ringx::viewer {

// Adds rank.events[fromEvent, end) to `store` (call finalize() afterwards) and
// returns the index to continue from. Rank metadata (host, pid, truncation,
// clock state, dropped count) is (re)set from `rank` each call.
size_t ingestRankTrace(TraceStore& store, const trace::RankTrace& rank,
                       const trace::ClockModel& clock, size_t fromEvent = 0);

// Adds a whole job's trace (its warnings become the store's) and finalizes.
void ingestTraceSet(TraceStore& store, const trace::TraceSet& set);

}  // namespace ringx::viewer
