// Why a job hung or failed, from the flight recorder dumps its ranks wrote
// (flight_dump.h): what `ringx-trace why DIR` prints.
//
// Per group, the collective to look at is the first one (lowest seq) that did
// not finish on every rank. For it, every member of the group gets a verdict:
//  - never arrived: its program had not issued it (its last seq is lower). In
//    a hang this is the rank the others wait for;
//  - queued: issued, but its communication thread had not started it;
//  - stuck: started and not finished when it dumped;
//  - failed: with its error (a timeout, a lost peer, a mismatch);
//  - finished;
//  - no dump: the rank wrote nothing (killed, or its host is gone);
//  - called something else: at that seq it called another op, size or dtype
//    than the others (torch's dumps, where every entry's seq is sure).
// A rank that started the collective only after another had already given up
// is named as late: it is the one the others waited for, even though its own
// dump shows it failing too. Separately, collectives whose ranks disagree on
// the op, dtype, reduce op, root or size at the same seq are listed: the other
// classic cause of a hang.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace/format/flight_dump.h"
#include "trace/read/torch_flight.h"

namespace ringx::trace {

enum class HangVerdict { kFinished, kFailed, kStuck, kQueued, kNeverArrived, kNoDump, kOtherCall };
const char* hangVerdictName(HangVerdict verdict);  // "never arrived", "stuck", ...

struct HangRank {
  int32_t groupRank = 0;
  int32_t rank = -1;  // the process's rank (its dump's), -1 when it wrote none
  HangVerdict verdict = HangVerdict::kNoDump;
  std::string error;  // kFailed
  int64_t elapsedNs =
      0;  // kFailed: start to failure; kStuck: start to dump; kQueued: issue to dump
  // kNeverArrived (and kQueued): its latest collective that started, or -1.
  int64_t lastSeq = -1;
  std::string lastOp;
  FlightState lastState = FlightState::kIssued;
  int64_t lateNs = 0;      // > 0: started this long after lateAfter had given up
  int32_t lateAfter = -1;  // that group rank
  std::string call;        // kOtherCall: what it called instead ("all_gather 1.00 KiB Float")
  // kQueued: its backend records no start (gloo's Flight Recorder), so it may have been running.
  bool startUnrecorded = false;
};

// Ranks disagreeing on one seq: each distinct call and the group ranks that made it.
struct HangMismatch {
  int64_t seq = 0;
  std::vector<std::pair<std::string, std::vector<int32_t>>> calls;
};

struct GroupHang {
  std::string name;
  int32_t size = 0;
  // The dumps list no members (torch's gloo dumps): they are the ranks whose dumps name the group.
  bool membersFromDumps = false;
  int32_t dumped = 0;     // members with a dump
  bool complete = false;  // every dumped member finished every collective it recorded
  int64_t lastSeq = -1;   // complete: the highest seq recorded
  // Not complete: the first collective that did not finish everywhere.
  int64_t seq = -1;
  std::string op;
  std::string dtype;
  std::string reduceOp;  // as asked, with PREMUL_SUM's factor: "PREMUL_SUM(0.5)"
  uint64_t bytes = 0;
  int32_t root = -1;
  std::vector<HangRank> ranks;           // every member, by group rank (not complete only)
  std::vector<HangMismatch> mismatches;  // lowest seqs first, at most a few
};

struct HangReport {
  std::string producer = "ringx flight recorder";  // whose dumps: the report's first words
  std::string path;
  std::string job;  // "" when the dumps do not say
  int32_t worldSize = 0;
  std::vector<int32_t> dumpedRanks;
  std::vector<int32_t> missingRanks;                     // in [0, worldSize) with no dump
  std::vector<std::pair<int32_t, std::string>> reasons;  // per dump: rank, why it was written
  std::vector<GroupHang> groups;                         // problems first, then by name
  std::vector<std::string> warnings;
};

HangReport analyzeHang(const FlightDumpSet& set);

// The same report from torch's own Flight Recorder dumps (torch_flight.h). NCCL's hold only the
// ops not yet retired, and a rank whose GPU failed stops counting completions, so what each
// member enqueued (pg_status's last_enqueued_collective) decides a group's collective: when the
// members differ, the first one some member never enqueued (that member: never arrived; the
// others by their entry's state: queued for "scheduled", stuck for "started", failed for one
// retired without completing, else finished); members whose entries at one seq disagree (op,
// dtype, size) at a lower seq make that one the collective, and those in the minority called
// something else; when neither, the lowest one some member has not completed. A member whose
// dump says nothing of the group (an empty dump, or none) is named too (no dump).
// Members are pg_config's ranks; where it lists none (gloo's dumps), the default group is every
// rank, and another group the ranks whose dumps name it (its pg_status or entries). Groups of
// send/recv only (counted per peer, not per group) are not analysed.
HangReport analyzeTorchHang(const TorchFlightSet& set);
std::string formatHangReport(const HangReport& report);

// The report's pieces, as `why` prints them and the viewer's collectives panel shows them:
// - a culprit is a rank the others wait on: it never arrived, called something else, or said
//   nothing (no dump); its group comes first;
// - a group's first line: "group '0 (default_pg)' (4 ranks, 4 dumped): all_reduce seq 4
//   (1.0 KiB, Float) did not finish on every rank" (or that every collective finished);
// - its ranks by verdict, culprits first: "never arrived: ranks 2, 3", "queued: rank 0";
// - one rank's line: "rank 1 (process rank 2): never arrived (its last collective was ...)".
bool isHangCulprit(HangVerdict verdict);
std::string formatGroupHangTitle(const GroupHang& group);
std::vector<std::string> formatGroupHangVerdicts(const GroupHang& group);
std::string formatHangRank(const HangRank& rank);

}  // namespace ringx::trace
