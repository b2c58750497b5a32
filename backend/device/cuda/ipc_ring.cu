// The device ring's CUDA instance (ipc_ring.h): memory, IPC handles and the kernel. The
// protocol is protocol.h's, run by CudaExec below with a thread block per channel:
//   - thread 0 waits for and publishes counters (system-scope acquire/release atomics, so a
//     peer process's kernel, on this GPU or another, and the host all see them in order);
//     the block agrees on its verdict through shared memory;
//   - every thread moves data: 16-byte packs when every pointer allows, else one element at a
//     time; slots are read through L2 (ld.global.cg), never from an L1 line that may be stale
//     because another process's kernel rewrote the slot since;
//   - the element functions are the CPU kernels' (element_ops.h), so results match them bit for
//     bit, as reduce_kernels.cu's do.
#include "backend/device/cuda/ipc_ring.h"

#include <cuda_runtime.h>
#include <cuda/atomic>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/device/cuda/cuda_check.h"
#include "backend/device/ring/protocol.h"
#include "backend/reduce/element_ops.h"
#include "backend/reduce/reduce.h"
#include "base/error.h"

namespace ringx::cuda {
namespace {

using device_ring::HostControl;
using device_ring::RegionHeader;
using device_ring::RingJob;

constexpr int kRingThreads = 512;
constexpr size_t kPack = 16;
constexpr size_t kBusIdBytes = 32;  // a PCI bus id ("0000:c1:00.0") with room to spare

template <typename T>
struct alignas(kPack) RingPack {
  static constexpr int kCount = kPack / sizeof(T) > 0 ? kPack / sizeof(T) : 1;
  T v[kCount];
};

// One element through L2 in units of its alignment (complex64 is two 4-byte words).
template <typename T>
__device__ __forceinline__ T loadThroughL2(const T* p) {
  T out;
  if constexpr (alignof(T) >= 8) {
    unsigned long long w[sizeof(T) / 8];
    for (int k = 0; k < static_cast<int>(sizeof(T) / 8); ++k) {
      w[k] = __ldcg(reinterpret_cast<const unsigned long long*>(p) + k);
    }
    memcpy(&out, w, sizeof(T));
  } else if constexpr (alignof(T) == 4) {
    unsigned int w[sizeof(T) / 4];
    for (int k = 0; k < static_cast<int>(sizeof(T) / 4); ++k) {
      w[k] = __ldcg(reinterpret_cast<const unsigned int*>(p) + k);
    }
    memcpy(&out, w, sizeof(T));
  } else if constexpr (alignof(T) == 2) {
    const unsigned short w = __ldcg(reinterpret_cast<const unsigned short*>(p));
    memcpy(&out, &w, sizeof(T));
  } else {
    const unsigned char w = __ldcg(reinterpret_cast<const unsigned char*>(p));
    memcpy(&out, &w, sizeof(T));
  }
  return out;
}

template <typename T>
__device__ __forceinline__ RingPack<T> loadPackThroughL2(const T* p) {
  const uint4 w = __ldcg(reinterpret_cast<const uint4*>(p));
  RingPack<T> out;
  memcpy(&out, &w, sizeof(out));
  return out;
}

// The GPU's nanosecond timer, the same on every multiprocessor.
__device__ __forceinline__ uint64_t globalTimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One reading of the timer for the host: the value, then a flag the host polls.
__global__ void readGlobalTimer(volatile uint64_t* sample) {
  sample[0] = globalTimer();
  __threadfence_system();
  sample[1] = 1;
}

__device__ __forceinline__ bool packable(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % kPack == 0;
}

template <typename T, typename Op>
struct CudaExec {
  __device__ bool leader() const { return threadIdx.x == 0; }
  __device__ int agree(int v) const {
    __shared__ int verdict;
    __syncthreads();  // everyone has read the previous verdict
    if (leader()) verdict = v;
    __syncthreads();
    return verdict;
  }
  __device__ uint64_t load(const uint64_t* p) const {
    return ::cuda::atomic_ref<uint64_t, ::cuda::thread_scope_system>(*const_cast<uint64_t*>(p))
        .load(::cuda::memory_order_acquire);
  }
  __device__ void store(uint64_t* p, uint64_t v) const {
    ::cuda::atomic_ref<uint64_t, ::cuda::thread_scope_system>(*p).store(
        v, ::cuda::memory_order_release);
  }
  __device__ void publish(uint64_t* p, uint64_t v) const {
    // Each thread's writes reach the system before the block's barrier, and the leader's
    // release store comes after it: a reader that sees the counter sees the data.
    __threadfence_system();
    __syncthreads();
    if (leader()) store(p, v);
  }
  __device__ void pause() const { __nanosleep(100); }
  __device__ uint64_t clock() const { return globalTimer(); }

  __device__ void combine(void* d1, void* d2, const void* a, const void* b, uint64_t count) const {
    T* o1 = static_cast<T*>(d1);
    T* o2 = static_cast<T*>(d2);
    const T* x = static_cast<const T*>(a);
    const T* y = static_cast<const T*>(b);
    uint64_t done = 0;
    if (packable(d1) && packable(d2) && packable(a) && packable(b)) {
      using P = RingPack<T>;
      const uint64_t packs = count / P::kCount;
      for (uint64_t i = threadIdx.x; i < packs; i += blockDim.x) {
        P u, w, r;
        if (x != nullptr) u = loadPackThroughL2(x + i * P::kCount);
        if (y != nullptr) w = loadPackThroughL2(y + i * P::kCount);
        if (x != nullptr && y != nullptr) {
#pragma unroll
          for (int k = 0; k < P::kCount; ++k) r.v[k] = Op::apply(u.v[k], w.v[k]);
        } else {
          r = x != nullptr ? u : w;
        }
        if (o1 != nullptr) reinterpret_cast<P*>(o1)[i] = r;
        if (o2 != nullptr) reinterpret_cast<P*>(o2)[i] = r;
      }
      done = packs * P::kCount;
    }
    for (uint64_t i = done + threadIdx.x; i < count; i += blockDim.x) {
      T r;
      if (x != nullptr && y != nullptr) {
        r = Op::apply(loadThroughL2(x + i), loadThroughL2(y + i));
      } else {
        r = loadThroughL2(x != nullptr ? x + i : y + i);
      }
      if (o1 != nullptr) o1[i] = r;
      if (o2 != nullptr) o2[i] = r;
    }
  }
};

template <typename T, typename Op>
__global__ void __launch_bounds__(kRingThreads) ringKernel(RingJob job) {
  CudaExec<T, Op> ex;
  device_ring::runChannel(ex, job, static_cast<int>(blockIdx.x));
}

class CudaIpcInstance : public IpcRingInstance {
 public:
  CudaIpcInstance(int device, void* stream) : device_(device), stream_(stream) {
    DeviceGuard guard(device_);
    void* host = nullptr;
    check(cudaHostAlloc(&host, sizeof(HostControl), cudaHostAllocMapped),
          "cudaHostAlloc (the device ring's control words)");
    std::memset(host, 0, sizeof(HostControl));
    hostControl_ = static_cast<HostControl*>(host);
    void* mapped = nullptr;
    check(cudaHostGetDevicePointer(&mapped, host, 0),
          "cudaHostGetDevicePointer (the device ring's control words)");
    kernelControl_ = static_cast<HostControl*>(mapped);
    for (auto& event : done_) {
      check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
    }
    char bus[kBusIdBytes] = {};
    check(cudaDeviceGetPCIBusId(bus, sizeof(bus), device_), "cudaDeviceGetPCIBusId");
    busId_ = bus;
    check(cudaHostAlloc(&host, 2 * sizeof(uint64_t), cudaHostAllocMapped),
          "cudaHostAlloc (the clock sample)");
    clockSample_ = static_cast<uint64_t*>(host);
    check(cudaHostGetDevicePointer(&mapped, host, 0), "cudaHostGetDevicePointer (clock sample)");
    kernelClockSample_ = static_cast<uint64_t*>(mapped);
    check(cudaStreamCreateWithFlags(&clockStream_, cudaStreamNonBlocking), "cudaStreamCreate");
    calibrate(/*first=*/true);
  }
  ~CudaIpcInstance() override {
    try {
      DeviceGuard guard(device_);
      if (launched_ > 0) cudaEventSynchronize(done_[launched_ % device_ring::kJobSlots]);
      for (void* p : opened_) cudaIpcCloseMemHandle(p);
      if (region_ != nullptr) cudaFree(region_);
      for (auto& event : done_) cudaEventDestroy(event);
      cudaFreeHost(hostControl_);
      cudaStreamDestroy(clockStream_);
      cudaFreeHost(clockSample_);
    } catch (const std::exception&) {
      // CUDA is gone (the process is exiting): it frees what this held.
    }
  }

  const char* name() const override { return "cuda-ipc"; }
  void setStream(void* stream) override { stream_ = stream; }

  // Handle bytes: this device's PCI bus id (what names a GPU across processes, whose device
  // indices differ with CUDA_VISIBLE_DEVICES), then the IPC handle.
  std::vector<uint8_t> createRegion(size_t bytes, const RegionHeader& head) override {
    DeviceGuard guard(device_);
    check(cudaMalloc(&region_, bytes), "cudaMalloc (the device ring's region)");
    check(cudaMemset(region_, 0, bytes), "cudaMemset (the device ring's region)");
    check(cudaMemcpy(region_, &head, sizeof(head), cudaMemcpyHostToDevice),
          "cudaMemcpy (the device ring's region header)");
    cudaIpcMemHandle_t handle;
    check(cudaIpcGetMemHandle(&handle, region_), "cudaIpcGetMemHandle");
    std::vector<uint8_t> out(kBusIdBytes + sizeof(handle), 0);
    std::strncpy(reinterpret_cast<char*>(out.data()), busId_.c_str(), kBusIdBytes - 1);
    std::memcpy(out.data() + kBusIdBytes, &handle, sizeof(handle));
    return out;
  }

  char* openRegion(int peer, const std::vector<uint8_t>& bytes, size_t) override {
    RINGX_CHECK(bytes.size() == kBusIdBytes + sizeof(cudaIpcMemHandle_t), "ringx: rank ", peer,
                "'s device ring handle has the wrong size");
    const std::string theirBus(reinterpret_cast<const char*>(bytes.data()));
    if (theirBus != busId_) {
      // Another GPU of this host: its memory must be readable from this one.
      int theirs = -1, can = 0;
      check(cudaDeviceGetByPCIBusId(&theirs, theirBus.c_str()), "cudaDeviceGetByPCIBusId");
      check(cudaDeviceCanAccessPeer(&can, device_, theirs), "cudaDeviceCanAccessPeer");
      RINGX_CHECK(can, "ringx: GPU ", busId_, " cannot read GPU ", theirBus, " (rank ", peer,
                  ") directly (no peer access): the device ring needs it; ringx stages such "
                  "pairs through host memory instead");
    }
    cudaIpcMemHandle_t handle;
    std::memcpy(&handle, bytes.data() + kBusIdBytes, sizeof(handle));
    void* p = nullptr;
    DeviceGuard guard(device_);
    check(cudaIpcOpenMemHandle(&p, handle, cudaIpcMemLazyEnablePeerAccess),
          "cudaIpcOpenMemHandle (mapping a peer's device ring region)");
    opened_.push_back(p);
    return static_cast<char*>(p);
  }

  char* localRegion() override { return static_cast<char*>(region_); }
  HostControl* hostControl() override { return hostControl_; }
  HostControl* kernelControl() override { return kernelControl_; }

  void launch(const RingJob& job) override {
    DeviceGuard guard(device_);
    // The two clocks drift apart slowly: a fresh reading now and then keeps the trace's device
    // spans within microseconds of the host's (on the caller's thread: it may call CUDA).
    if (steadyNs() - calibratedAt_ > kCalibrateEveryNs) {
      calibrate(/*first=*/false);
    }
    auto stream = static_cast<cudaStream_t>(stream_);
    const bool known =
        reduce::visitElementOp(job.reduceOp, job.dtype, [&]<typename T, typename Op>() {
          ringKernel<T, Op><<<job.geometry.channels, kRingThreads, 0, stream>>>(job);
        });
    RINGX_CHECK(known, "ringx: no device ring kernel for ", reduceOpName(job.reduceOp), " on ",
                dataTypeName(job.dtype));
    check(cudaGetLastError(), "launching the device ring's kernel");
    // The job's end, in the slot its status uses (free again: DeviceRing keeps at most
    // kJobSlots jobs outstanding).
    check(cudaEventRecord(done_[job.sequence % device_ring::kJobSlots], stream), "cudaEventRecord");
    launched_ = job.sequence;
  }

  bool finished(uint64_t sequence) override {
    const cudaError_t state = cudaEventQuery(done_[sequence % device_ring::kJobSlots]);
    if (state == cudaErrorNotReady) return false;
    check(state,
          "the device ring's kernel");  // a fault in the kernel is sticky: nothing more will run
    return true;
  }
  int64_t hostNs(uint64_t clock) override {
    return static_cast<int64_t>(clock) + offsetNs_.load(std::memory_order_relaxed);
  }
  void join() override {
    if (launched_ > 0) {
      check(cudaEventSynchronize(done_[launched_ % device_ring::kJobSlots]),
            "the device ring's kernel");
    }
  }
  void closePeerRegions() override {
    DeviceGuard guard(device_);
    join();
    for (void* p : opened_) cudaIpcCloseMemHandle(p);
    opened_.clear();
  }

 private:
  int device_;
  void* stream_;
  std::string busId_;
  void* region_ = nullptr;
  std::vector<void*> opened_;
  HostControl* hostControl_ = nullptr;
  HostControl* kernelControl_ = nullptr;
  cudaEvent_t done_[device_ring::kJobSlots] = {};  // each outstanding job's end
  uint64_t launched_ = 0;                          // the last job launched

  // The GPU timer against the host's steady clock: a kernel on an idle stream of its own reads
  // the timer, and the host's readings before the launch and after seeing it bound when. The
  // tightest of a few bounds gives the offset, to within half its width. Later, a reading
  // whose bound is wide (the GPU was busy with other processes' work) does not replace it.
  static constexpr int64_t kCalibrateEveryNs = 10'000'000'000;
  void calibrate(bool first) {
    int64_t best = first ? INT64_MAX : kCalibrateWithinNs;
    for (int i = 0; i < 5; ++i) {
      __atomic_store_n(&clockSample_[1], 0, __ATOMIC_RELEASE);
      const int64_t before = steadyNs();
      readGlobalTimer<<<1, 1, 0, clockStream_>>>(kernelClockSample_);
      check(cudaGetLastError(), "launching the clock reading");
      int64_t after = before;
      while (__atomic_load_n(&clockSample_[1], __ATOMIC_ACQUIRE) == 0) {
        after = steadyNs();
        if (after - before > kGiveUpNs) break;
      }
      if (__atomic_load_n(&clockSample_[1], __ATOMIC_ACQUIRE) == 0) {
        check(cudaStreamSynchronize(clockStream_), "the clock reading");  // a late one
        continue;
      }
      after = steadyNs();
      if (after - before < best) {
        best = after - before;
        const uint64_t gpu = __atomic_load_n(&clockSample_[0], __ATOMIC_ACQUIRE);
        offsetNs_.store(before + (after - before) / 2 - static_cast<int64_t>(gpu),
                        std::memory_order_relaxed);
      }
    }
    calibratedAt_ = steadyNs();
  }
  static constexpr int64_t kCalibrateWithinNs = 1'000'000;  // a later bound must be tighter
  static constexpr int64_t kGiveUpNs = 100'000'000;
  cudaStream_t clockStream_ = nullptr;
  uint64_t* clockSample_ = nullptr;  // value, flag
  uint64_t* kernelClockSample_ = nullptr;
  std::atomic<int64_t> offsetNs_{0};
  int64_t calibratedAt_ = 0;
};

}  // namespace

std::unique_ptr<IpcRingInstance> IpcRingInstance::create(int device, void* stream) {
  return std::make_unique<CudaIpcInstance>(device, stream);
}

device_ring::Geometry defaultGpuGeometry() {
  device_ring::Geometry g;
  g.channels = 8;
  g.depth = 4;
  g.slotBytes = 512 << 10;
  g.oneShotBytes = 256 << 10;
  return g;
}

}  // namespace ringx::cuda
