#include "backend/group/clock_sync.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "backend/bootstrap/sockets.h"
#include "base/error.h"
#include "trace/record/recorder.h"

namespace ringx {
namespace {

// One ping is 8 bytes out and 16 back: far less than this unless a rank stalls.
constexpr auto kPingTimeout = std::chrono::seconds(5);

Deadline pingDeadline() { return Clock::now() + kPingTimeout; }

}  // namespace

int clockTreeParent(int rank) { return rank == 0 ? -1 : (rank - 1) / 2; }

std::vector<int> clockTreeChildren(int rank, int size) {
  std::vector<int> children;
  for (int child = 2 * rank + 1; child <= 2 * rank + 2 && child < size; ++child) {
    children.push_back(child);
  }
  return children;
}

trace::ClockSync measureClockOffset(int fd, int rounds) {
  trace::ClockSync best;
  int64_t bestRtt = std::numeric_limits<int64_t>::max();
  for (int i = 0; i < rounds; ++i) {
    const int64_t t1 = trace::nowNs();
    // The parent's answer: our t1, rank 0's time when it answered, and its own uncertainty.
    int64_t reply[3];
    if (!bootstrap::writeFull(fd, &t1, sizeof(t1)) ||
        !bootstrap::readFull(fd, reply, sizeof(reply), pingDeadline())) {
      RINGX_THROW(IoError, "clock sync with the parent rank failed: no answer within ",
                  kPingTimeout.count(), " s or the connection closed (", std::strerror(errno), ")");
    }
    const int64_t t3 = trace::nowNs();
    if (reply[0] != t1)
      RINGX_THROW(IoError, "clock sync with the parent rank: out-of-order answer");
    const int64_t rtt = t3 - t1;
    if (rtt < bestRtt) {
      bestRtt = rtt;
      const int64_t midpoint = t1 + rtt / 2;
      best.localNs = midpoint;
      best.offsetNs = reply[1] - midpoint;
      best.uncertaintyNs = (rtt + 1) / 2 + reply[2];
    }
  }
  return best;
}

ClockService::ClockService(int rank, int parentFd, std::vector<int> childFds,
                           std::chrono::milliseconds interval, int rounds)
    : rank_(rank),
      parentFd_(parentFd),
      childFds_(std::move(childFds)),
      interval_(interval),
      rounds_(rounds) {
  RINGX_SYSCHECK(::pipe2(wakePipe_, O_CLOEXEC), "creating the clock service's wake-up pipe");
  thread_ = std::thread([this] { run(); });
}

ClockService::~ClockService() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  const char byte = 0;
  (void)!::write(wakePipe_[1], &byte, 1);
  thread_.join();
  if (parentFd_ >= 0) ::close(parentFd_);
  for (int fd : childFds_) {
    if (fd >= 0) ::close(fd);
  }
  ::close(wakePipe_[0]);
  ::close(wakePipe_[1]);
}

void ClockService::waitFirstMeasurement(std::chrono::milliseconds timeout) {
  if (rank_ == 0) return;
  std::unique_lock<std::mutex> lock(mutex_);
  wake_.wait_for(lock, timeout, [&] { return measured_ || stopping_; });
}

bool ClockService::serveUntil(std::chrono::steady_clock::time_point until) {
  std::vector<pollfd> fds;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return true;
    fds.clear();
    fds.push_back(pollfd{wakePipe_[0], POLLIN, 0});
    for (int fd : childFds_) {
      if (fd >= 0) fds.push_back(pollfd{fd, POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), static_cast<int>(left.count()) + 1) < 0 && errno != EINTR)
      return false;
    if (fds[0].revents != 0) return false;  // stopping
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      int64_t t1;
      int64_t reply[3];
      // Answer with rank 0's time as late as possible, right before sending.
      bool ok = bootstrap::readFull(fds[i].fd, &t1, sizeof(t1), pingDeadline());
      if (ok) {
        reply[0] = t1;
        reply[1] = trace::nowNs() + offsetNs_;
        reply[2] = uncertaintyNs_;
        ok = bootstrap::writeFull(fds[i].fd, reply, sizeof(reply));
      }
      if (!ok) {  // that rank finished or died: stop serving it
        for (int& fd : childFds_) {
          if (fd == fds[i].fd) {
            ::close(fd);
            fd = -1;
          }
        }
      }
    }
  }
}

void ClockService::run() {
  bool measuring = parentFd_ >= 0;
  for (;;) {
    // Measure before serving: the children are told our offset to rank 0, so it must be known.
    if (measuring) {
      try {
        const trace::ClockSync sync = measureClockOffset(parentFd_, rounds_);
        offsetNs_ = sync.offsetNs;
        uncertaintyNs_ = sync.uncertaintyNs;
        trace::Recorder::instance().clockSync(sync);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "ringx trace: rank %d stops measuring its clock offset: %s\n", rank_,
                     e.what());
        measuring = false;
      }
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      measured_ = true;
      if (stopping_) return;
    }
    wake_.notify_all();
    if (!serveUntil(std::chrono::steady_clock::now() + interval_)) return;
  }
}

}  // namespace ringx
