#include "backend/group/clock_sync.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "backend/common/error.h"
#include "backend/trace/recorder.h"
#include "backend/transport/tcp/mesh.h"

namespace ringx {
namespace {

// One ping is 8 bytes out and 16 back: far less than this unless a rank stalls.
constexpr auto kPingTimeout = std::chrono::seconds(5);

transport::Deadline pingDeadline() { return transport::Clock::now() + kPingTimeout; }

}  // namespace

trace::ClockSync measureClockOffset(int fd, int rounds) {
  trace::ClockSync best;
  int64_t bestRtt = std::numeric_limits<int64_t>::max();
  for (int i = 0; i < rounds; ++i) {
    const int64_t t1 = trace::nowNs();
    int64_t reply[2];
    if (!transport::tcp::writeFull(fd, &t1, sizeof(t1)) ||
        !transport::tcp::readFull(fd, reply, sizeof(reply), pingDeadline())) {
      RINGX_THROW(IoError, "clock sync with rank 0 failed: no answer within ", kPingTimeout.count(),
                  " s or the connection closed (", std::strerror(errno), ")");
    }
    const int64_t t3 = trace::nowNs();
    if (reply[0] != t1) RINGX_THROW(IoError, "clock sync with rank 0: out-of-order answer");
    const int64_t rtt = t3 - t1;
    if (rtt < bestRtt) {
      bestRtt = rtt;
      const int64_t midpoint = t1 + rtt / 2;
      best.localNs = midpoint;
      best.offsetNs = reply[1] - midpoint;
      best.uncertaintyNs = (rtt + 1) / 2;
    }
  }
  return best;
}

ClockService::ClockService(int rank, std::vector<int> sockets, std::chrono::milliseconds interval,
                           int rounds)
    : rank_(rank), sockets_(std::move(sockets)), interval_(interval), rounds_(rounds) {
  RINGX_SYSCHECK(::pipe2(wakePipe_, O_CLOEXEC), "creating the clock service's wake-up pipe");
  thread_ = std::thread([this] { rank_ == 0 ? serve() : measure(); });
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
  for (int fd : sockets_) {
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

void ClockService::serve() {
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    fds.push_back(pollfd{wakePipe_[0], POLLIN, 0});
    for (int fd : sockets_) {
      if (fd >= 0) fds.push_back(pollfd{fd, POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) return;
    if (fds[0].revents != 0) return;  // stopping
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      int64_t t1;
      int64_t reply[2];
      // Answer with our clock as late as possible, right before sending.
      bool ok = transport::tcp::readFull(fds[i].fd, &t1, sizeof(t1), pingDeadline());
      if (ok) {
        reply[0] = t1;
        reply[1] = trace::nowNs();
        ok = transport::tcp::writeFull(fds[i].fd, reply, sizeof(reply));
      }
      if (!ok) {  // that rank finished or died: stop serving it
        for (int& fd : sockets_) {
          if (fd == fds[i].fd) {
            ::close(fd);
            fd = -1;
          }
        }
      }
    }
  }
}

void ClockService::measure() {
  const int fd = sockets_.size() > 0 ? sockets_[0] : -1;
  for (;;) {
    if (fd >= 0) {
      try {
        trace::Recorder::instance().clockSync(measureClockOffset(fd, rounds_));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "ringx trace: rank %d stops measuring its clock offset: %s\n", rank_,
                     e.what());
        std::lock_guard<std::mutex> lock(mutex_);
        measured_ = true;
        wake_.notify_all();
        return;
      }
    }
    std::unique_lock<std::mutex> lock(mutex_);
    measured_ = true;
    wake_.notify_all();
    if (wake_.wait_for(lock, interval_, [&] { return stopping_; })) return;
  }
}

}  // namespace ringx
