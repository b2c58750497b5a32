// The clock every wait in ringx is measured on, and the deadlines those waits take: every
// blocking call (set-up, transports, collectives, the store) ends by a Deadline.
#pragma once

#include <chrono>

namespace ringx {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

}  // namespace ringx
