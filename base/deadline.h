// The clock every wait in ringx is measured on, and the deadlines those waits take: every
// blocking call (set-up, transports, collectives, the store) ends by a Deadline.
#pragma once

#include <chrono>
#include <cstdint>

namespace ringx {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// Now on Clock (CLOCK_MONOTONIC), in ns: the host clock of traces (trace::nowNs) and of the
// device ring's spans.
inline int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

}  // namespace ringx
