// The device ring's CPU instance: each rank's region is host memory shared between the ring's
// processes (an unnamed /dev/shm segment, mapped by peers through /proc/<pid>/fd), and each
// channel's kernel is a CPU thread running protocol.h. It exists so that the protocol (slots,
// flags, step order, segmenting, failure) runs in CI with the same tests as on the GPU; only
// the memory and the launch differ from the CUDA instance. The real CPU path between processes
// is the shared-memory transport (backend/transport/shm), which this does not replace.
#pragma once

#include <memory>

#include "backend/device/ring/device_ring.h"

namespace ringx::device_ring {

std::unique_ptr<Instance> makeHostInstance();

}  // namespace ringx::device_ring
