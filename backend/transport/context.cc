#include "backend/transport/context.h"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "backend/transport/doorbell.h"
#include "base/error.h"

namespace ringx::transport {

Context::Context(int rank, int size, ConnectFunction connect, int localRanks,
                 bootstrap::HostLayout hosts)
    : rank_(rank),
      size_(size),
      hosts_(hosts.size() == size ? std::move(hosts) : bootstrap::HostLayout::oneHost(size)),
      connect_(std::move(connect)),
      pairs_(size),
      published_(new std::atomic<Pair*>[size]),
      contention_(localRanks) {
  for (int peer = 0; peer < size; ++peer) published_[peer].store(nullptr);
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
  //  - Cores that other threads want (core_contention.h: torch's default OpenMP threads
  //    spinning after a parallel region, a busy process beside the job): poll only
  //    kContendedSpin. Measured with 2 intra-op threads per rank on 2 cores, 1 MiB at 2
  //    ranks: 2.3 ms with the 1 ms poll, 0.2-0.8 ms sleeping at once (gloo: 0.8-3.4 ms).
  oversubscribed_ = localRanks > usableCores();
  spin_ = std::chrono::microseconds(oversubscribed_ ? 50 : 20);
  patientSpin_ = std::chrono::microseconds(1000);
  if (const char* text = std::getenv("RINGX_SPIN_MICROS"); text && *text) {
    spin_ = patientSpin_ = std::chrono::microseconds(std::atol(text));
    spinOverridden_ = true;
  }
}

namespace {
thread_local int patientWaits = 0;
// How long a wait polls on contended cores: long enough for a peer that is running right now
// to publish, short enough not to hold a core that a descheduled peer needs.
constexpr std::chrono::microseconds kContendedSpin{5};
}  // namespace

PatientWaits::PatientWaits() { ++patientWaits; }
PatientWaits::~PatientWaits() { --patientWaits; }

Context::~Context() = default;

Pair& Context::pair(int peer, Deadline deadline) {
  RINGX_ENFORCE(peer >= 0 && peer < size_ && peer != rank_);
  if (!pairs_[peer]) {
    std::unique_ptr<Pair> made = connect_(peer, deadline);
    RINGX_ENFORCE(made != nullptr);
    active_.push_back(made.get());
    published_[peer].store(made.get(), std::memory_order_release);
    pairs_[peer] = std::move(made);
    connectedCount_.fetch_add(1, std::memory_order_release);
  }
  return *pairs_[peer];
}

Pair& Context::connected(int peer) {
  RINGX_ENFORCE(peer >= 0 && peer < size_ && peer != rank_ && pairs_[peer] != nullptr);
  return *pairs_[peer];
}

const Pair* Context::connectedPair(int peer) const {
  if (peer < 0 || peer >= size_) return nullptr;
  return published_[peer].load(std::memory_order_acquire);
}

bool Context::progressAll() {
  bool moved = false;
  for (Pair* pair : active_) {
    if (pair->hasPending()) {
      moved |= pair->progress();
    }
  }
  return moved;
}

void Context::sleepUntilReady(Deadline deadline) {
  std::vector<pollfd> fds;
  Doorbell* bell = nullptr;
  for (Pair* pair : active_) {
    if (!pair->hasPending()) continue;
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
    for (Pair* pair : active_) {
      if (pair->hasPending()) {
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
    const bool contended = !spinOverridden_ && contention_.contended(now);
    const auto spinUntil = now + (contended          ? kContendedSpin
                                  : patientWaits > 0 ? patientSpin_
                                                     : spin_);
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
    for (Pair* pair : active_) {
      if (pair->hasPending() && pair->doorbell()) pair->checkAlive();
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
  Pair& p = connected(peer);
  waitUntil([&] { return p.recvCompleted() >= offset; }, deadline);
}

void Context::waitSend(int peer, uint64_t offset, Deadline deadline) {
  Pair& p = connected(peer);
  waitUntil([&] { return p.sendCompleted() >= offset; }, deadline);
}

void Context::waitAll(Deadline deadline) {
  waitUntil(
      [&] {
        for (Pair* pair : active_) {
          if (pair->hasPending()) return false;
        }
        return true;
      },
      deadline);
}

void Context::shutdown() {
  // Any thread may abort: walk the published pointers, not the collective thread's list.
  for (int peer = 0; peer < size_; ++peer) {
    if (Pair* pair = published_[peer].load(std::memory_order_acquire)) pair->shutdown();
  }
}

}  // namespace ringx::transport
