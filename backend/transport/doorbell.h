// A doorbell: a word in shared memory that peers bump after they made progress
// for its owner (wrote data it waits for, or freed space it waits on). The owner
// sleeps on it with a futex instead of burning a core that training needs, and a
// ring costs a system call only when the owner is actually asleep.
//
// Lost wake-ups are impossible because of the order of operations: the owner
// announces itself as a sleeper and reads `seq` before its last check for
// progress, the ringer publishes its data before bumping `seq` and only then
// looks for sleepers (all sequentially consistent).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace ringx::transport {

struct alignas(64) Doorbell {
  std::atomic<uint32_t> seq{0};
  std::atomic<uint32_t> sleepers{0};

  void ring();
  // Owner side: call arm(), check for progress, then sleep(armed, timeout) if none.
  uint32_t arm();
  void sleep(uint32_t armed, std::chrono::microseconds timeout);
  void disarm();
};
static_assert(sizeof(Doorbell) == 64, "one doorbell per cache line");

}  // namespace ringx::transport
