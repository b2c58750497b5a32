// Ingest of torch's own Flight Recorder dumps (trace/read/torch_flight.h: NCCL's watchdog dumps,
// the pickles or JSON a gloo job wrote), as flight_ingest.h does for ringx's: each rank's entries
// become spans on its "comm:<group>" tracks with a traced collective's arguments (seq: the
// entry's collective_seq_id; group, by the label the hang report names it by; group_rank and
// group_size from the members the dumps give, torchGroupMembers, inferred where they list none;
// bytes, dtype, the first input's sizes), so that the collectives panel lines them up across
// ranks. An entry not finished when its rank dumped carries flight_state ("issued", "started"),
// and every entry torch's own state and retired flag.
//
// Times. A torch dump has no clock alignment and no time of its own: an entry is drawn on its
// rank's wall clock (moved onto the aligned clock of a ringx trace loaded for the same rank) from
// when it was discovered started, else created, to when it was discovered completed. Where no
// completion is recorded (gloo records none; NCCL's retired entries leave the dump), a finished
// entry is an instant, and one still pending lasts at least until the latest time its rank's
// dump records: it was pending when the dump was taken, after that.
//
// The store keeps the set (TraceStore::torchFlight) for the hang report the panel shows.
#pragma once

#include "trace/model/trace_store.h"
#include "trace/read/torch_flight.h"

namespace ringx::model {

// Span arguments of torch's own words: "scheduled", "started", "completed"; 1 once retired.
inline constexpr const char* kTorchStateArg = "torch_state";
inline constexpr const char* kTorchRetiredArg = "retired";
inline constexpr const char* kTorchInputSizeArg = "input_size";  // "4096x1x5120"

// Adds every dump's entries (call finalize() afterwards), its warnings as the store's, and keeps
// the set in the store.
void ingestTorchFlightDumps(TraceStore& store, trace::TorchFlightSet set);

}  // namespace ringx::model
