// CUDA tensors in ringx's collectives, host-staged (the wire is the CPU ring over TCP and shared
// memory), stream-ordered as users of ProcessGroupNCCL expect (backend/device/stream_ordering.h):
//
//   1. On the caller's thread, each CUDA argument gets a pinned host stand-in (HostStaging), and
//      the group's CUDA communication stream waits for the caller's current stream, copies the
//      inputs out, raises a host signal, and waits for the host (a gate).
//   2. The communication thread sees the signal, runs the ordinary CPU collective over the
//      stand-ins, then opens the gate: the stream copies the results back in.
//   3. Work.wait() makes the caller's current stream wait for that; the host does not block.
//      The Work's Future is a CUDA future, completed (or failed) on the group's completions
//      thread once the stream has copied the results in.
//
// The communication thread never calls CUDA (device_stream.h says why: a gate waits for it,
// and CUDA's driver can make a call wait for the device): signals, gates and the device ring's
// status words are plain memory; whatever needs the driver (completing a CUDA future, freeing
// the stand-ins) runs on the completions thread.
//
// The caller's CUDA tensors are recorded on the communication stream (the caching allocator's
// record_stream) and the stand-ins' pinned blocks likewise, so memory the user frees early is
// not reused while the stream may still touch it.
//
// Within one host, allreduce, all-gather into a tensor and reduce-scatter of a tensor take the
// device ring instead (backend/device/ring, CUDA IPC between the ranks' GPUs: runOnRing): the
// kernel is launched on the communication stream on the caller's thread, after the caller's
// stream, and the communication thread watches it to its end through the ring's status words
// (a dead or stuck peer becomes the collective's error there). Host-staged stays the path
// between hosts, for the other collectives, and where the ring cannot be set up (every rank
// agrees: DeviceRing's verdict).
//
// A build against a torch without CUDA compiles the CUDA half out (RINGX_WITH_CUDA unset):
// cudaBuilt() is false and a CUDA tensor is refused with a clear error. CI compiles both halves.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Work.hpp>

#include "backend/device/ring/device_ring.h"
#include "backend/store/store.h"
#include "base/types.h"

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

  // Runs `cpuCall` (the CPU collective over `staging`'s stand-ins, which queues its job on the
  // group's communication thread) stream-ordered, as above. Its job must first call
  // `waitForInputs`, which returns once the device has copied the inputs out and throws when
  // that has not happened within `timeout`. `outputs` are the caller's tensors the Work's
  // result and Future hold. Bad arguments are thrown here.
  using CpuCall =
      std::function<c10::intrusive_ptr<::c10d::Work>(std::function<void()> waitForInputs)>;
  virtual c10::intrusive_ptr<::c10d::Work> run(HostStaging& staging, ::c10d::OpType type,
                                               const char* title, std::vector<at::Tensor> outputs,
                                               std::chrono::milliseconds timeout,
                                               const CpuCall& cpuCall) = 0;

  // The group's device ring on `device` for its CUDA collectives, made on the first call (a
  // collective: every rank of the group must make its first eligible CUDA collective the same
  // one), or null when there is none (ringTransport() says why: one host's ranks only, 2 to 16
  // of them, RINGX_DEVICE_RING=0 turns it off, or what the set-up found), or when it is on
  // another device.
  virtual device_ring::DeviceRing* ring(Store& store, int rank, int size, bool oneHost,
                                        int device) = 0;

  // A collective the device ring runs: `op` with `count` as in device_ring::RingJob, over
  // `input` and `output` (CUDA tensors of one device, contiguous or not; the same tensor for an
  // in-place allreduce). AVG divides the result by `divideBy` on the stream afterwards.
  struct RingCall {
    device_ring::RingOp op;
    at::Tensor input, output;
    uint64_t count;
    DataType dtype;
    ReduceOp reduceOp;
    double divideBy = 0;
  };
  // Watches a started ring collective to its end on the communication thread: `watch` is
  // called there (through the group's order, records and errors) and returns when the device
  // ran the collective's kernel (steady ns, trace::nowNs's clock: the trace's device span);
  // the returned Work is that job's.
  using DeviceSpan = device_ring::DeviceSpan;
  using EnqueueWatch =
      std::function<c10::intrusive_ptr<::c10d::Work>(std::function<DeviceSpan()> watch)>;
  // Runs `call` on `ring` stream-ordered, as above, and returns its Work: wait() makes the
  // caller's current stream wait for it; its Future completes once the watch has.
  virtual c10::intrusive_ptr<::c10d::Work> runOnRing(device_ring::DeviceRing& ring,
                                                     const RingCall& call, ::c10d::OpType type,
                                                     const char* title,
                                                     std::vector<at::Tensor> outputs,
                                                     std::chrono::milliseconds timeout,
                                                     const EnqueueWatch& enqueueWatch) = 0;
  // Leaves the device ring in step with the peers (DeviceRing::leave), waiting for them at
  // most `timeout`; nothing when there is none.
  virtual void leaveRing(Store& store, std::chrono::milliseconds timeout) = 0;
  // The device ring's transport ("cuda-ipc"), or "" and why there is none (yet).
  virtual std::pair<std::string, std::string> ringTransport() = 0;
};

}  // namespace ringx::c10d_glue
