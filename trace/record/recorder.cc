#include "trace/record/recorder.h"

#include <fcntl.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/deadline.h"

namespace ringx::trace {

namespace {
std::atomic<int64_t> fakeSkewNs{[] {
  const char* env = std::getenv("RINGX_TRACE_FAKE_SKEW_NS");
  return env != nullptr ? std::strtoll(env, nullptr, 10) : 0ll;
}()};
}  // namespace

int64_t nowNs() { return steadyNs() + fakeSkewNs.load(std::memory_order_relaxed); }

void setFakeClockSkewForTesting(int64_t skewNs) { fakeSkewNs.store(skewNs); }

namespace {
int64_t wallNs() {
  timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

std::string hostName() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}
}  // namespace

struct Recorder::ThreadRing {
  struct Slot {
    Event event;
    Arg args[kMaxArgs];
  };
  explicit ThreadRing(size_t capacity)
      : slots(new Slot[std::max<size_t>(capacity, 16)]), capacity(std::max<size_t>(capacity, 16)) {}
  std::unique_ptr<Slot[]> slots;
  const size_t capacity;
  alignas(64) std::atomic<uint64_t> head{0};  // next slot the writer reads
  alignas(64) std::atomic<uint64_t> tail{0};  // next slot the thread fills
  std::atomic<uint64_t> dropped{0};
};

std::atomic<bool> Recorder::enabled_{false};
std::atomic<Recorder::StateListener> Recorder::stateListener_{nullptr};

Recorder& Recorder::instance() {
  // Never destroyed: threads may still record while the process exits.
  static Recorder* recorder = new Recorder();
  return *recorder;
}

bool Recorder::running() const { return enabled(); }

uint32_t Recorder::intern(std::string_view text) {
  std::lock_guard<std::mutex> lock(stringsMutex_);
  auto it = stringIds_.find(text);
  if (it != stringIds_.end()) return it->second;
  const auto id = static_cast<uint32_t>(strings_.size());
  strings_.emplace_back(text);
  stringIds_.emplace(strings_.back(), id);
  return id;
}

// ---- hot path -----------------------------------------------------------------------

thread_local std::shared_ptr<Recorder::ThreadRing> tlsRing;

Recorder::ThreadRing& Recorder::threadRing() {
  if (!tlsRing) {
    tlsRing = std::make_shared<ThreadRing>(hotThreadBufferEvents_.load(std::memory_order_relaxed));
    std::lock_guard<std::mutex> lock(ringsMutex_);
    rings_.push_back(tlsRing);
  }
  return *tlsRing;
}

void Recorder::record(const Event& event, const Arg* args, uint32_t argCount) {
  ThreadRing& ring = threadRing();
  const uint64_t tail = ring.tail.load(std::memory_order_relaxed);
  if (tail - ring.head.load(std::memory_order_acquire) >= ring.capacity) {
    ring.dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  ThreadRing::Slot& slot = ring.slots[tail % ring.capacity];
  slot.event = event;
  slot.event.rank = hotRank_.load(std::memory_order_relaxed);
  slot.event.argCount = std::min(argCount, kMaxArgs);
  std::copy(args, args + slot.event.argCount, slot.args);
  ring.tail.store(tail + 1, std::memory_order_release);
}

namespace {
Event makeEvent(EventKind kind, Category category, uint32_t track, uint32_t name, int64_t beginNs,
                int64_t endNs) {
  Event e;
  e.kind = kind;
  e.category = category;
  e.track = track;
  e.name = name;
  e.beginNs = beginNs;
  e.endNs = std::max(beginNs, endNs);
  return e;
}
}  // namespace

void Recorder::span(Category category, uint32_t track, uint32_t name, int64_t beginNs,
                    int64_t endNs, const Arg* args, uint32_t argCount) {
  if (!enabled()) return;
  record(makeEvent(EventKind::kSpan, category, track, name, beginNs, endNs), args, argCount);
}

void Recorder::instant(Category category, uint32_t track, uint32_t name, int64_t atNs,
                       const Arg* args, uint32_t argCount) {
  if (!enabled()) return;
  record(makeEvent(EventKind::kInstant, category, track, name, atNs, atNs), args, argCount);
}

void Recorder::counter(Category category, uint32_t track, uint32_t name, int64_t atNs, double value,
                       const Arg* args, uint32_t argCount) {
  if (!enabled()) return;
  Event e = makeEvent(EventKind::kCounter, category, track, name, atNs, atNs);
  e.value = value;
  record(e, args, argCount);
}

void Recorder::clockSync(const ClockSync& sync) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(writeMutex_);
  pendingClockSyncs_.push_back(sync);
}

uint64_t Recorder::droppedEvents() const { return droppedTotal_.load(); }

// ---- writer -----------------------------------------------------------------------

void Recorder::start(const RecorderOptions& options) {
  std::lock_guard<std::mutex> control(controlMutex_);
  RINGX_CHECK(!writer_.joinable(), "ringx tracing is already recording (rank ", options_.rank,
              "); call stop() before starting it again");
  options_ = options;
  if (options_.host.empty()) options_.host = hostName();
  if (options_.flushIntervalMs <= 0) options_.flushIntervalMs = 10;
  hotRank_.store(options_.rank, std::memory_order_relaxed);
  hotThreadBufferEvents_.store(options_.threadBufferEvents, std::memory_order_relaxed);
  header_ = StreamHeader{};
  header_.rank = options_.rank;
  header_.worldSize = options_.worldSize;
  header_.pid = ::getpid();
  header_.host = options_.host;
  header_.startSteadyNs = nowNs();
  header_.startWallNs = wallNs();
  {
    std::lock_guard<std::mutex> write(writeMutex_);
    // Events left from an earlier recording (recorded while it stopped) are stale.
    std::lock_guard<std::mutex> rings(ringsMutex_);
    for (auto& ring : rings_) ring->head.store(ring->tail.load(std::memory_order_acquire));
    droppedReported_ = 0;
    for (auto& ring : rings_) droppedReported_ += ring->dropped.load();
    pendingClockSyncs_.clear();
    rssFd_ = options_.rssIntervalMs > 0 ? ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC) : -1;
    nextRssNs_ = 0;
  }
  stopping_ = false;
  enabled_.store(true);
  writer_ = std::thread([this] { writerLoop(); });
  if (StateListener listener = stateListener_.load()) listener(true);
}

void Recorder::setStateListener(StateListener listener) { stateListener_.store(listener); }

RecorderOptions Recorder::options() const {
  std::lock_guard<std::mutex> control(controlMutex_);
  return options_;
}

void Recorder::addSink(std::unique_ptr<Sink> sink) {
  RINGX_CHECK(running(), "start the recorder before adding a sink");
  std::lock_guard<std::mutex> lock(writeMutex_);
  sink->begin(preambleLocked());
  sinks_.push_back(std::move(sink));
}

std::string Recorder::preambleLocked() {
  Encoder preamble;
  preamble.magic();
  preamble.header(header_);
  std::lock_guard<std::mutex> lock(stringsMutex_);
  for (uint32_t id = 1; id < stringsEmitted_; ++id) preamble.string(id, strings_[id]);
  return preamble.bytes();
}

void Recorder::stop() {
  if (StateListener listener = stateListener_.load(); listener && running()) listener(false);
  {
    std::lock_guard<std::mutex> control(controlMutex_);
    if (!writer_.joinable()) return;
    enabled_.store(false);
    stopping_ = true;
    wake_.notify_all();
  }
  writer_.join();
  {
    std::lock_guard<std::mutex> write(writeMutex_);
    writeBatchLocked(false);  // anything recorded while the writer finished
    for (auto& sink : sinks_) {
      try {
        sink->close();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "ringx trace: closing a sink failed: %s\n", e.what());
      }
    }
    sinks_.clear();
    if (rssFd_ >= 0) ::close(rssFd_);
    rssFd_ = -1;
  }
  // Never with writeMutex_ held: start() takes controlMutex_ and then writeMutex_.
  std::lock_guard<std::mutex> control(controlMutex_);
  stopping_ = false;
  flushed_.notify_all();
}

void Recorder::flush() {
  std::unique_lock<std::mutex> lock(controlMutex_);
  if (!writer_.joinable()) return;
  const uint64_t target = ++flushRequests_;
  wake_.notify_all();
  flushed_.wait(lock, [&] { return flushesDone_ >= target || !writer_.joinable() || stopping_; });
}

void Recorder::writerLoop() {
  // Background work: a batch-scheduled thread does not preempt the
  // communication threads when it wakes (they may be spinning on every core).
  sched_param param{};
  ::sched_setscheduler(0, SCHED_BATCH, &param);
  std::unique_lock<std::mutex> lock(controlMutex_);
  for (;;) {
    wake_.wait_for(lock, std::chrono::milliseconds(options_.flushIntervalMs),
                   [&] { return stopping_ || flushRequests_ > flushesDone_; });
    const bool stop = stopping_;
    const uint64_t requested = flushRequests_;
    lock.unlock();
    {
      std::lock_guard<std::mutex> write(writeMutex_);
      writeBatchLocked(true);
    }
    lock.lock();
    flushesDone_ = requested;
    flushed_.notify_all();
    if (stop) return;
  }
}

void Recorder::writeBatchLocked(bool sampleRss) {
  Batch batch;
  encoder_.clear();

  // Events first: every string id they use was interned before they were
  // recorded, so the string snapshot taken after this includes them all.
  std::vector<std::shared_ptr<ThreadRing>> rings;
  {
    std::lock_guard<std::mutex> lock(ringsMutex_);
    rings = rings_;
  }
  uint64_t dropped = 0;
  for (auto& ring : rings) {
    const uint64_t head = ring->head.load(std::memory_order_relaxed);
    const uint64_t tail = ring->tail.load(std::memory_order_acquire);
    for (uint64_t i = head; i < tail; ++i) {
      const ThreadRing::Slot& slot = ring->slots[i % ring->capacity];
      encoder_.event(slot.event, slot.args);
      ++batch.events;
    }
    ring->head.store(tail, std::memory_order_release);
    dropped += ring->dropped.load(std::memory_order_relaxed);
  }
  {
    // Rings of threads that exited (only the list still holds them) go once empty.
    std::lock_guard<std::mutex> lock(ringsMutex_);
    rings_.erase(std::remove_if(rings_.begin(), rings_.end(),
                                [](const std::shared_ptr<ThreadRing>& r) {
                                  return r.use_count() == 2 &&  // rings_ and `rings`
                                         r->head.load() == r->tail.load() && r->dropped == 0;
                                }),
                 rings_.end());
  }

  const int64_t now = nowNs();
  if (sampleRss && rssFd_ >= 0 && now >= nextRssNs_) {
    char text[128] = {};
    if (::pread(rssFd_, text, sizeof(text) - 1, 0) > 0) {
      unsigned long long pages = 0, residentPages = 0;
      if (std::sscanf(text, "%llu %llu", &pages, &residentPages) == 2) {
        static const uint32_t memoryTrack = intern(track::kMemory);
        static const uint32_t rssName = intern(counters::kRss);
        Event e = makeEvent(EventKind::kCounter, Category::kMemory, memoryTrack, rssName, now, now);
        e.rank = options_.rank;
        e.value = static_cast<double>(residentPages) * static_cast<double>(::sysconf(_SC_PAGESIZE));
        encoder_.event(e, nullptr);
        ++batch.events;
      }
    }
    nextRssNs_ = now + int64_t{options_.rssIntervalMs} * 1000000;
  }
  for (const ClockSync& sync : pendingClockSyncs_) encoder_.clockSync(sync);
  pendingClockSyncs_.clear();
  droppedTotal_.store(dropped);
  if (dropped > droppedReported_) {
    static const uint32_t reason = intern("recorder buffer full");
    encoder_.dropped(Dropped{now, dropped - droppedReported_, reason});
    droppedReported_ = dropped;
  }

  {
    std::lock_guard<std::mutex> lock(stringsMutex_);
    Encoder strings;
    for (uint32_t id = stringsEmitted_; id < strings_.size(); ++id)
      strings.string(id, strings_[id]);
    stringsEmitted_ = static_cast<uint32_t>(strings_.size());
    batch.strings = std::move(strings.bytes());
  }
  if (batch.strings.empty() && encoder_.bytes().empty()) return;
  batch.records = std::move(encoder_.bytes());
  encoder_.clear();
  for (auto& sink : sinks_) {
    try {
      sink->write(batch);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ringx trace: writing a batch failed: %s\n", e.what());
    }
  }
}

// ---- convenience ----------------------------------------------------------------------

ScopedSpan::ScopedSpan(std::string_view name, Category category, std::string_view track)
    : active_(Recorder::enabled()), category_(category) {
  if (!active_) return;
  Recorder& r = Recorder::instance();
  track_ = r.intern(track);
  name_ = r.intern(name);
  beginNs_ = nowNs();
}

ScopedSpan::~ScopedSpan() {
  if (active_) {
    Recorder::instance().span(category_, track_, name_, beginNs_, nowNs(), args_, argCount_);
  }
}

void ScopedSpan::arg(std::string_view key, int64_t value) {
  if (active_ && argCount_ < Recorder::kMaxArgs) {
    args_[argCount_++] = intArg(Recorder::instance().intern(key), value);
  }
}

void ScopedSpan::arg(std::string_view key, double value) {
  if (active_ && argCount_ < Recorder::kMaxArgs) {
    args_[argCount_++] = doubleArg(Recorder::instance().intern(key), value);
  }
}

void ScopedSpan::arg(std::string_view key, std::string_view value) {
  if (active_ && argCount_ < Recorder::kMaxArgs) {
    Recorder& r = Recorder::instance();
    args_[argCount_++] = stringArg(r.intern(key), r.intern(value));
  }
}

void counter(std::string_view name, double value, Category category) {
  if (!Recorder::enabled()) return;
  Recorder& r = Recorder::instance();
  const uint32_t track = r.intern(category == Category::kMemory ? track::kMemory : track::kUser);
  r.counter(category, track, r.intern(name), nowNs(), value);
}

void markStep(int64_t step) {
  if (!Recorder::enabled()) return;
  Recorder& r = Recorder::instance();
  static const uint32_t track = r.intern(track::kSteps);
  static const uint32_t name = r.intern("step");
  static const uint32_t key = r.intern(arg::kStep);
  const Arg a = intArg(key, step);
  r.instant(Category::kStep, track, name, nowNs(), &a, 1);
}

}  // namespace ringx::trace
