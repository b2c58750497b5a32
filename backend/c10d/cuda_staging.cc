#include "backend/c10d/cuda_staging.h"

#include <ATen/ATen.h>

#include <cstdlib>
#include <mutex>
#include <unordered_map>

#if RINGX_WITH_CUDA
#include <ATen/cuda/CachingHostAllocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "backend/device/cuda/cuda_stream.h"
#include "backend/device/cuda/ipc_ring.h"
#include "backend/device/cuda/reduce_kernels.h"
#include "backend/device/stream_ordering.h"
#include "backend/device/work_queue.h"
#endif

#include "base/error.h"

namespace ringx::c10d_glue {

bool anyOnCuda(const at::Tensor& tensor) { return tensor.defined() && tensor.is_cuda(); }

bool anyOnCuda(const std::vector<at::Tensor>& tensors) {
  for (const at::Tensor& t : tensors) {
    if (anyOnCuda(t)) return true;
  }
  return false;
}

bool anyOnCuda(const std::vector<std::vector<at::Tensor>>& lists) {
  for (const auto& list : lists) {
    if (anyOnCuda(list)) return true;
  }
  return false;
}

at::Tensor HostStaging::stage(const at::Tensor& tensor, bool in, bool out) {
  if (!tensor.defined() || !tensor.is_cuda()) return tensor;
  // One stand-in per tensor, so an in-place collective (input == output) sees one buffer.
  for (Pair& pair : pairs_) {
    if (pair.device.is_same(tensor)) {
      pair.in |= in;
      pair.out |= out;
      return pair.host;
    }
  }
  at::Tensor host =
      at::empty(tensor.sizes(), tensor.options().device(at::kCPU).pinned_memory(true));
  pairs_.push_back(Pair{tensor, host, in, out});
  return host;
}

std::vector<at::Tensor> HostStaging::in(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& t : tensors) out.push_back(in(t));
  return out;
}

std::vector<at::Tensor> HostStaging::out(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> staged;
  for (const at::Tensor& t : tensors) staged.push_back(out(t));
  return staged;
}

std::vector<std::vector<at::Tensor>> HostStaging::in(
    const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<std::vector<at::Tensor>> staged;
  for (const auto& list : lists) staged.push_back(in(list));
  return staged;
}

std::vector<std::vector<at::Tensor>> HostStaging::out(
    const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<std::vector<at::Tensor>> staged;
  for (const auto& list : lists) staged.push_back(out(list));
  return staged;
}

#if RINGX_WITH_CUDA

bool cudaBuilt() { return true; }

namespace {

// The Work of a staged collective: wait() orders the caller's current stream after it.
class CudaStagedWork : public ::c10d::Work {
 public:
  CudaStagedWork(int rank, ::c10d::OpType type, const char* title, std::vector<at::Tensor> outputs,
                 std::shared_ptr<device::OrderedCollective> ordered,
                 c10::intrusive_ptr<c10::ivalue::Future> future, c10::DeviceIndex device)
      : ::c10d::Work(rank, type, title),
        outputs_(std::move(outputs)),
        ordered_(std::move(ordered)),
        future_(std::move(future)),
        device_(device) {}

  bool wait(
      std::chrono::milliseconds /*timeout: the CPU collective has its own deadline*/) override {
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(device_);
    auto stream = cuda::CudaStream::borrow(current.stream(), device_);
    ordered_->blockStream(*stream);
    return true;
  }
  void synchronize() override { wait(kNoTimeout); }
  bool isCompleted() override { return ordered_->isCompleted(); }
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  std::vector<at::Tensor> outputs_;
  std::shared_ptr<device::OrderedCollective> ordered_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  c10::DeviceIndex device_;
};

// A CUDA collective's future, settled from its host part's end: failed with its error, or
// completed with the outputs on the communication stream (the future records its event there,
// after the collective's device work).
void settle(c10::ivalue::Future& future, const std::vector<at::Tensor>& outputs,
            const c10::cuda::CUDAStream& commStream, std::exception_ptr error) {
  c10::cuda::CUDAStreamGuard guard(commStream);
  if (error) {
    future.setError(error);
  } else {
    future.markCompleted(c10::IValue(outputs));
  }
}

// The Work of a device-ring collective: wait() orders the caller's current stream after the
// kernel (and what follows it on the communication stream); a failure the watch already found
// is raised at once.
class RingCudaWork : public ::c10d::Work {
 public:
  RingCudaWork(int rank, ::c10d::OpType type, const char* title, std::vector<at::Tensor> outputs,
               std::shared_ptr<device::DeviceEvent> end,
               c10::intrusive_ptr<c10::ivalue::Future> future, c10::DeviceIndex device)
      : ::c10d::Work(rank, type, title),
        outputs_(std::move(outputs)),
        end_(std::move(end)),
        future_(std::move(future)),
        device_(device) {}

  bool wait(
      std::chrono::milliseconds /*timeout: the watch has the collective's deadline*/) override {
    if (future_->completed() && future_->hasError())
      std::rethrow_exception(future_->exception_ptr());
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(device_);
    cuda::CudaStream::borrow(current.stream(), device_)->wait(end_);
    return true;
  }
  void synchronize() override { wait(kNoTimeout); }
  bool isCompleted() override { return future_->completed(); }
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  std::vector<at::Tensor> outputs_;
  std::shared_ptr<device::DeviceEvent> end_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  c10::DeviceIndex device_;
};

class CudaCollectivesImpl : public CudaCollectives {
 public:
  explicit CudaCollectivesImpl(int rank) : rank_(rank) {}

  c10::intrusive_ptr<::c10d::Work> run(HostStaging& staging, ::c10d::OpType type, const char* title,
                                       std::vector<at::Tensor> outputs,
                                       std::chrono::milliseconds timeout,
                                       const CpuCall& cpuCall) override {
    TORCH_CHECK(!staging.pairs().empty(), "ringx: ", title, ": no CUDA tensor to stage");
    const c10::DeviceIndex device = staging.pairs().front().device.device().index();
    for (const auto& pair : staging.pairs()) {
      TORCH_CHECK(pair.device.device().index() == device, "ringx: ", title,
                  ": tensors on different CUDA devices (", pair.device.device(),
                  " and cuda:", int(device), "); a ringx group uses one device per rank");
    }
    // One call at a time: the gates of the communication stream must be made in the order the
    // communication thread will open them, which is the order the calls queue their jobs.
    std::lock_guard<std::mutex> lock(mutex_);
    CommStream& commOf = commStreamOf(device);
    c10::cuda::CUDAStream& commStream = commOf.stream;
    cuda::CudaStream* comm = commOf.gated.get();
    auto caller =
        cuda::CudaStream::borrow(c10::cuda::getCurrentCUDAStream(device).stream(), device);
    auto future = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::ofTensors(), std::vector<c10::Device>{c10::Device(c10::kCUDA, device)});
    // Held until the device is done with the stand-ins (the completions thread lets go).
    auto pairs = std::make_shared<std::vector<HostStaging::Pair>>(staging.pairs());
    c10::cuda::CUDAStreamGuard onComm(commStream);

    auto copyIn = [&](device::DeviceStream&) {
      for (auto& pair : *pairs) {
        if (pair.in) pair.host.copy_(pair.device, /*non_blocking=*/true);
      }
    };
    auto copyOut = [&](device::DeviceStream&) {
      for (auto& pair : *pairs) {
        if (pair.out) pair.device.copy_(pair.host, /*non_blocking=*/true);
        // The stream is the last user of both buffers: neither may be reused before it is done.
        c10::cuda::CUDACachingAllocator::recordStream(pair.device.storage().data_ptr(), commStream);
        at::getHostAllocator(at::kCUDA)->record_event(pair.host.storage().data_ptr().get(),
                                                      pair.host.storage().data_ptr().get_context(),
                                                      commStream.unwrap());
      }
    };
    c10::intrusive_ptr<::c10d::Work> cpuWork;
    auto hostPart = [&](std::shared_ptr<device::HostSignal> staged,
                        device::OrderedCollective::HostFinished finished) {
      std::string what = title;
      auto waitForInputs = [staged, timeout, what] {
        if (!device::waitUntilReached(*staged, Clock::now() + timeout)) {
          throw TimeoutError(strCat(
              "ringx: ", what, ": the GPU had not copied the inputs out after ", timeout.count(),
              " ms: its communication stream follows the stream that was current at the call, "
              "and that stream did not get there (is it waiting for something that never "
              "comes?)"));
        }
      };
      cpuWork = cpuCall(waitForInputs);
      // On the communication thread: only what needs no CUDA call (device_stream.h).
      cpuWork->getFuture()->addCallback([finished](c10::ivalue::Future& done) {
        finished(done.hasError() ? done.exception_ptr() : nullptr);
      });
    };
    auto settleFuture = [future, outputs, commStream](std::exception_ptr error) {
      settle(*future, outputs, commStream, error);
    };
    auto ordered = device::OrderedCollective::enqueueStaged(
        *caller, *comm, copyIn, hostPart, copyOut, pairs, settleFuture, completions_);
    // Bad arguments (found by the CPU call's checks) are raised now, as on the CPU.
    if (!cpuWork) std::rethrow_exception(ordered->error());
    return c10::make_intrusive<CudaStagedWork>(rank_, type, title, std::move(outputs),
                                               std::move(ordered), std::move(future), device);
  }

 public:
  device_ring::DeviceRing* ring(Store& store, int rank, int size, bool oneHost,
                                int device) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!ringTried_) {
      ringTried_ = true;
      const char* setting = std::getenv("RINGX_DEVICE_RING");
      if (setting != nullptr && std::string(setting) == "0") {
        ringWhy_ = "turned off (RINGX_DEVICE_RING=0)";
      } else if (!oneHost) {
        ringWhy_ =
            "the group spans hosts: between hosts CUDA tensors are staged through host memory";
      } else if (size < 2 || size > device_ring::kMaxRanks) {
        ringWhy_ =
            strCat("the device ring takes 2 to ", device_ring::kMaxRanks, " ranks, not ", size);
      } else {
        try {
          auto instance = cuda::IpcRingInstance::create(device, nullptr);
          ringInstance_ = instance.get();
          ringDevice_ = device;
          ring_ = std::make_unique<device_ring::DeviceRing>(
              store, "device-ring", rank, size, std::move(instance), cuda::defaultGpuGeometry(),
              Clock::now() + std::chrono::minutes(5));
        } catch (const std::exception& e) {
          ringInstance_ = nullptr;
          ringWhy_ = e.what();
        }
      }
    }
    return ring_ && device == ringDevice_ ? ring_.get() : nullptr;
  }

  void leaveRing(Store& store, std::chrono::milliseconds timeout) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ring_) ring_->leave(store, Clock::now() + timeout);
  }

  std::pair<std::string, std::string> ringTransport() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ring_) return {"cuda-ipc", ""};
    return {"", ringTried_ ? ringWhy_
                           : "no allreduce, all-gather or reduce-scatter on CUDA "
                             "tensors yet (the device ring is set up on the first)"};
  }

  c10::intrusive_ptr<::c10d::Work> runOnRing(device_ring::DeviceRing& ring, const RingCall& call,
                                             ::c10d::OpType type, const char* title,
                                             std::vector<at::Tensor> outputs,
                                             std::chrono::milliseconds timeout,
                                             const EnqueueWatch& enqueueWatch) override {
    const c10::DeviceIndex device = call.output.device().index();
    TORCH_CHECK(call.input.device() == call.output.device(), "ringx: ", title,
                ": input and output on different devices (", call.input.device(), " and ",
                call.output.device(), ")");
    std::lock_guard<std::mutex> lock(mutex_);
    c10::cuda::CUDAStream& commStream = commStreamOf(device).stream;
    const c10::cuda::CUDAStream callerStream = c10::cuda::getCurrentCUDAStream(device);
    // Contiguous stand-ins where needed, made on the caller's stream (before its event).
    const bool inPlace = call.input.is_same(call.output);
    at::Tensor in = call.input.is_contiguous() ? call.input : call.input.contiguous();
    at::Tensor out = inPlace ? in
                     : call.output.is_contiguous()
                         ? call.output
                         : at::empty(call.output.sizes(), call.output.options());
    auto comm = cuda::CudaStream::borrow(commStream.stream(), device);
    auto caller = cuda::CudaStream::borrow(callerStream.stream(), device);
    comm->wait(caller->record());
    ringInstance_->setStream(commStream.stream());
    const uint64_t sequence = ring.start(call.op, in.data_ptr(), out.data_ptr(), call.count,
                                         call.dtype, call.reduceOp, title);
    {
      c10::cuda::CUDAStreamGuard onComm(commStream);
      if (call.divideBy != 0) {
        cuda::divide(call.dtype, out.data_ptr(), call.divideBy, out.numel(), commStream.stream());
      }
      if (!out.is_same(call.output)) call.output.copy_(out, /*non_blocking=*/true);
    }
    // The stream is the last user of every buffer: none may be reused before it is done.
    for (const at::Tensor& t : {call.input, call.output, in, out}) {
      c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), commStream);
    }
    auto end = comm->record();
    auto future = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::ofTensors(), std::vector<c10::Device>{c10::Device(c10::kCUDA, device)});
    device_ring::DeviceRing* watched = &ring;
    // The watch reads the ring's status words only (no CUDA call: device_stream.h).
    auto watch = enqueueWatch([=] { return watched->finish(sequence, Clock::now() + timeout); });
    // The future completes on the completions thread (completing a CUDA future calls CUDA),
    // once the watch has ended and the stream has run what follows the kernel.
    WorkQueue* completions = &completions_;
    watch->getFuture()->addCallback(
        [future, outputs, commStream, end, completions](c10::ivalue::Future& done) {
          std::exception_ptr error = done.hasError() ? done.exception_ptr() : nullptr;
          completions->submit([future, outputs, commStream, end, error] {
            std::exception_ptr failed = error;
            try {
              end->synchronize();
            } catch (...) {
              if (!failed) failed = std::current_exception();
            }
            settle(*future, outputs, commStream, failed);
          });
        });
    return c10::make_intrusive<RingCudaWork>(rank_, type, title, std::move(outputs), std::move(end),
                                             std::move(future), device);
  }

 private:
  // A device's communication stream, and one CudaStream over it for the whole group's life:
  // its host gates share one counter in pinned memory, and freeing that (cudaFreeHost)
  // synchronizes the device. A counter per call was freed on the communication thread once
  // its gate had opened, and that free waits for the device, where the next staged call's gate
  // kernel waits for that thread: asynchronous staged calls in a row (DDP's buckets) deadlock.
  struct CommStream {
    c10::cuda::CUDAStream stream;
    std::unique_ptr<cuda::CudaStream> gated;
  };
  CommStream& commStreamOf(c10::DeviceIndex device) {
    auto found = commStreams_.find(device);
    if (found == commStreams_.end()) {
      c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device);
      auto gated = cuda::CudaStream::borrow(stream.stream(), device);
      found = commStreams_.emplace(device, CommStream{stream, std::move(gated)}).first;
    }
    return found->second;
  }

  const int rank_;
  std::mutex mutex_;
  std::unordered_map<c10::DeviceIndex, CommStream> commStreams_;
  // The device ring (one, on the device of the group's first eligible CUDA collective).
  bool ringTried_ = false;
  std::string ringWhy_;
  int ringDevice_ = -1;
  cuda::IpcRingInstance* ringInstance_ = nullptr;  // owned by ring_
  std::unique_ptr<device_ring::DeviceRing> ring_;
  // Completes the futures and lets go of the buffers once the device is done (last member:
  // destroyed first, it finishes that work while the rest still exists).
  WorkQueue completions_;
};

}  // namespace

std::unique_ptr<CudaCollectives> CudaCollectives::create(int rank) {
  return std::make_unique<CudaCollectivesImpl>(rank);
}

#else  // a torch without CUDA

bool cudaBuilt() { return false; }

std::unique_ptr<CudaCollectives> CudaCollectives::create(int /*rank*/) {
  TORCH_CHECK(false,
              "ringx: this build of ringx has no CUDA support (it was built against a torch "
              "without CUDA, or without nvcc); rebuild ringx with a CUDA build of torch and the "
              "CUDA toolkit installed, move the tensors to the CPU with .cpu(), or use "
              "backend='nccl'");
}

#endif

}  // namespace ringx::c10d_glue
