// torch's own Flight Recorder dumps (ProcessGroupNCCL's, TORCH_NCCL_TRACE_BUFFER_SIZE > 0): the
// watchdog writes one per rank when a collective times out (a pickle, named by
// TORCH_NCCL_DEBUG_INFO_TEMP_FILE with the rank appended), and torch can dump the same as JSON.
// `ringx-trace why` reads a directory of them as it reads ringx's own dumps (flight_dump.h).
//
// What a dump holds (FR version 2.x): "pg_config" (each process group by its name, the same on
// every rank: its description and global ranks), "pg_status" (keyed by the rank's local pg_id:
// last_enqueued_collective, last_started_collective, last_completed_collective) and "entries"
// (the collectives and point-to-point ops not yet retired: process_group (name, description),
// pg_id, collective_seq_id, p2p_seq_id, is_p2p, profiling_name "nccl:all_reduce", state
// "scheduled" | "started" | "completed", input_sizes, input_dtypes, time_created_ns, ...).
// The pickles are read as plain data (pickle_data.h): one that asks for a class is refused.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ringx::trace {

struct TorchFlightEntry {
  std::string group;  // the process group's name ("74"), the same on every rank
  bool p2p = false;
  int64_t seq = -1;                // collective_seq_id (p2p: p2p_seq_id)
  std::string op;                  // profiling_name: "nccl:all_to_all"
  std::string state;               // "scheduled", "started", "completed"
  std::vector<int64_t> inputSize;  // the first input's dims
  std::string dtype;               // the first input's
  int64_t createdNs = 0;
};

struct TorchFlightGroup {
  std::string name, desc;
  std::vector<int32_t> ranks;  // global ranks, in group-rank order
  // The rank's pg_status for it, where the dump ties its local pg_id to this name (an entry of
  // the group carries both; the default group is pg_id 0).
  bool statusKnown = false;
  int64_t lastEnqueued = -1, lastStarted = -1, lastCompleted = -1;
};

struct TorchFlightDump {
  int32_t rank = -1;  // its "rank", else the number that ends its file's name
  std::string source, version, ncclVersion;
  std::vector<TorchFlightGroup> groups;
  std::vector<TorchFlightEntry> entries;
  bool empty() const { return groups.empty() && entries.empty(); }
};

struct TorchFlightSet {
  std::string path;
  std::vector<TorchFlightDump> dumps;  // by rank
  std::vector<std::string> warnings;
};

// Reads every torch Flight Recorder dump in a directory (or one file): pickles and JSON files
// whose top level has "entries" or "pg_config". Files that are neither, or whose rank cannot be
// told, become warnings. Throws IoError when `path` cannot be read.
TorchFlightSet readTorchFlightDumps(const std::string& path);

}  // namespace ringx::trace
