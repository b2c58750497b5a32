#include "backend/transport/context.h"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "backend/common/error.h"
#include "backend/transport/doorbell.h"

namespace ringx::transport {
namespace {

// The cores this process may run on (its affinity mask: taskset, cgroups' cpusets), which
// is what ranks share, rather than the machine's count.
int usableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace

Context::Context(int rank, int size, std::vector<std::unique_ptr<Pair>> pairs)
    : rank_(rank), size_(size), pairs_(std::move(pairs)) {
  RINGX_ENFORCE_EQ(static_cast<int>(pairs_.size()), size_);
  // Poll shared memory before sleeping on the doorbell: a peer is usually about
  // to publish, and a futex sleep costs a wake-up system call on its side and a
  // trip through the scheduler on ours (tens of us on a virtual machine).
  //  - Every rank of this host can have a core: a collective that runs on the
  //    communication thread (async_op=True) shares the cores with the compute it
  //    overlaps, so it polls 20 us. A caller that waits for its own collective
  //    (PatientWaits, the synchronous path) has nothing else to run and polls
  //    1 ms: with 20-200 us, 2 ranks on 2 cores fell into phases where every
  //    4 KiB allreduce took one scheduler round trip (70-440 us against 5 us);
  //    1 ms of polling showed none in the same runs.
  //  - More ranks than cores: a poll that keeps the core takes it from the rank
  //    it waits for (3 ranks on 2 cores ran a 1 MiB allreduce 1.6x slower with
  //    20 us of plain spinning, 4x with 200 us), and sleeping at once makes every
  //    step a scheduler round trip. Every poll then gives the core away
  //    (sched_yield), as MPI libraries do when oversubscribed, and the
  //    communication thread polls 50 us, the patient caller still 1 ms (measured:
  //    4 ranks on 2 cores, 1 MiB 1.5x faster than sleeping at once).
  int localRanks = 1;
  for (auto& pair : pairs_) {
    if (pair && pair->doorbell()) ++localRanks;
  }
  oversubscribed_ = localRanks > usableCores();
  spin_ = std::chrono::microseconds(oversubscribed_ ? 50 : 20);
  patientSpin_ = std::chrono::microseconds(1000);
  if (const char* text = std::getenv("RINGX_SPIN_MICROS"); text && *text) {
    spin_ = patientSpin_ = std::chrono::microseconds(std::atol(text));
  }
}

namespace {
thread_local int patientWaits = 0;
}  // namespace

PatientWaits::PatientWaits() { ++patientWaits; }
PatientWaits::~PatientWaits() { --patientWaits; }

Context::~Context() = default;

Pair& Context::pair(int peer) {
  RINGX_ENFORCE(peer >= 0 && peer < size_ && peer != rank_);
  return *pairs_[peer];
}

bool Context::progressAll() {
  bool moved = false;
  for (auto& pair : pairs_) {
    if (pair && pair->hasPending()) {
      moved |= pair->progress();
    }
  }
  return moved;
}

void Context::sleepUntilReady(Deadline deadline) {
  std::vector<pollfd> fds;
  Doorbell* bell = nullptr;
  for (auto& pair : pairs_) {
    if (!pair || !pair->hasPending()) continue;
    if (Doorbell* b = pair->doorbell()) {
      bell = b;
      continue;
    }
    short events = 0;
    if (pair->hasPendingRecv()) events |= POLLIN;
    if (pair->hasPendingSend()) events |= POLLOUT;
    fds.push_back(pollfd{pair->pollFd(), events, 0});
  }
  auto now = Clock::now();
  if (now >= deadline) {
    std::string pending;
    for (auto& pair : pairs_) {
      if (pair && pair->hasPending()) {
        pending += strCat(pending.empty() ? "" : "; ", "rank ", pair->peer(), " (",
                          pair->transportName(), "): ", pair->describePending());
      }
    }
    RINGX_THROW(TimeoutError, "timed out waiting for ", pending.empty() ? "peers" : pending);
  }
  auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - now);
  if (bell) {
    // Shared memory: spin a little (a peer is usually just about to publish),
    // then sleep on our doorbell. Wake up now and then to look for dead peers
    // and, in a mixed job, for TCP traffic.
    const auto spinUntil = now + (patientWaits > 0 ? patientSpin_ : spin_);
    while (Clock::now() < spinUntil) {
      if (progressAll()) return;
      if (oversubscribed_) sched_yield();
    }
    uint32_t armed = bell->arm();
    if (progressAll()) {
      bell->disarm();
      return;
    }
    auto nap = std::chrono::microseconds(fds.empty() ? 20000 : 500);
    bell->sleep(armed, std::min(nap, left + std::chrono::microseconds(1)));
    for (auto& pair : pairs_) {
      if (pair && pair->hasPending() && pair->doorbell()) pair->checkAlive();
    }
    return;
  }
  if (fds.empty()) {
    RINGX_THROW(Error, "ringx internal error: waiting with nothing queued on any connection");
  }
  // Never sleep past the deadline.
  int timeoutMs = static_cast<int>(std::min<long long>(left.count() / 1000 + 1, 1000));
  int rc = ::poll(fds.data(), fds.size(), timeoutMs);
  if (rc == -1 && errno != EINTR) {
    RINGX_THROW(IoError, "poll failed: ", std::strerror(errno));
  }
}

void Context::waitUntil(const std::function<bool()>& done, Deadline deadline) {
  while (!done()) {
    if (!progressAll() && !done()) {
      sleepUntilReady(deadline);
    }
  }
}

void Context::waitRecv(int peer, uint64_t offset, Deadline deadline) {
  Pair& p = pair(peer);
  waitUntil([&] { return p.recvCompleted() >= offset; }, deadline);
}

void Context::waitSend(int peer, uint64_t offset, Deadline deadline) {
  Pair& p = pair(peer);
  waitUntil([&] { return p.sendCompleted() >= offset; }, deadline);
}

void Context::waitAll(Deadline deadline) {
  waitUntil(
      [&] {
        for (auto& pair : pairs_) {
          if (pair && pair->hasPending()) return false;
        }
        return true;
      },
      deadline);
}

void Context::shutdown() {
  for (auto& pair : pairs_) {
    if (pair) pair->shutdown();
  }
}

}  // namespace ringx::transport
