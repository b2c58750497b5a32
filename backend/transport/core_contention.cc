#include "backend/transport/core_contention.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace ringx::transport {
namespace {

// The runnable count from /proc/loadavg, or -1 where it cannot be read.
int readRunnable() {
  const int fd = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char text[128];
  const ssize_t n = ::read(fd, text, sizeof(text) - 1);
  ::close(fd);
  if (n <= 0) return -1;
  text[n] = '\0';
  return CoreContention::runnableIn(text);
}

}  // namespace

int usableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

CoreContention::CoreContention(int ownRunners) : threshold_(std::max(::get_nprocs(), ownRunners)) {}

int CoreContention::runnableIn(const char* loadavg) {
  // "0.52 0.31 0.20 3/412 12345": the fourth field's numerator.
  const char* p = loadavg;
  for (int field = 0; field < 3; ++field) {
    while (*p && *p != ' ') ++p;
    while (*p == ' ') ++p;
  }
  char* end = nullptr;
  const long running = std::strtol(p, &end, 10);
  if (end == p || *end != '/') return -1;
  return static_cast<int>(running);
}

bool CoreContention::contended(Clock::time_point now) {
  if (now < next_) return contended_;
  next_ = now + kSampleEvery;
  const bool over = readRunnable() > threshold_;
  contended_ = over && lastSampleOver_;
  lastSampleOver_ = over;
  return contended_;
}

}  // namespace ringx::transport
