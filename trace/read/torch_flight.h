// torch's own Flight Recorder dumps (ProcessGroupNCCL's, TORCH_NCCL_TRACE_BUFFER_SIZE > 0): the
// watchdog writes one per rank when a collective times out (a pickle, named by
// TORCH_NCCL_DEBUG_INFO_TEMP_FILE with the rank appended), and torch can dump the same as JSON.
// torch 2.13 records gloo's collectives too (TORCH_FR_BUFFER_SIZE, 2000 by default), but nothing
// writes them for gloo: a job dumps from its own code (torch._C._distributed_c10d._dump_fr_trace()
// for the pickle, _dump_fr_trace_json() for JSON). `ringx-trace why` reads a directory of them as
// it reads ringx's own dumps (flight_dump.h).
//
// What a dump holds (FR version 2.x): "pg_config" (each process group by its name, the same on
// every rank: its description and global ranks), "pg_status" (keyed by the rank's local pg_id:
// last_enqueued_collective, last_started_collective, last_completed_collective) and "entries"
// (the last collectives and point-to-point ops; the watchdog's dumps keep only those not yet
// retired, a dump asked for from code all of them: process_group (name, description),
// pg_id, collective_seq_id, p2p_seq_id, is_p2p, profiling_name "nccl:all_reduce", state
// "scheduled" | "started" | "completed", retired, input_sizes, input_dtypes, time_created_ns, ...).
// The pickles are read as plain data (pickle_data.h): one that asks for a class is refused.
//
// gloo's dumps (version 2.10, as torch 2.13 writes them) differ: no "rank"; "pg_config" has one
// entry with an empty name whose ranks are "[0, 1, ...]" on rank 0 and "[]" elsewhere, so it
// gives no group's members; every entry stays "scheduled" (gloo records no start or completion)
// and is retired when its work ends, timed out or not; the JSON form writes pg_status's
// numbers as strings.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trace/format/flight_dump.h"

namespace ringx::trace {

struct TorchFlightEntry {
  std::string group;  // the process group's name ("74"), the same on every rank
  std::string desc;   // its description ("default_pg", "undefined", a framework's name)
  bool p2p = false;
  bool retired = false;            // its work has ended (absent: not retired)
  int64_t seq = -1;                // collective_seq_id (p2p: p2p_seq_id)
  std::string op;                  // profiling_name: "nccl:all_to_all"
  std::string state;               // "scheduled", "started", "completed"
  std::vector<int64_t> inputSize;  // the first input's dims
  std::string dtype;               // the first input's
  // Wall-clock times: time_created_ns, and time_discovered_started_ns / _completed_ns where the
  // dump has them (NCCL's watchdog fills them in; gloo's are 0), else 0.
  int64_t createdNs = 0, startedNs = 0, completedNs = 0;

  // The op without its backend's prefix: "all_to_all" for "nccl:all_to_all".
  std::string call() const;
  // The first input's bytes (its dims times its dtype's size); 0 when either is unknown.
  uint64_t bytes() const;
  // Its state as a ringx dump says it. One retired with no state past "scheduled" (gloo marks
  // none) is finished here, as one that left the dump is; whether it was the one that timed out
  // is the hang report's to say (analysis/hang_report.h).
  FlightState flightState() const;
};

struct TorchFlightGroup {
  std::string name, desc;
  // Global ranks, in group-rank order: pg_config's, empty when it lists none (gloo's dumps).
  std::vector<int32_t> ranks;
  // The rank's pg_status for it, where the dumps tie its local pg_id to this name (an entry of
  // the group carries both; the default group is pg_id 0 on every rank).
  bool statusKnown = false;
  int64_t lastEnqueued = -1, lastStarted = -1, lastCompleted = -1;
};

struct TorchFlightDump {
  int32_t rank = -1;  // its "rank", else the number that ends its file's name
  std::string source, version, ncclVersion;
  std::string backend;  // what the entries' profiling names start with: "nccl", "gloo", ""
  std::vector<TorchFlightGroup> groups;
  std::vector<TorchFlightEntry> entries;
  // Every local pg_id in its pg_status is tied to a group's name: a group it has no status of is
  // one it recorded no collective in (its recorder keeps a status per group it recorded in;
  // torch 2.13's gloo dumps of a rank that issued none have an empty pg_status).
  bool statusComplete = false;
  // No entries and no status of any group (pg_config alone says nothing of what it did).
  bool empty() const {
    for (const TorchFlightGroup& g : groups)
      if (g.statusKnown) return false;
    return entries.empty() && statusComplete;
  }
};

struct TorchFlightSet {
  std::string path;
  std::vector<TorchFlightDump> dumps;  // by rank
  std::vector<std::string> warnings;
};

// A process group's members as the dumps together give them. pg_config lists them (NCCL's dumps);
// where it lists none (gloo's), the default group is every rank and another group the ranks whose
// dumps name it, in their pg_status or an entry (a rank keeps a status of each group it issued
// in; torch sorts a group's ranks, so their order is the group ranks'). `ringx-trace why` and the
// viewer take a group's size and each rank's place in it from here, and nowhere else.
struct TorchGroupMembers {
  std::string name, desc;
  std::vector<int32_t> ranks;  // global ranks, in group-rank order
  bool fromDumps = false;      // inferred: pg_config lists none
  bool p2p = false;            // some entry of it is a send or a recv
  bool collectives = false;    // some entry of it is a collective
  // Its group rank of a global rank; -1 for a rank outside it.
  int32_t groupRankOf(int32_t rank) const;
  // How a report and the viewer name it: "74 (EXPERT_MODEL_PARALLEL_GROUP)", the name alone
  // where it has no description or torch's "undefined".
  std::string label() const;
};

struct TorchJobGroups {
  int32_t worldSize = 0;                  // one past the highest rank a dump or pg_config names
  std::vector<TorchGroupMembers> groups;  // every group a dump names, by name
  const TorchGroupMembers* find(std::string_view name) const;
};

TorchJobGroups torchGroupMembers(const TorchFlightSet& set);

// Whether a file's first bytes (a few KiB) look like one torch Flight Recorder dump: a pickle, or
// a JSON object, that names a group's config or status, or an entry's profiling name, early on,
// and is no torch.profiler trace (whose distributedInfo has a pg_config too). readTorchFlightDumps
// decides from the whole file; this is for telling files apart cheaply.
bool looksLikeTorchFlightDump(std::string_view head);

// Reads every torch Flight Recorder dump in a directory (or one file): pickles and JSON files
// whose top level has "entries" or "pg_config". Files that are neither, or whose rank cannot be
// told, become warnings. A dump whose entries name no group for pg_id 0 (a rank that issued no
// collective) gets the default group's name from the others. Throws IoError when `path` cannot
// be read.
TorchFlightSet readTorchFlightDumps(const std::string& path);

}  // namespace ringx::trace
