// The recorder: how events get from the threads that produce them (the
// communication thread, DDP/FSDP hooks, user code) into trace files and the live
// server without slowing those threads down.
//
// Each producing thread appends fixed-size slots to its own single-producer /
// single-consumer ring (no lock, no allocation, no encoding on the hot path: a
// few stores and one release). A background writer thread wakes every
// flushInterval, drains every ring, encodes the events (codec.h), samples the
// process RSS, and hands one Batch to every sink. When a ring is full the event
// is dropped and counted (a Dropped record tells readers), never waited for:
// tracing must not stall training.
//
// Names, tracks and argument keys are interned once into process-wide string
// ids (intern()); instrumentation sites cache the ids of their fixed names. The
// table lives as long as the process, so ids stay valid across stop()/start();
// every new stream starts with the whole table in its preamble.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "trace/format/codec.h"
#include "trace/record/sink.h"

namespace ringx::trace {

// Nanoseconds of this rank's steady clock: the clock of every event. Tests may
// shift it with RINGX_TRACE_FAKE_SKEW_NS (read once) to play a host whose clock
// is off; clock alignment must then recover the shift.
int64_t nowNs();
// Replaces RINGX_TRACE_FAKE_SKEW_NS (for tests that fork ranks).
void setFakeClockSkewForTesting(int64_t skewNs);

struct RecorderOptions {
  int rank = 0;
  int worldSize = 1;
  std::string host;                  // defaults to the hostname
  int flushIntervalMs = 10;          // how often the writer drains the threads' rings
  int rssIntervalMs = 10;            // RSS sampling period; 0 turns sampling off
  size_t threadBufferEvents = 4096;  // slots per producing thread (~2 MiB)
};

// Builders for the argument arrays handed to the record functions.
inline Arg intArg(uint32_t key, int64_t value) {
  Arg a;
  a.key = key;
  a.type = ArgType::kInt;
  a.intValue = value;
  return a;
}
inline Arg doubleArg(uint32_t key, double value) {
  Arg a;
  a.key = key;
  a.type = ArgType::kDouble;
  a.doubleValue = value;
  return a;
}
inline Arg stringArg(uint32_t key, uint32_t stringId) {
  Arg a;
  a.key = key;
  a.type = ArgType::kString;
  a.stringId = stringId;
  return a;
}

class Recorder {
 public:
  // Events with more arguments keep the first kMaxArgs.
  static constexpr uint32_t kMaxArgs = 14;

  // The process-wide recorder.
  static Recorder& instance();

  // The check every instrumentation site makes first: one relaxed load.
  static bool enabled() { return enabled_.load(std::memory_order_relaxed); }

  // Starts recording. Throws InvalidArgument when already running.
  void start(const RecorderOptions& options);
  // Adds a sink: it gets the preamble at once and every batch from then on.
  // Works before or during recording; the recorder owns the sink.
  void addSink(std::unique_ptr<Sink> sink);
  // Drains what was recorded, closes the sinks, stops the writer. Safe to call
  // when not running.
  void stop();
  bool running() const;
  // Told when recording has started (true) and is about to stop (false): a part
  // that must install something to see what it records, and remove it after (the observer of
  // torch's own engines: observe/), follows tracing here. One listener; nullptr: none.
  using StateListener = void (*)(bool recording);
  static void setStateListener(StateListener listener);
  // Blocks until everything recorded before the call reached the sinks.
  void flush();

  // The id of `text` (thread-safe; the same text always gets the same id).
  uint32_t intern(std::string_view text);

  void span(Category category, uint32_t track, uint32_t name, int64_t beginNs, int64_t endNs,
            const Arg* args = nullptr, uint32_t argCount = 0);
  void instant(Category category, uint32_t track, uint32_t name, int64_t atNs,
               const Arg* args = nullptr, uint32_t argCount = 0);
  void counter(Category category, uint32_t track, uint32_t name, int64_t atNs, double value,
               const Arg* args = nullptr, uint32_t argCount = 0);
  // A clock measurement (clock_sync in backend/group); written with the next batch.
  void clockSync(const ClockSync& sync);

  // Events dropped because a thread's ring was full, since the process started.
  uint64_t droppedEvents() const;
  int rank() const { return hotRank_.load(std::memory_order_relaxed); }
  // The options of the current (or last) recording (a copy: start() may change them).
  RecorderOptions options() const;

  struct ThreadRing;  // one producing thread's slots (recorder.cc)

 private:
  Recorder() = default;
  void record(const Event& event, const Arg* args, uint32_t argCount);
  ThreadRing& threadRing();
  void writerLoop();
  // Drains every ring into one batch and hands it to the sinks (writer thread,
  // or stop() after the writer ended). Caller holds writeMutex_.
  void writeBatchLocked(bool sampleRss);
  std::string preambleLocked();

  static std::atomic<bool> enabled_;
  static std::atomic<StateListener> stateListener_;

  // Written by start() under controlMutex_; read by the writer thread and options().
  RecorderOptions options_;
  // What the hot path (any thread) needs of the options, as atomics: start() writes them while
  // threads of an earlier recording may still be recording (a data race on options_ before).
  std::atomic<int> hotRank_{0};
  std::atomic<size_t> hotThreadBufferEvents_{RecorderOptions{}.threadBufferEvents};
  StreamHeader header_;

  std::mutex stringsMutex_;
  // A deque never moves its elements, so the map's views into them stay valid
  // and lookups need no allocation.
  std::deque<std::string> strings_{""};
  std::unordered_map<std::string_view, uint32_t> stringIds_;

  std::mutex ringsMutex_;
  std::vector<std::shared_ptr<ThreadRing>> rings_;

  // Held while a batch is built and delivered, and while sinks change.
  std::mutex writeMutex_;
  std::vector<std::unique_ptr<Sink>> sinks_;
  uint32_t stringsEmitted_ = 1;  // ids below this are in every sink's stream
  uint64_t droppedReported_ = 0;
  std::vector<ClockSync> pendingClockSyncs_;  // guarded by writeMutex_
  Encoder encoder_;
  int rssFd_ = -1;
  int64_t nextRssNs_ = 0;

  mutable std::mutex controlMutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  uint64_t flushRequests_ = 0;
  uint64_t flushesDone_ = 0;
  std::condition_variable flushed_;
  std::thread writer_;
  std::atomic<uint64_t> droppedTotal_{0};
};

// ---- Convenience for instrumentation (C++ users and the engines) ------------------

// Records a span from construction to destruction when recording is on.
//   trace::ScopedSpan span("forward", trace::Category::kUser);
//   span.arg("batch", 32);
class ScopedSpan {
 public:
  explicit ScopedSpan(std::string_view name, Category category = Category::kUser,
                      std::string_view track = track::kUser);
  ~ScopedSpan();
  ScopedSpan(const ScopedSpan&) = delete;
  ScopedSpan& operator=(const ScopedSpan&) = delete;
  void arg(std::string_view key, int64_t value);
  void arg(std::string_view key, double value);
  void arg(std::string_view key, std::string_view value);

 private:
  bool active_;
  Category category_;
  uint32_t track_ = 0;
  uint32_t name_ = 0;
  int64_t beginNs_ = 0;
  Arg args_[Recorder::kMaxArgs];
  uint32_t argCount_ = 0;
};

// A counter sample now (category memory for byte counts the engines report).
void counter(std::string_view name, double value, Category category = Category::kUser);
// Marks the start of training step `step` (an instant on the "steps" track).
void markStep(int64_t step);

}  // namespace ringx::trace
