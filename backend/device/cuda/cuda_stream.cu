#include "backend/device/cuda/cuda_stream.h"

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "backend/device/cuda/cuda_check.h"
#include "base/error.h"

namespace ringx::cuda {
namespace {

class CudaEvent : public device::DeviceEvent {
 public:
  CudaEvent(int device, bool timed) : timed_(timed) {
    DeviceGuard guard(device);
    check(cudaEventCreateWithFlags(&event_, timed ? cudaEventDefault : cudaEventDisableTiming),
          "cudaEventCreate");
  }
  ~CudaEvent() override { cudaEventDestroy(event_); }

  bool query() override {
    const cudaError_t state = cudaEventQuery(event_);
    if (state == cudaErrorNotReady) {
      cudaGetLastError();
      return false;
    }
    check(state, "cudaEventQuery");
    return true;
  }
  void synchronize() override { check(cudaEventSynchronize(event_), "cudaEventSynchronize"); }

  cudaEvent_t event() const { return event_; }
  bool timed() const { return timed_; }

 private:
  cudaEvent_t event_ = nullptr;
  bool timed_;
};

cudaStream_t raw(void* stream) { return static_cast<cudaStream_t>(stream); }

// Waits until the host has raised *counter to `ticket`. volatile: every poll reads host memory
// over the bus; the sleep keeps the polling from flooding it.
__global__ void waitForCounter(const volatile uint64_t* counter, uint64_t ticket) {
  while (*counter < ticket) __nanosleep(1000);
}

// Raises the host's *counter to `ticket`. The stream ran this only after the work before it
// (the copies into pinned memory) completed, so their bytes are there when the host sees it.
__global__ void raiseCounter(volatile uint64_t* counter, uint64_t ticket) {
  __threadfence_system();
  *counter = ticket;
  __threadfence_system();
}

// Loads the two kernels now (cudaFuncGetAttributes does, under lazy loading), on the thread
// that makes the first gate or signal, before any gate of this process can be waiting.
void loadKernels() {
  static const bool loaded = [] {
    cudaFuncAttributes attributes;
    check(cudaFuncGetAttributes(&attributes, waitForCounter), "loading the host-gate kernel");
    check(cudaFuncGetAttributes(&attributes, raiseCounter), "loading the host-signal kernel");
    return true;
  }();
  (void)loaded;
}

}  // namespace

struct CudaStream::HostCounter {
  explicit HostCounter(int device) : device(device) {
    DeviceGuard guard(device);
    void* host = nullptr;
    check(cudaHostAlloc(&host, sizeof(uint64_t), cudaHostAllocMapped | cudaHostAllocPortable),
          "cudaHostAlloc");
    hostCounter = static_cast<uint64_t*>(host);
    *hostCounter = 0;
    void* mapped = nullptr;
    check(cudaHostGetDevicePointer(&mapped, host, 0), "cudaHostGetDevicePointer");
    deviceCounter = static_cast<uint64_t*>(mapped);
  }
  ~HostCounter() { cudaFreeHost(hostCounter); }

  const int device;
  uint64_t* hostCounter = nullptr;  // gates: written by the host; signals: by the device
  uint64_t* deviceCounter = nullptr;
  // The ticket of the next gate or signal, in the order they are enqueued.
  uint64_t nextTicket() {
    std::lock_guard<std::mutex> lock(mutex);
    return ++lastTicket;
  }

  std::mutex mutex;
  uint64_t lastTicket = 0;
  uint64_t opened = 0;             // every gate up to this ticket is open (the counter's value)
  std::set<uint64_t> openedEarly;  // open gates past a closed one
};

namespace {

class CudaGate : public device::HostGate {
 public:
  CudaGate(std::shared_ptr<CudaStream::HostCounter> counter, uint64_t ticket)
      : counter_(std::move(counter)), ticket_(ticket) {}

  // The counter says "every gate up to here is open", so a gate opened before an earlier one
  // (a staged call whose arguments were refused opens its gate at once, while earlier calls
  // are still on the wire) raises it only when that earlier one opens. The stream reaches a
  // gate only after the gates before it, so that holds nothing back.
  void open() override {
    std::lock_guard<std::mutex> lock(counter_->mutex);
    // Each gate opens once.
    RINGX_ENFORCE(ticket_ > counter_->opened && !counter_->openedEarly.count(ticket_));
    counter_->openedEarly.insert(ticket_);
    uint64_t opened = counter_->opened;
    while (counter_->openedEarly.erase(opened + 1)) ++opened;
    if (opened == counter_->opened) return;
    counter_->opened = opened;
    // A release store: the staged results the host wrote are visible before the counter is.
    std::atomic_ref<uint64_t>(*counter_->hostCounter).store(opened, std::memory_order_release);
  }

 private:
  std::shared_ptr<CudaStream::HostCounter> counter_;
  const uint64_t ticket_;
};

class CudaSignal : public device::HostSignal {
 public:
  CudaSignal(std::shared_ptr<CudaStream::HostCounter> counter, uint64_t ticket)
      : counter_(std::move(counter)), ticket_(ticket) {}
  // Signals are raised in stream order: the counter at or past this ticket means reached.
  bool reached() override {
    return std::atomic_ref<uint64_t>(*counter_->hostCounter).load(std::memory_order_acquire) >=
           ticket_;
  }

 private:
  std::shared_ptr<CudaStream::HostCounter> counter_;
  const uint64_t ticket_;
};

}  // namespace

std::unique_ptr<CudaStream> CudaStream::borrow(void* stream, int device) {
  return std::unique_ptr<CudaStream>(new CudaStream(stream, device, false));
}

std::unique_ptr<CudaStream> CudaStream::create(int device, bool highPriority) {
  DeviceGuard guard(device);
  int leastPriority = 0, greatestPriority = 0;
  check(cudaDeviceGetStreamPriorityRange(&leastPriority, &greatestPriority),
        "cudaDeviceGetStreamPriorityRange");
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking,
                                     highPriority ? greatestPriority : leastPriority),
        "cudaStreamCreateWithPriority");
  return std::unique_ptr<CudaStream>(new CudaStream(stream, device, true));
}

CudaStream::~CudaStream() {
  if (owned_) {
    // Work still enqueued finishes first: cudaStreamDestroy returns at once and the driver
    // releases the stream when it is idle.
    DeviceGuard guard(device_);
    cudaStreamDestroy(raw(stream_));
  }
}

std::shared_ptr<device::DeviceEvent> CudaStream::recordEvent(bool timed) {
  auto event = std::make_shared<CudaEvent>(device_, timed);
  DeviceGuard guard(device_);
  check(cudaEventRecord(event->event(), raw(stream_)), "cudaEventRecord");
  return event;
}

std::shared_ptr<device::DeviceEvent> CudaStream::record() { return recordEvent(false); }

std::shared_ptr<device::DeviceEvent> CudaStream::recordTimed() { return recordEvent(true); }

void CudaStream::wait(const std::shared_ptr<device::DeviceEvent>& event) {
  auto* cudaEvent = dynamic_cast<CudaEvent*>(event.get());
  RINGX_CHECK(cudaEvent != nullptr, "a CUDA stream can wait only on a CUDA event");
  DeviceGuard guard(device_);
  check(cudaStreamWaitEvent(raw(stream_), cudaEvent->event(), 0), "cudaStreamWaitEvent");
}

CudaStream::HostCounter& CudaStream::counter(std::shared_ptr<HostCounter>& which) {
  if (!which) {
    DeviceGuard guard(device_);
    loadKernels();
    which = std::make_shared<HostCounter>(device_);
  }
  return *which;
}

std::shared_ptr<device::HostSignal> CudaStream::signalHost() {
  HostCounter& signals = counter(signals_);
  const uint64_t ticket = signals.nextTicket();
  DeviceGuard guard(device_);
  raiseCounter<<<1, 1, 0, raw(stream_)>>>(signals.deviceCounter, ticket);
  check(cudaGetLastError(), "launching the host-signal kernel");
  return std::make_shared<CudaSignal>(signals_, ticket);
}

std::shared_ptr<device::HostGate> CudaStream::waitForHost() {
  HostCounter& gates = counter(gates_);
  const uint64_t ticket = gates.nextTicket();
  DeviceGuard guard(device_);
  waitForCounter<<<1, 1, 0, raw(stream_)>>>(gates.deviceCounter, ticket);
  check(cudaGetLastError(), "launching the host-gate kernel");
  return std::make_shared<CudaGate>(gates_, ticket);
}

float CudaStream::elapsedMilliseconds(const device::DeviceEvent& start,
                                      const device::DeviceEvent& end) {
  auto* from = dynamic_cast<const CudaEvent*>(&start);
  auto* to = dynamic_cast<const CudaEvent*>(&end);
  RINGX_CHECK(from && to && from->timed() && to->timed(),
              "elapsedMilliseconds needs two events from recordTimed()");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, from->event(), to->event()), "cudaEventElapsedTime");
  return ms;
}

}  // namespace ringx::cuda
