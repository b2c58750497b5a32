// The flight recorder: every group keeps its last N collectives in a ring, with
// tracing on or off, so that a hang or a failure can be explained after the
// fact (PyTorch's NCCL flight recorder does the same). On a collective's
// failure or timeout, on a peer's failure notice, on SIGUSR1 and on
// ringx.dump_flight_recorder(), every ringx group of the process is written to
// RINGX_DUMP_DIR/flight-rank-<N>.json (trace/format/flight_dump.h), which
// `ringx-trace why DIR` reads.
//
// An entry's life: issue() on the caller's thread when torch hands ringx the
// call (state issued), start() on the thread that runs it, once Group::run has
// its sequence number (started), then finish() or fail(). Each slot is a
// sequence lock over relaxed-cost atomics: recording is a few plain stores and
// a clock read, no lock, no allocation, no system call (clock_gettime is vDSO);
// a snapshot from another thread retries a slot it caught mid-write. Error
// texts live beside the ring (failures are rare and may allocate).
//
// The seq of an entry still issued is a prediction: the collectives of the
// calls issued before it (its place in the issue count, kept in the slot), plus
// an offset that start() sets from the last queued call that started (right
// again when a call ran fewer collectives than it said: its job failed first)
// and that a call running ahead of queued ones (a Future callback's, issued
// with ahead = true, work_queue.h) moves on by its own collectives.
//
// RINGX_FLIGHT_RECORDER_ENTRIES sets N (default 2048, about 200 KiB a group);
// 0 turns recording and dumps off.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/types.h"
#include "trace/format/flight_dump.h"

namespace ringx {

class FlightRecorder {
 public:
  // A recorded entry: 1 + its write index; 0 is "none".
  using Entry = uint64_t;
  static constexpr size_t kDefaultEntries = 2048;
  // RINGX_FLIGHT_RECORDER_ENTRIES, else kDefaultEntries. Throws on text that is not a count.
  static size_t entriesFromEnvironment();

  // `id` names the group the same way on every member (a hash of its token).
  FlightRecorder(std::string groupName, std::string id, int rank, int size, size_t capacity);

  // Caller's thread: a call that will run `runs` collectives was issued; `op`
  // must be a static string ("allreduce"). `ahead`: it runs at once, before the
  // calls issued earlier and still queued.
  Entry issue(const char* op, uint64_t bytes, uint32_t runs = 1, bool ahead = false);
  // The running thread: the collective `seq` starts. `issued` is issue()'s entry
  // (0 when there was none, e.g. a C++ caller of Group::run, or the second
  // collective of a coalesced call); a new entry is made when it is 0 or was
  // overwritten. `bytes` 0 keeps what issue() said.
  // `reduceOp` as the caller asked it (AVG, PREMUL_SUM and its factor).
  Entry start(Entry issued, int64_t seq, const char* op, DataType dtype, bool reduces,
              const AskedReduce& reduceOp, int root, uint64_t bytes);
  void finish(Entry entry, const char* algorithm);
  void fail(Entry entry, const std::string& error);
  // An issued call whose job failed before it started a collective.
  void abandon(Entry entry, const std::string& error);

  // Everything the ring holds, oldest first; safe from any thread at any time.
  trace::FlightGroup snapshot() const;
  const std::string& id() const { return id_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  // A slot: `version` is odd while a writer is inside. Fields are atomics so
  // that a reader racing a writer is defined behaviour (and TSan-clean); the
  // version check throws away what it read if a write overlapped.
  struct Slot {
    std::atomic<uint64_t> version{0};
    std::atomic<uint64_t> id{0};      // which Entry the slot holds
    std::atomic<int64_t> seq{-1};     // -1 until it starts
    std::atomic<int64_t> issued{-1};  // its place in the issue count; -1: not counted
    std::atomic<const char*> op{nullptr};
    std::atomic<const char*> algorithm{nullptr};
    std::atomic<uint64_t> bytes{0};
    // state | dtype << 8 | reduceOp << 16 | kHasDtype | kReduces | scale << kScaleShift
    std::atomic<uint32_t> packed{0};
    std::atomic<double> factor{0};  // PREMUL_SUM's (scale kPremultiply)
    std::atomic<int32_t> root{-1};
    std::atomic<int64_t> issueNs{0};
    std::atomic<int64_t> startNs{0};
    std::atomic<int64_t> endNs{0};
  };
  struct Read;  // a slot's fields, copied out

  Slot& slotOf(Entry entry) { return slots_[(entry - 1) % capacity_]; }
  // Runs fill(slot) as one write of the slot's sequence lock.
  template <typename Fill>
  void write(Slot& slot, Fill&& fill);
  bool read(const Slot& slot, Read* out) const;
  // Takes the next entry's slot and writes every field of it (startNs 0: issued only).
  Entry append(int64_t seq, int64_t issued, const char* op, uint64_t bytes, uint32_t packed,
               double factor, int32_t root, int64_t issueNs, int64_t startNs);
  void setError(Entry entry, const std::string& error);
  void end(Entry entry, trace::FlightState state, const char* algorithm);

  const std::string name_;
  const std::string id_;
  const int rank_;
  const int size_;
  const size_t capacity_;
  std::unique_ptr<Slot[]> slots_;
  std::atomic<uint64_t> head_{0};       // entries made
  std::atomic<int64_t> issueCount_{0};  // collectives of the queued calls issued so far
  std::atomic<int64_t> offset_{0};      // seq = place in the issue count + offset_
  std::atomic<int64_t> nextSeq_{0};     // one past the last seq that started
  mutable std::mutex errorMutex_;
  std::deque<std::pair<Entry, std::string>> errors_;  // the latest few
};

// The process's recorders, and writing them out. Dumps name the process by its
// rank in the first group registered (the default group, whose ranks are the
// global ranks).
namespace flight {

// Adds a live group's recorder to what dumps write; the first one also starts
// the dump thread and the SIGUSR1 handler (installed only when SIGUSR1 has no
// handler already: a program's own stays).
void add(std::shared_ptr<FlightRecorder> recorder);
void remove(const FlightRecorder* recorder);

// RINGX_DUMP_DIR, else /tmp/ringx-flight-recorder-<user>.
std::string dumpDirectory();

// Writes every live recorder to `dir` (dumpDirectory() when empty) as
// flight-rank-<N>.json and returns the file's path. Throws IoError when it
// cannot, Error when there is nothing to write (no group, or recording off).
std::string dumpAll(const std::string& reason, const std::string& dir = "");

// For a collective that just failed: dumps at once and returns what its error
// message should say about it ("; flight recorder written to ...; run
// `ringx-trace why DIR`", or why there is none). Never throws.
std::string dumpAfterFailure(const std::string& reason);

// Asks the dump thread to dump soon (from any thread; a peer's failure notice).
// Skipped when a failure of this process dumps in the meantime.
void requestDump(const std::string& reason);

}  // namespace flight
}  // namespace ringx
