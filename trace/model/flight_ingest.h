// Ingest of flight recorder dumps (trace/format/flight_dump.h): each rank's
// last collectives become spans on its "comm:<group>" tracks with the same
// arguments a traced collective carries (seq, group, group_rank, group_size,
// bytes, dtype, ...), so that the collectives panel lines them up across ranks
// and its hang suspects name the rank that never arrived, as for a trace.
//
// A collective that had not ended when its rank dumped (started: stuck, or
// issued: queued) ends at the dump and carries flight_state; a failed one
// carries its error. Times are the ranks' wall clocks at the dump (so ranks of
// different hosts line up as well as their clocks agree), moved onto the
// aligned clock of a ringx trace loaded for the same rank.
#pragma once

#include "trace/format/flight_dump.h"
#include "trace/model/trace_store.h"

namespace ringx::model {

// The span argument with a flight recorder state that is not "finished":
// "started", "issued" or "failed".
inline constexpr const char* kFlightStateArg = "flight_state";

// Adds every dump's entries (call finalize() afterwards); the set's warnings
// become the store's.
void ingestFlightDumps(TraceStore& store, const trace::FlightDumpSet& set);

// What both dump ingests (this one, torch_flight_ingest.h) share.
// The argument keys a dump entry's span carries as a traced collective does.
struct FlightArgKeys {
  explicit FlightArgKeys(StringPool& strings);
  uint32_t seq, group, groupRank, groupSize, bytes, dtype, state;
};
// A dump's times are its rank's wall clock: a ringx trace of the rank, loaded
// first, says where that clock sits on the aligned axis (wallToAlignedNs); a
// dump alone is drawn on the wall clock.
void drawOnWallClock(RankData& rank);

}  // namespace ringx::model
