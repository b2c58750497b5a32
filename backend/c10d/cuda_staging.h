// CUDA tensors in ringx's collectives, host-staged (the wire is the CPU ring over TCP and shared
// memory), stream-ordered as users of ProcessGroupNCCL expect (backend/device/stream_ordering.h):
//
//   1. On the caller's thread, each CUDA argument gets a pinned host stand-in (HostStaging), and
//      the group's CUDA communication stream waits for the caller's current stream, copies the
//      inputs out, and waits for the host (a gate).
//   2. The communication thread waits for those copies, runs the ordinary CPU collective over
//      the stand-ins, then opens the gate: the stream copies the results back in.
//   3. Work.wait() makes the caller's current stream wait for that; the host does not block.
//      The Work's Future is a CUDA future, completed (or failed) from the communication thread.
//
// The caller's CUDA tensors are recorded on the communication stream (the caching allocator's
// record_stream) and the stand-ins' pinned blocks likewise, so memory the user frees early is
// not reused while the stream may still touch it.
//
// A build against a torch without CUDA compiles the CUDA half out (RINGX_WITH_CUDA unset):
// cudaBuilt() is false and a CUDA tensor is refused with a clear error. CI compiles both halves.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include <torch/csrc/distributed/c10d/Work.hpp>

#include "backend/device/work_queue.h"

namespace ringx::c10d_glue {

// Whether this build of ringx runs collectives on CUDA tensors.
bool cudaBuilt();
// Whether the tensor, or any of the tensors, is a CUDA tensor.
bool anyOnCuda(const at::Tensor& tensor);
bool anyOnCuda(const std::vector<at::Tensor>& tensors);
bool anyOnCuda(const std::vector<std::vector<at::Tensor>>& lists);

// The pinned host stand-ins of one call's CUDA tensors, and which way each is copied. Tensors
// not on CUDA stand for themselves.
class HostStaging {
 public:
  // Stand-ins whose values are copied from the CUDA tensor (in) or back into it (out). A
  // tensor staged both ways (in place) has one stand-in, copied in and out.
  at::Tensor in(const at::Tensor& tensor) { return stage(tensor, true, false); }
  at::Tensor out(const at::Tensor& tensor) { return stage(tensor, false, true); }
  std::vector<at::Tensor> in(const std::vector<at::Tensor>& tensors);
  std::vector<at::Tensor> out(const std::vector<at::Tensor>& tensors);
  std::vector<std::vector<at::Tensor>> in(const std::vector<std::vector<at::Tensor>>& lists);
  std::vector<std::vector<at::Tensor>> out(const std::vector<std::vector<at::Tensor>>& lists);

  struct Pair {
    at::Tensor device, host;
    bool in, out;
  };
  std::vector<Pair>& pairs() { return pairs_; }

 private:
  at::Tensor stage(const at::Tensor& tensor, bool in, bool out);
  std::vector<Pair> pairs_;
};

// One group's CUDA side: its communication stream per device, created on first use.
class CudaCollectives {
 public:
  // Throws the "this ringx build has no CUDA" error where cudaBuilt() is false.
  static std::unique_ptr<CudaCollectives> create(int rank);
  virtual ~CudaCollectives() = default;

  // Runs `cpuCall` (the CPU collective over `staging`'s stand-ins, which queues its job on
  // `queue`, the group's communication thread) stream-ordered, as above. `outputs` are the
  // caller's tensors the Work's result and Future hold. Bad arguments are thrown here.
  using CpuCall = std::function<c10::intrusive_ptr<::c10d::Work>()>;
  virtual c10::intrusive_ptr<::c10d::Work> run(HostStaging& staging, WorkQueue& queue,
                                               ::c10d::OpType type, const char* title,
                                               std::vector<at::Tensor> outputs,
                                               const CpuCall& cpuCall) = 0;
};

}  // namespace ringx::c10d_glue
