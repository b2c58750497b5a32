// Ingest of ringx's own trace streams (trace/format/codec.h) into the trace model's store:
// files and directories through trace_dir.h, live streams through the same
// RankTrace a LiveStream decodes into. Every time is moved onto rank 0's clock
// with the rank's ClockModel (alignment.h), the same mapping ringx-trace export
// uses, so the viewer and Perfetto line events up identically.
//
// Collectives are joined across ranks by flow arrows, the same chains the
// export writes as Chrome flows (trace/read/collective_chains.h: from the
// first rank to begin the collective to the last, so the arrow head lands on
// the rank the others waited for and the chain's width is the arrival skew).
#pragma once

#include <cstddef>
#include <vector>

#include "trace/model/trace_store.h"
#include "trace/read/alignment.h"
#include "trace/read/collective_chains.h"
#include "trace/read/trace_dir.h"

namespace ringx::model {

// Adds rank.events[fromEvent, end) to `store` (call finalize() afterwards) and
// returns the index to continue from. Rank metadata (host, pid, truncation,
// clock state, dropped count) is (re)set from `rank` each call. Collective
// spans go into `chains` too when given (their track and name handles are the
// store's string ids); addCollectiveFlows() turns what it hands out into arrows.
size_t ingestRankTrace(TraceStore& store, const trace::RankTrace& rank,
                       const trace::ClockModel& clock, size_t fromEvent = 0,
                       trace::CollectiveChains* chains = nullptr);

// A collective span seen while ingesting one rank, for the chains across ranks.
struct CollectiveSighting {
  uint32_t group = 0;  // store string id
  int64_t seq = 0;
  int64_t groupSize = 0;
  trace::CollectiveArrival arrival;
};

// The same into `data`, which may be a rank built apart from the store by a
// parallel load's worker (TraceStore::adoptRank); collective spans go to
// `sightings` when given.
size_t ingestRankTraceInto(TraceStore& store, RankData& data, const trace::RankTrace& rank,
                           const trace::ClockModel& clock, size_t fromEvent,
                           std::vector<CollectiveSighting>* sightings);

// One arrow per consecutive pair of arrivals of each chain.
void addCollectiveFlows(TraceStore& store, const std::vector<trace::CollectiveChain>& chains);

// Adds a whole job's trace (its warnings become the store's, its collectives
// flows, complete or not) and finalizes.
void ingestTraceSet(TraceStore& store, const trace::TraceSet& set);

}  // namespace ringx::model
