#include "backend/transport/doorbell.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <ctime>

namespace ringx::transport {
namespace {
// Shared (not FUTEX_PRIVATE) futexes: the word lives in memory mapped by several processes.
long futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  return ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}
}  // namespace

void Doorbell::ring() {
  seq.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers.load(std::memory_order_seq_cst) > 0) futex(&seq, FUTEX_WAKE, INT_MAX, nullptr);
}

uint32_t Doorbell::arm() {
  sleepers.fetch_add(1, std::memory_order_seq_cst);
  return seq.load(std::memory_order_seq_cst);
}

void Doorbell::sleep(uint32_t armed, std::chrono::microseconds timeout) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1000000) * 1000;
  futex(&seq, FUTEX_WAIT, armed, &ts);  // returns at once if seq != armed
  disarm();
}

void Doorbell::disarm() { sleepers.fetch_sub(1, std::memory_order_seq_cst); }

}  // namespace ringx::transport
