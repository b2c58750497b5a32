// DeviceStream on CUDA: a cudaStream_t with events, stream-side waits, host gates and host
// signals, the primitives stream_ordering.h builds GPU collectives from. ThreadStream is the
// same interface on the CPU; the ordering logic is tested there and, where a GPU exists, here.
//
// Events can also time: a timed event pair gives the GPU-side duration of what the stream ran
// between them (cudaEventElapsedTime), which collective spans record besides their host times.
//
// No CUDA header here, as in reduce_kernels.h: a stream is passed as its cudaStream_t value.
#pragma once

#include <memory>

#include "backend/device/device_stream.h"

namespace ringx::cuda {

class CudaStream : public device::DeviceStream {
 public:
  // Wraps a stream someone else owns (torch's current stream, say); nullptr is the legacy
  // default stream. `device` is the CUDA device the stream belongs to; calls switch to it.
  static std::unique_ptr<CudaStream> borrow(void* stream, int device);
  // Creates a non-blocking stream of its own on `device` (with the highest priority when
  // `highPriority`, as NCCL's communication streams), destroyed with the object.
  static std::unique_ptr<CudaStream> create(int device, bool highPriority);
  ~CudaStream() override;

  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  void* handle() const { return stream_; }
  int device() const { return device_; }

  std::shared_ptr<device::DeviceEvent> record() override;
  // A timed event: elapsedMilliseconds() between two of them gives GPU-side time.
  std::shared_ptr<device::DeviceEvent> recordTimed();
  void wait(const std::shared_ptr<device::DeviceEvent>& event) override;
  // A one-thread kernel that writes this signal's ticket to a counter in mapped pinned memory.
  std::shared_ptr<device::HostSignal> signalHost() override;
  // A kernel that polls a counter in mapped pinned memory until the host's open() raises it
  // to this gate's ticket: one thread on one SM while it waits, the rest of the GPU free.
  // The stream object's gates share one counter and its signals another, each freed with the
  // last user and the object: cudaFreeHost synchronizes the device, so keep one object per
  // stream that makes gates or signals for as long as it makes them (a gate kernel still
  // waiting would wait for that free). The first gate or signal loads both kernels, so that
  // no later one is a first launch (which waits for the device to drain: device_stream.h).
  std::shared_ptr<device::HostGate> waitForHost() override;

  // The GPU time between two completed timed events of the same device, in milliseconds.
  static float elapsedMilliseconds(const device::DeviceEvent& start,
                                   const device::DeviceEvent& end);

 private:
  CudaStream(void* stream, int device, bool owned)
      : stream_(stream), device_(device), owned_(owned) {}
  std::shared_ptr<device::DeviceEvent> recordEvent(bool timed);

  void* stream_;
  int device_;
  bool owned_;
  // The gates' and the signals' counters (pinned, mapped into the device's address space;
  // allocated on first use), each with the ticket of the last one made.
 public:
  struct HostCounter;  // public for the gates and signals in cuda_stream.cu

 private:
  HostCounter& counter(std::shared_ptr<HostCounter>& which);
  std::shared_ptr<HostCounter> gates_, signals_;
};

}  // namespace ringx::cuda
