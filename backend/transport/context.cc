#include "backend/transport/context.h"

#include <poll.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "backend/common/error.h"
#include "backend/transport/doorbell.h"

namespace ringx::transport {

Context::Context(int rank, int size, std::vector<std::unique_ptr<Pair>> pairs)
    : rank_(rank), size_(size), pairs_(std::move(pairs)) {
  RINGX_ENFORCE_EQ(static_cast<int>(pairs_.size()), size_);
  // Poll shared memory briefly before sleeping only while every rank of this
  // host can have a core: with more ranks than cores a spinning rank takes the
  // core from the rank it waits for (measured: 3 ranks on 2 cores ran a 1 MiB
  // allreduce 1.6x slower with 20 us of spinning, 4x slower with 200 us).
  int localRanks = 1;
  for (auto& pair : pairs_) {
    if (pair && pair->doorbell()) ++localRanks;
  }
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  spin_ = std::chrono::microseconds(localRanks <= static_cast<int>(cores) ? 20 : 0);
  if (const char* text = std::getenv("RINGX_SPIN_MICROS"); text && *text) {
    spin_ = std::chrono::microseconds(std::atol(text));
  }
}

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
    const auto spinUntil = now + spin_;
    while (Clock::now() < spinUntil) {
      if (progressAll()) return;
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
