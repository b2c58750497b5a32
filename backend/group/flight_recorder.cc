// The flight recorder's ring and the process's dumps (see flight_recorder.h).
//
// Dumps are written by the thread that asks (a failing collective: its error
// message must say where the dump is, so it has to exist first) or by a dump
// thread of their own (a signal handler may only write a byte to a pipe; a
// peer's failure notice arrives on the point-to-point thread, which must not
// stop for file I/O). The process's state is never destroyed: a signal may come
// while the process exits.
#include "backend/group/flight_recorder.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <new>
#include <thread>

#include "base/environment.h"
#include "base/error.h"
#include "trace/record/recorder.h"

namespace ringx {
namespace {

using trace::FlightState;

constexpr uint32_t kHasDtype = 1u << 24;
constexpr uint32_t kReduces = 1u << 25;
constexpr int kScaleShift = 26;  // AskedReduce::Scale, 2 bits
constexpr size_t kMaxErrors = 64;

uint32_t pack(FlightState state, DataType dtype, bool hasDtype, const AskedReduce& op,
              bool reduces) {
  return static_cast<uint32_t>(state) | (static_cast<uint32_t>(dtype) << 8) |
         (static_cast<uint32_t>(op.op) << 16) | (hasDtype ? kHasDtype : 0) |
         (reduces ? kReduces : 0) | (static_cast<uint32_t>(op.scale) << kScaleShift);
}
// The asked op a packed slot holds (its factor is the slot's own field).
AskedReduce askedOf(uint32_t packed, double factor) {
  AskedReduce asked(static_cast<ReduceOp>((packed >> 16) & 0xff));
  asked.scale = static_cast<AskedReduce::Scale>((packed >> kScaleShift) & 0x3);
  asked.factor = factor;
  return asked;
}
FlightState stateOf(uint32_t packed) { return static_cast<FlightState>(packed & 0xff); }
uint32_t withState(uint32_t packed, FlightState state) {
  return (packed & ~0xffu) | static_cast<uint32_t>(state);
}

int64_t wallNs() {
  timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

}  // namespace

// ---- the ring --------------------------------------------------------------------------------

struct FlightRecorder::Read {
  uint64_t id;
  int64_t seq;
  int64_t issued;
  const char* op;
  const char* algorithm;
  uint64_t bytes;
  uint32_t packed;
  double factor;
  int32_t root;
  int64_t issueNs, startNs, endNs;
};

size_t FlightRecorder::entriesFromEnvironment() {
  // 0 turns the flight recorder off (docs/usage.md).
  return sizeFromEnvironment("RINGX_FLIGHT_RECORDER_ENTRIES", kDefaultEntries);
}

FlightRecorder::FlightRecorder(std::string groupName, std::string id, int rank, int size,
                               size_t capacity)
    : name_(std::move(groupName)),
      id_(std::move(id)),
      rank_(rank),
      size_(size),
      capacity_(capacity),
      slots_(new Slot[capacity]) {
  RINGX_CHECK(capacity > 0, "ringx: a flight recorder needs at least one entry");
}

template <typename Fill>
void FlightRecorder::write(Slot& slot, Fill&& fill) {
  // Sequence lock, writer side: odd while inside. The fields' release stores
  // keep the odd version ahead of them; the final release store keeps them
  // ahead of the even one. On x86 all of these are plain stores.
  const uint64_t v = slot.version.load(std::memory_order_relaxed);
  slot.version.store(v + 1, std::memory_order_relaxed);
  fill(slot);
  slot.version.store(v + 2, std::memory_order_release);
}

bool FlightRecorder::read(const Slot& slot, Read* out) const {
  constexpr auto kAcquire = std::memory_order_acquire;
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const uint64_t before = slot.version.load(kAcquire);
    if (before & 1) {
      std::this_thread::yield();
      continue;
    }
    // Acquire loads: the version check below cannot move above them.
    out->id = slot.id.load(kAcquire);
    out->seq = slot.seq.load(kAcquire);
    out->issued = slot.issued.load(kAcquire);
    out->op = slot.op.load(kAcquire);
    out->algorithm = slot.algorithm.load(kAcquire);
    out->bytes = slot.bytes.load(kAcquire);
    out->packed = slot.packed.load(kAcquire);
    out->factor = slot.factor.load(kAcquire);
    out->root = slot.root.load(kAcquire);
    out->issueNs = slot.issueNs.load(kAcquire);
    out->startNs = slot.startNs.load(kAcquire);
    out->endNs = slot.endNs.load(kAcquire);
    if (slot.version.load(std::memory_order_relaxed) == before) return true;
  }
  return false;  // written all the time we looked: leave it out
}

FlightRecorder::Entry FlightRecorder::append(int64_t seq, int64_t issued, const char* op,
                                             uint64_t bytes, uint32_t packed, double factor,
                                             int32_t root, int64_t issueNs, int64_t startNs) {
  constexpr auto kRelease = std::memory_order_release;
  const Entry entry = head_.fetch_add(1, std::memory_order_relaxed) + 1;
  write(slotOf(entry), [&](Slot& s) {
    s.id.store(entry, kRelease);
    s.seq.store(seq, kRelease);
    s.issued.store(issued, kRelease);
    s.op.store(op, kRelease);
    s.algorithm.store(nullptr, kRelease);
    s.bytes.store(bytes, kRelease);
    s.packed.store(packed, kRelease);
    s.factor.store(factor, kRelease);
    s.root.store(root, kRelease);
    s.issueNs.store(issueNs, kRelease);
    s.startNs.store(startNs, kRelease);
    s.endNs.store(0, kRelease);
  });
  return entry;
}

FlightRecorder::Entry FlightRecorder::issue(const char* op, uint64_t bytes, uint32_t runs,
                                            bool ahead) {
  int64_t issued = -1;
  if (ahead) {
    offset_.fetch_add(runs, std::memory_order_relaxed);  // the queued calls start later
  } else {
    issued = issueCount_.fetch_add(runs, std::memory_order_relaxed);
  }
  return append(-1, issued, op, bytes,
                pack(FlightState::kIssued, DataType::kUInt8, false, ReduceOp::kSum, false), 0, -1,
                trace::nowNs(), 0);
}

FlightRecorder::Entry FlightRecorder::start(Entry issued, int64_t seq, const char* op,
                                            DataType dtype, bool reduces,
                                            const AskedReduce& reduceOp, int root, uint64_t bytes) {
  constexpr auto kRelease = std::memory_order_release;
  constexpr auto kRelaxed = std::memory_order_relaxed;
  const int64_t now = trace::nowNs();
  nextSeq_.store(seq + 1, kRelaxed);
  // Only this thread writes an issued entry from here on: plain reads of its own fields.
  if (issued != 0 && slotOf(issued).id.load(kRelaxed) == issued &&
      stateOf(slotOf(issued).packed.load(kRelaxed)) == FlightState::kIssued) {
    Slot& slot = slotOf(issued);
    // What the calls issued after this one get: their place in the count, plus as
    // much as this one's seq differs from its own place (calls before it ran fewer
    // collectives than they said, or others ran ahead).
    const int64_t place = slot.issued.load(kRelaxed);
    if (place >= 0) offset_.store(seq - place, kRelaxed);
    if (bytes == 0) bytes = slot.bytes.load(kRelaxed);
    write(slot, [&](Slot& s) {
      s.seq.store(seq, kRelease);
      s.op.store(op, kRelease);
      s.bytes.store(bytes, kRelease);
      s.packed.store(pack(FlightState::kStarted, dtype, true, reduceOp, reduces), kRelease);
      s.factor.store(reduceOp.factor, kRelease);
      s.root.store(root, kRelease);
      s.startNs.store(now, kRelease);
    });
    return issued;
  }
  // No issued entry to complete (a direct Group::run, or one the ring has since
  // overwritten): a new entry, issued and started now.
  return append(seq, -1, op, bytes, pack(FlightState::kStarted, dtype, true, reduceOp, reduces),
                reduceOp.factor, root, now, now);
}

void FlightRecorder::end(Entry entry, FlightState state, const char* algorithm) {
  if (entry == 0) return;
  Slot& slot = slotOf(entry);
  if (slot.id.load(std::memory_order_relaxed) != entry) return;  // overwritten since
  const uint32_t packed = slot.packed.load(std::memory_order_relaxed);
  const int64_t now = trace::nowNs();
  write(slot, [&](Slot& s) {
    s.packed.store(withState(packed, state), std::memory_order_release);
    if (algorithm) s.algorithm.store(algorithm, std::memory_order_release);
    s.endNs.store(now, std::memory_order_release);
  });
}

void FlightRecorder::finish(Entry entry, const char* algorithm) {
  end(entry, FlightState::kFinished, algorithm);
}

void FlightRecorder::fail(Entry entry, const std::string& error) {
  if (entry == 0) return;
  setError(entry, error);
  end(entry, FlightState::kFailed, nullptr);
}

void FlightRecorder::abandon(Entry entry, const std::string& error) {
  if (entry == 0) return;
  Slot& slot = slotOf(entry);
  if (slot.id.load(std::memory_order_relaxed) != entry ||
      stateOf(slot.packed.load(std::memory_order_relaxed)) != FlightState::kIssued)
    return;  // it started: start/fail recorded what happened
  fail(entry, error);
}

void FlightRecorder::setError(Entry entry, const std::string& error) {
  std::lock_guard<std::mutex> lock(errorMutex_);
  errors_.emplace_back(entry, error);
  if (errors_.size() > kMaxErrors) errors_.pop_front();
}

trace::FlightGroup FlightRecorder::snapshot() const {
  trace::FlightGroup g;
  g.name = name_;
  g.id = id_;
  g.rank = rank_;
  g.size = size_;
  g.capacity = capacity_;
  const uint64_t head = head_.load(std::memory_order_acquire);
  g.recorded = head;
  g.nextSeq = nextSeq_.load(std::memory_order_relaxed);
  const uint64_t first = head > capacity_ ? head - capacity_ : 0;
  std::vector<std::pair<Entry, std::string>> errors;
  {
    std::lock_guard<std::mutex> lock(errorMutex_);
    errors.assign(errors_.begin(), errors_.end());
  }
  g.entries.reserve(head - first);
  const int64_t offset = offset_.load(std::memory_order_relaxed);
  for (Entry entry = first + 1; entry <= head; ++entry) {
    Read r;
    // Skipped: torn for too long, or not written yet / overwritten since (another id).
    if (!read(slots_[(entry - 1) % capacity_], &r) || r.id != entry) continue;
    trace::FlightEntry e;
    e.id = r.id;
    e.op = r.op ? r.op : "";
    e.state = stateOf(r.packed);
    e.seq = r.seq;
    if (e.state == FlightState::kIssued) e.seq = r.issued >= 0 ? r.issued + offset : g.nextSeq;
    e.bytes = r.bytes;
    if (r.packed & kHasDtype) e.dtype = dataTypeName(static_cast<DataType>((r.packed >> 8) & 0xff));
    if (r.packed & kReduces) {
      const AskedReduce asked = askedOf(r.packed, r.factor);
      e.reduceOp = reduceOpName(asked);
      if (asked.scale == AskedReduce::Scale::kPremultiply) e.premulFactor = asked.factor;
    }
    e.root = r.root;
    if (r.algorithm) e.algorithm = r.algorithm;
    e.issueNs = r.issueNs;
    e.startNs = r.startNs;
    e.endNs = r.endNs;
    if (e.state == FlightState::kFailed) {
      for (const auto& [id, text] : errors)
        if (id == entry) e.error = text;
    }
    g.entries.push_back(std::move(e));
  }
  return g;
}

// ---- the process's dumps ---------------------------------------------------------------------

namespace flight {
namespace {

namespace fs = std::filesystem;

struct Process {
  // Held by add() and remove() throughout, so that a dump thread being stopped
  // is gone before the next is started (both read the same pipe). The dump
  // thread never takes it.
  std::mutex lifecycle;
  std::mutex mutex;  // guards the fields below
  std::vector<std::shared_ptr<FlightRecorder>> recorders;
  int rank = -1;  // of the first recorder added while none was alive
  int size = 0;
  std::string job;
  bool pipeMade = false;  // the pipe, the signal handler and the fork hook: once
  int readFd = -1;
  // Runs while some group records: the last group's removal stops it, so a
  // process that destroyed its groups keeps no thread of ringx's.
  std::thread thread;

  std::mutex dumpMutex;   // one dump at a time
  std::string requested;  // the reason of the pending requestDump()
  int64_t requestedNs = 0;
  std::atomic<int64_t> lastFailureDumpNs{0};
};

Process& process() {
  static Process* p = new Process;  // never destroyed (see the file comment)
  return *p;
}

// The pipe's write end, for the signal handler (a lock-free atomic load is
// async-signal-safe).
std::atomic<int> wakeFd{-1};
constexpr char kSignalByte = 'S';
constexpr char kRequestByte = 'R';
constexpr char kQuitByte = 'Q';
constexpr int64_t kNoticeWindowNs = 1'000'000'000;

void onSignal(int) {
  const int saved = errno;
  const int fd = wakeFd.load();
  if (fd >= 0) {
    ssize_t ignored = ::write(fd, &kSignalByte, 1);
    (void)ignored;
  }
  errno = saved;
}

std::string whyLine(const std::string& dir) {
  return strCat("run `ringx-trace why ", dir, "` to see which collective and which ranks");
}

// Waits up to `wait` on the dump thread's pipe; true when the quit byte came meanwhile (the last
// group went away: nothing is left to dump, and whoever removed it is joining this thread).
// Other bytes (a second request, a signal) are absorbed: one dump is pending already.
bool quitWithin(int fd, std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, int(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    char byte = 0;
    const ssize_t got = ::read(fd, &byte, 1);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0 || byte == kQuitByte) return true;
  }
}

void dumpThread(int fd) {
  for (;;) {
    char byte = 0;
    const ssize_t got = ::read(fd, &byte, 1);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0 || byte == kQuitByte) return;
    std::string reason = "SIGUSR1";
    if (byte == kRequestByte) {
      // A peer gave up. This rank's own collective will most likely fail within
      // moments and dump with its error: give it that long, and dump only if it
      // did not. A group removed meanwhile (an abort, a reconfigure) is not kept
      // waiting: its quit ends the wait.
      if (quitWithin(fd, std::chrono::milliseconds(500))) return;
      Process& p = process();
      int64_t askedNs;
      {
        std::lock_guard<std::mutex> lock(p.mutex);
        reason = std::move(p.requested);
        p.requested.clear();
        askedNs = p.requestedNs;
      }
      // A failure dump of this process from around the notice (the failure that
      // sent it may have been this process's own, in tests with ranks as threads)
      // or after it says more.
      if (reason.empty() || p.lastFailureDumpNs.load() + kNoticeWindowNs >= askedNs) continue;
    }
    try {
      const std::string dir = dumpDirectory();
      const std::string path = dumpAll(reason, dir);
      std::fprintf(stderr, "ringx: flight recorder written to %s (%s); %s\n", path.c_str(),
                   reason.c_str(), whyLine(dir).c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ringx: the flight recorder could not be dumped (%s): %s\n",
                   reason.c_str(), e.what());
    }
  }
}

void forgetThreadInChild() {
  // A forked child has the parent's pipe but not its thread: start afresh there
  // (the mutex may be held by a thread that is gone; the child only resets).
  new (&process()) Process;  // the child's copy, rebuilt: no recorders, no thread
  const int fd = wakeFd.exchange(-1);
  if (fd >= 0) ::close(fd);
}

// Under p.mutex: the pipe and the signal handler once per process, the thread
// whenever it is not running.
void startDumpThread(Process& p) {
  if (!p.pipeMade) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return;  // no dumps on signals; failures still dump
    // The handler must never block on a full pipe. The pipe stays open for the
    // process's life: a handler may hold its write end at any moment.
    ::fcntl(fds[1], F_SETFL, ::fcntl(fds[1], F_GETFL) | O_NONBLOCK);
    p.pipeMade = true;
    p.readFd = fds[0];
    wakeFd.store(fds[1]);
  }
  if (!p.thread.joinable()) p.thread = std::thread(dumpThread, p.readFd);
  static bool atforkRegistered = false;
  if (!atforkRegistered) {
    atforkRegistered = true;
    ::pthread_atfork(nullptr, nullptr, forgetThreadInChild);
  }
  struct sigaction current {};
  if (::sigaction(SIGUSR1, nullptr, &current) == 0 && current.sa_handler == SIG_DFL &&
      !(current.sa_flags & SA_SIGINFO)) {
    struct sigaction action {};
    action.sa_handler = onSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    ::sigaction(SIGUSR1, &action, nullptr);
  }
}

std::string userName() {
  if (const char* user = std::getenv("USER"); user && *user) return user;
  passwd entry{};
  passwd* found = nullptr;
  char buffer[1024];
  if (::getpwuid_r(::getuid(), &entry, buffer, sizeof buffer, &found) == 0 && found)
    return found->pw_name;
  return std::to_string(::getuid());
}

std::string hostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "";
  return name;
}

}  // namespace

void add(std::shared_ptr<FlightRecorder> recorder) {
  Process& p = process();
  std::lock_guard<std::mutex> lifecycle(p.lifecycle);
  std::lock_guard<std::mutex> lock(p.mutex);
  if (p.recorders.empty()) {
    p.rank = recorder->rank();
    p.size = recorder->size();
    p.job = recorder->id();
  }
  p.recorders.push_back(std::move(recorder));
  startDumpThread(p);
}

void remove(const FlightRecorder* recorder) {
  Process& p = process();
  std::lock_guard<std::mutex> lifecycle(p.lifecycle);
  std::thread stopping;
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    for (auto it = p.recorders.begin(); it != p.recorders.end(); ++it) {
      if (it->get() == recorder) {
        p.recorders.erase(it);
        break;
      }
    }
    if (p.recorders.empty()) stopping = std::move(p.thread);
  }
  // The last group is gone: stop the dump thread (outside the mutex, which a
  // dump in progress takes). A signal meanwhile finds no recorder to dump.
  if (stopping.joinable()) {
    const int fd = wakeFd.load();
    if (fd >= 0 && ::write(fd, &kQuitByte, 1) == 1 &&
        stopping.get_id() != std::this_thread::get_id()) {
      stopping.join();
    } else {
      stopping.detach();
    }
  }
}

std::string dumpDirectory() {
  if (const char* dir = std::getenv("RINGX_DUMP_DIR"); dir && *dir) return dir;
  return "/tmp/ringx-flight-recorder-" + userName();
}

std::string dumpAll(const std::string& reason, const std::string& dirOrDefault) {
  const std::string dir = dirOrDefault.empty() ? dumpDirectory() : dirOrDefault;
  Process& p = process();
  trace::FlightDump dump;
  std::vector<std::shared_ptr<FlightRecorder>> recorders;
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    recorders = p.recorders;
    dump.rank = p.rank;
    dump.worldSize = p.size;
    dump.job = p.job;
  }
  if (recorders.empty()) {
    RINGX_THROW(Error,
                "ringx: no flight recorder to dump: this process has no live ringx process "
                "group, or RINGX_FLIGHT_RECORDER_ENTRIES=0 turned recording off");
  }
  std::lock_guard<std::mutex> one(p.dumpMutex);
  dump.host = hostName();
  dump.pid = ::getpid();
  dump.reason = reason;
  for (const auto& r : recorders) dump.groups.push_back(r->snapshot());
  dump.steadyNs = trace::nowNs();
  dump.wallNs = wallNs();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    RINGX_THROW(IoError, "cannot create the flight recorder directory ", dir, ": ", ec.message(),
                " (set RINGX_DUMP_DIR to a writable directory)");
  }
  const std::string path = (fs::path(dir) / trace::flightDumpFileName(dump.rank)).string();
  trace::writeFlightDump(dump, path);
  return path;
}

std::string dumpAfterFailure(const std::string& reason) {
  Process& p = process();
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    if (p.recorders.empty()) return "";  // recording is off
  }
  p.lastFailureDumpNs.store(trace::nowNs());
  const std::string dir = dumpDirectory();
  try {
    const std::string path = dumpAll(reason, dir);
    return strCat("; flight recorder written to ", path, ": ", whyLine(dir));
  } catch (const std::exception& e) {
    return strCat("; the flight recorder could not be written to ", dir, " (", e.what(),
                  "): set RINGX_DUMP_DIR to a writable directory");
  }
}

void requestDump(const std::string& reason) {
  Process& p = process();
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    if (p.recorders.empty()) return;
    if (!p.requested.empty()) return;  // one is pending already
    p.requested = reason;
    p.requestedNs = trace::nowNs();
  }
  const int fd = wakeFd.load();
  if (fd >= 0) {
    ssize_t ignored = ::write(fd, &kRequestByte, 1);
    (void)ignored;
  }
}

}  // namespace flight
}  // namespace ringx
