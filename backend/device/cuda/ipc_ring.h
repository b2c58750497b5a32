// The device ring's CUDA instance: each rank's region is device memory that peers map through
// CUDA IPC handles (exchanged through the store by DeviceRing), its control words are pinned
// host memory mapped into the device, and one kernel runs a collective with a thread block per
// channel (protocol.h: the same code as the CPU instance's threads), on a stream the caller
// chooses. Ranks may share one GPU (several processes, as the GPU machine tests it) or sit on
// GPUs of one host with peer access (the kernels then read peer memory directly).
//
// No CUDA header here: a stream is its cudaStream_t value.
#pragma once

#include <memory>
#include <string>

#include "backend/device/ring/device_ring.h"

namespace ringx::cuda {

class IpcRingInstance : public device_ring::Instance {
 public:
  // The ring's instance on CUDA device `device` (this process's index), launching on `stream`
  // (nullptr: the legacy default stream) until setStream changes it.
  static std::unique_ptr<IpcRingInstance> create(int device, void* stream);
  virtual void setStream(void* stream) = 0;
};

// The geometry the CUDA instance uses unless told otherwise: 8 channels (thread blocks) of 4
// slots of 512 KiB, one-shot up to 256 KiB.
device_ring::Geometry defaultGpuGeometry();

}  // namespace ringx::cuda
