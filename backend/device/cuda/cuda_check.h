// What ringx's CUDA code does with a failed CUDA call, and the device switch it makes for a
// scope: one definition for the .cu files of this folder (it includes cuda_runtime.h, so only
// they include it).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "base/error.h"

namespace ringx::cuda {

// Throws Error naming `what` and CUDA's reason when `error` is not cudaSuccess.
inline void check(cudaError_t error, const char* what) {
  if (error != cudaSuccess) {
    cudaGetLastError();  // clear the sticky state of a non-fatal error
    throw Error(std::string("CUDA: ") + what + " failed: " + cudaGetErrorString(error));
  }
}

// Switches the calling thread to `device` for the scope, as c10::cuda::CUDAGuard does: events,
// streams and allocations must be used on the device they were made on, and the caller's
// current device must be as it was afterwards.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    check(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != device) check(cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceGuard() { cudaSetDevice(previous_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace ringx::cuda
