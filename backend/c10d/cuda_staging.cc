#include "backend/c10d/cuda_staging.h"

#include <ATen/ATen.h>

#include <mutex>
#include <unordered_map>

#if RINGX_WITH_CUDA
#include <ATen/cuda/CachingHostAllocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "backend/device/cuda/cuda_stream.h"
#include "backend/device/stream_ordering.h"
#endif

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

class CudaCollectivesImpl : public CudaCollectives {
 public:
  explicit CudaCollectivesImpl(int rank) : rank_(rank) {}

  c10::intrusive_ptr<::c10d::Work> run(HostStaging& staging, WorkQueue& queue, ::c10d::OpType type,
                                       const char* title, std::vector<at::Tensor> outputs,
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
    c10::cuda::CUDAStream& commStream = commStreamOf(device);
    auto comm = cuda::CudaStream::borrow(commStream.stream(), device);
    auto caller =
        cuda::CudaStream::borrow(c10::cuda::getCurrentCUDAStream(device).stream(), device);
    auto future = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::create(c10::TensorType::get()),
        std::vector<c10::Device>{c10::Device(c10::kCUDA, device)});
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
    auto hostPart = [&](std::shared_ptr<device::DeviceEvent> staged,
                        device::OrderedCollective::HostFinished finished) {
      // Before the collective's own job; in place, like it, when a Future callback of this
      // group's issues the collective (ProcessGroupRingx::enqueue).
      std::function<void()> waitForCopies = [staged] { staged->synchronize(); };
      if (!queue.runInPlace(waitForCopies)) queue.submit(std::move(waitForCopies));
      cpuWork = cpuCall();
      cpuWork->getFuture()->addCallback(
          [finished, future, pairs, outputs, commStream](c10::ivalue::Future& done) mutable {
            std::exception_ptr error = done.hasError() ? done.exception_ptr() : nullptr;
            finished(error);
            pairs.reset();  // the host is done with the stand-ins
            c10::cuda::CUDAStreamGuard guard(commStream);
            if (error) {
              future->setError(error);
            } else {
              future->markCompleted(c10::IValue(outputs));  // records an event on commStream
            }
          });
    };
    auto ordered = device::OrderedCollective::enqueueStaged(*caller, *comm, copyIn, hostPart,
                                                            copyOut, nullptr, nullptr);
    // Bad arguments (found by the CPU call's checks) are raised now, as on the CPU.
    if (!cpuWork) std::rethrow_exception(ordered->error());
    return c10::make_intrusive<CudaStagedWork>(rank_, type, title, std::move(outputs),
                                               std::move(ordered), std::move(future), device);
  }

 private:
  c10::cuda::CUDAStream& commStreamOf(c10::DeviceIndex device) {
    auto found = commStreams_.find(device);
    if (found == commStreams_.end()) {
      found = commStreams_
                  .emplace(device, c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device))
                  .first;
    }
    return found->second;
  }

  const int rank_;
  std::mutex mutex_;
  std::unordered_map<c10::DeviceIndex, c10::cuda::CUDAStream> commStreams_;
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
