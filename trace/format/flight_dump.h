// Flight recorder dumps: what every rank writes when a collective times out or
// fails, on SIGUSR1, or when asked (ringx.dump_flight_recorder), and what
// `ringx-trace why` and the viewer read back. One codec for both sides, like
// the trace stream's: the writer (backend/group/flight_recorder.cc) fills a
// FlightDump and calls writeFlightDump; readers call readFlightDumps.
//
// One JSON file per rank, DIR/flight-rank-<N>.json, holding all of the rank's
// ringx groups (N is the rank in the process's first group, the default group):
//
//   {"format": "ringx-flight-recorder", "version": 1, "job": "9f3c...",
//    "rank": 0, "world_size": 3, "host": "h", "pid": 123,
//    "reason": "allreduce #5 failed: ...", "steady_ns": ..., "wall_ns": ...,
//    "groups": [{"name": "world", "id": "9f3c...", "rank": 0, "size": 3,
//                "capacity": 2048, "recorded": 6, "next_seq": 6,
//                "entries": [{"seq": 5, "op": "allreduce", "state": "failed",
//                             "bytes": 4096, "dtype": "float32", "reduce_op": "SUM",
//                             "root": -1, "algorithm": "direct", "issue_ns": ...,
//                             "start_ns": ..., "end_ns": ..., "error": "..."}, ...]}]}
//
// "reduce_op" is the op the caller asked: "AVG" and "PREMUL_SUM" (with "premul_factor": 0.5)
// where the core ran a SUM; dumps before that said "SUM" for both (the same version 1: the
// key is optional, and readers show the value as it is).
//
// Times are the rank's steady clock (trace::nowNs); (steady_ns, wall_ns) were
// taken together at the dump, so wallNs() puts ranks of different hosts on one
// axis (as well as their wall clocks agree). "job" and a group's "id" are hashes
// of the group's connection token (never the token): dumps left in the same
// directory by another job, or groups of the same name from another job, do
// not mix. The file is written to a temporary name and renamed, so a reader
// never sees half a dump under the real name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ringx::trace {

inline constexpr const char* kFlightDumpFormat = "ringx-flight-recorder";
inline constexpr int kFlightDumpVersion = 1;

// A collective's life on one rank: issued by the caller, started by the
// thread that runs it, then finished or failed.
enum class FlightState : uint8_t { kIssued, kStarted, kFinished, kFailed };
const char* flightStateName(FlightState state);

struct FlightEntry {
  uint64_t id = 0;  // the recorder's write index: entries in the order they were made
  // Sequence number in the group, the same on every rank. For an entry still
  // issued it is the seq the call will get if every call before it runs.
  int64_t seq = -1;
  std::string op;  // "allreduce", "broadcast", ...
  FlightState state = FlightState::kIssued;
  uint64_t bytes = 0;       // as nccl-tests counts it; 0 when the caller did not say
  std::string dtype;        // "" until started
  std::string reduceOp;     // as asked ("AVG", "PREMUL_SUM"); "" for collectives that do not reduce
  double premulFactor = 0;  // when premultiplies()
  int32_t root = -1;        // -1 for collectives without one
  std::string algorithm;    // "" until finished
  int64_t issueNs = 0;      // steady ns; 0 = not known
  int64_t startNs = 0;      // 0 = not started
  int64_t endNs = 0;        // 0 = not ended
  std::string error;        // why it failed

  // The op is PREMUL_SUM, whose factor is premulFactor.
  bool premultiplies() const;
};

struct FlightGroup {
  std::string name;  // "world", torch's group number, ...
  std::string id;    // hash of the group's token: the same on every member
  int32_t rank = 0;  // this process's rank in the group
  int32_t size = 0;
  uint64_t capacity = 0;             // entries the ring keeps
  uint64_t recorded = 0;             // entries ever made (> capacity: the oldest were overwritten)
  int64_t nextSeq = 0;               // the seq the next collective to start will get
  std::vector<FlightEntry> entries;  // oldest first
};

struct FlightDump {
  std::string job;  // the first group's id
  int32_t rank = 0;
  int32_t worldSize = 0;
  std::string host;
  int64_t pid = 0;
  std::string reason;  // why it was written
  int64_t steadyNs = 0;
  int64_t wallNs = 0;
  std::vector<FlightGroup> groups;
  std::string source;  // the file it was read from (not written)

  // A steady time of this rank as Unix-epoch ns.
  int64_t wallNsOf(int64_t steady) const { return steady - steadyNs + wallNs; }
};

// The entry's reduce op as reports show it: "PREMUL_SUM(0.5)", "AVG", ...; "" when none.
std::string reduceOpText(const FlightEntry& entry);

// "flight-rank-<N>.json".
std::string flightDumpFileName(int32_t rank);
std::string formatFlightDump(const FlightDump& dump);
// Writes `dump` to `path` through a temporary file and a rename. Throws IoError.
void writeFlightDump(const FlightDump& dump, const std::string& path);
// Throws FormatError naming `source` for text that is not a dump.
FlightDump parseFlightDump(std::string_view text, const std::string& source);
// Whether `head` (the first bytes of a file) starts like a dump.
bool looksLikeFlightDump(std::string_view head);

struct FlightDumpSet {
  std::string path;
  std::vector<FlightDump> dumps;  // one per rank, by rank, all of one job
  std::vector<std::string> warnings;
};

// Reads a dump directory (every flight-rank-*.json in it) or one dump file.
// Files that do not parse, and dumps of another job than the newest dump's,
// become warnings. Throws IoError when `path` cannot be read at all; an empty
// set (no dumps) is for the caller to report.
FlightDumpSet readFlightDumps(const std::string& path);

}  // namespace ringx::trace
