// When a group's communication thread ran one collective, as a watcher of someone else's engine
// reads it once the collective is over: torch's DDP and FSDP2 seen from outside
// (ddp/watch, fsdp/watch) put their buckets' and units' wire spans on these.
#pragma once

#include <cstdint>
#include <functional>

namespace ringx {

// When the wire ran a collective (ringx Works only; zeros and seq -1 when unknown).
struct WireTimes {
  int64_t startNs = 0;
  int64_t endNs = 0;
  int64_t seq = -1;
};
// Read once the collective has finished (the Work's times are final then).
using WireReader = std::function<WireTimes()>;

}  // namespace ringx
