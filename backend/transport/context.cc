#include "backend/transport/context.h"

#include <poll.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "backend/common/error.h"

namespace ringx::transport {

Context::Context(int rank, int size, std::vector<std::unique_ptr<Pair>> pairs)
    : rank_(rank), size_(size), pairs_(std::move(pairs)) {
  RINGX_ENFORCE_EQ(static_cast<int>(pairs_.size()), size_);
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
  bool unpollable = false;
  for (auto& pair : pairs_) {
    if (!pair || !pair->hasPending()) {
      continue;
    }
    int fd = pair->pollFd();
    if (fd < 0) {
      unpollable = true;
      continue;
    }
    short events = 0;
    if (pair->hasPendingRecv()) events |= POLLIN;
    if (pair->hasPendingSend()) events |= POLLOUT;
    fds.push_back(pollfd{fd, events, 0});
  }
  auto now = Clock::now();
  if (now >= deadline) {
    std::string pending;
    for (auto& pair : pairs_) {
      if (pair && pair->hasPending()) {
        pending += strCat(pending.empty() ? "" : "; ", "rank ", pair->peer(), ": ",
                          pair->describePending());
      }
    }
    RINGX_THROW(TimeoutError, "timed out waiting for ", pending.empty() ? "peers" : pending);
  }
  // Never sleep past the deadline; wake up at least every 100 ms for
  // transports that cannot be polled.
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
  int timeoutMs = static_cast<int>(std::min<long long>(left, unpollable ? 0 : 1000));
  if (fds.empty()) {
    if (unpollable) {
      std::this_thread::yield();
      return;
    }
    RINGX_THROW(Error, "ringx internal error: waiting with nothing queued on any connection");
  }
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
