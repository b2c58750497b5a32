// ProcessGroupRingx: the c10d face of ringx.
//
// Every collective has three phases (as in torch's ProcessGroupGloo):
//   1. on the caller's thread: check the arguments and raise a clear error for
//      anything that cannot work, then return a Work at once;
//   2. on the group's communication thread, in issue order: stage the tensors
//      into contiguous buffers and run the torch-free algorithm (ringx::Group);
//   3. finish: copy results back into the caller's tensors, complete the Work
//      and its Future (or fail them with the error).
// Point-to-point operations bypass the communication thread and go straight to
// the point-to-point engine, so a blocking recv never stalls collectives.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "backend/c10d/tensor_utils.h"
#include "backend/c10d/torch_compat.h"
#include "backend/c10d/work.h"
#include "backend/device/work_queue.h"
#include "backend/group/group.h"

namespace ringx::c10d_glue {

class CudaCollectives;

class ProcessGroupRingx : public BackendBase {
 public:
  // `name` names the group in traces ("world" for the default group, torch's
  // group number for the others). `connect` false (init_process_group's
  // enable_reconfigure=True): the group connects to no one until reconfigure().
  ProcessGroupRingx(const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
                    std::chrono::milliseconds timeout, std::string name = "world",
                    bool connect = true);
  // Over a ringx store (a shrunken group's, under its parent's).
  ProcessGroupRingx(std::shared_ptr<Store> store, int rank, int size,
                    std::chrono::milliseconds timeout, std::string name, bool connect = true);
  ~ProcessGroupRingx() override;

  // The destructor joins the group's threads, which may be releasing tensors that
  // Python owns (and so need the GIL). The Python module installs these so the
  // destructor lets go of the GIL while it joins; C++ programs need nothing.
  struct GilRelease {
    void* (*release)() = nullptr;  // returns what restore() needs, or nullptr
    void (*restore)(void*) = nullptr;
  };
  static void setGilRelease(GilRelease gil);

  const std::string getBackendName() const override { return "ringx"; }
  const std::string& groupName() const { return name_; }
  // Starts the process's trace session over this group's ranks (collective).
  void startTracing(const TraceConfig& config) {
    checkOpen("startTracing");
    group_->startTracing(config);
  }

  c10::intrusive_ptr<::c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                             const ::c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                             const ::c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const ::c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                          const ::c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                             std::vector<at::Tensor>& inputs,
                                             const ::c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                   const ::c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
      const ::c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const ::c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const ::c10d::GatherOptions& opts) override;
#if RINGX_HAS_GATHER_SINGLE
  // The root's output holds world_size inputs in rank order; other ranks pass an empty one.
  c10::intrusive_ptr<::c10d::Work> gather_single(at::Tensor& output, at::Tensor& input,
                                                 const ::c10d::GatherOptions& opts) override;
#endif
  c10::intrusive_ptr<::c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                           std::vector<std::vector<at::Tensor>>& inputs,
                                           const ::c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const ::c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const ::c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const ::c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                                 std::vector<int64_t>& outputSplitSizes,
                                                 std::vector<int64_t>& inputSplitSizes,
                                                 const ::c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                            std::vector<at::Tensor>& inputs,
                                            const ::c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank,
                                        int tag) override;
  c10::intrusive_ptr<::c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank,
                                        int tag) override;
  c10::intrusive_ptr<::c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                                 int tag) override;
  c10::intrusive_ptr<::c10d::Work> barrier(const ::c10d::BarrierOptions& opts) override;

  void setSequenceNumberForGroup() override {}  // every rank starts at 0
  uint64_t getSequenceNumberForGroup() override { return collectivesIssued_.load(); }

  // Coalescing (batch_isend_irecv, torch's _coalescing_manager): the operations issued
  // between startCoalescing and endCoalescing run as usual, and endCoalescing returns one
  // Work that completes when all of them have.
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<::c10d::Work> endCoalescing() override;

  // split_group: a new ringx group over `ranks` (ranks of this group, sorted), or nullptr on
  // ranks not in it. Every rank of this group calls it.
  bool supportsSplitting() const override { return true; }
  c10::intrusive_ptr<BackendBase> split(const c10::intrusive_ptr<::c10d::Store>& store,
                                        const std::vector<int>& ranks,
                                        const c10::intrusive_ptr<Options>& opts) override;
  c10::intrusive_ptr<Options> getBackendOptions() override;

  // Shrink: a new ringx group of the ranks not in `ranksToExclude` (ranks of this group),
  // renumbered in order, as dist.shrink_group makes it (torch >= 2.10; ringx.shrink_group is
  // the same call). Only those ranks call it. It is made through this group's store under a
  // key that names the excluded ranks, as a generation of its own (store/generation.h), so it
  // never waits on an excluded rank, whatever state this group is in (broken by a dead peer
  // too), and two shrinks to different sets never meet. `abortFirst` (SHRINK_ABORT): this
  // group's work in flight fails first, as abort() fails it. A remaining rank that does not
  // join within `timeout` (dead too, or not shrinking) is an error naming it; shrink again
  // without it. This group stays as it was (torch destroys it afterwards).
  c10::intrusive_ptr<ProcessGroupRingx> shrinkTo(const std::vector<int64_t>& ranksToExclude,
                                                 bool abortFirst,
                                                 std::chrono::milliseconds timeout);
#if RINGX_HAS_SHRINK
  bool supportsShrinking() const override { return true; }
  c10::intrusive_ptr<BackendBase> shrink(const std::vector<int64_t>& ranksToExclude,
                                         int shrinkFlags,
                                         const c10::intrusive_ptr<Options>& optsOverride) override;
#endif
  // Reconfigure (torch >= 2.14, dist._reconfigure): the group remade over the processes whose
  // handles opts.handles lists (a list: its order is the ranks'; a set: sorted), through the
  // store the group was made with, under a namespace of opts.uuid's, so survivors, survivors
  // and newcomers, or a fresh set all meet without the rest. Its own handle must be among them.
  // What the group was running is failed first (as abort() fails it); its rank and size
  // become the new ones. It works after shutdown or abort too, and on a group made with
  // enable_reconfigure=True (which connects to no one until then). The returned Work holds
  // the outcome: a member that does not come within the timeout is an error naming it, and
  // the group waits for another reconfigure (a fresh uuid). Nothing else may be called on the
  // group while it reconfigures.
#if RINGX_HAS_RECONFIGURE
  c10::intrusive_ptr<::c10d::Work> reconfigureTo(std::vector<std::string> handles, bool ordered,
                                                 int64_t uuid,
                                                 std::optional<std::chrono::milliseconds> timeout);
  bool supportsReconfigure() const override { return true; }
  ::c10d::ReconfigureHandle get_reconfigure_handle() const override { return handle_; }
  c10::intrusive_ptr<::c10d::Work> reconfigure(const ::c10d::ReconfigureOptions& opts) override;
#endif
  void setTimeout(std::chrono::milliseconds timeout) override {
    checkOpen("setTimeout");
    timeout_ = timeout;
    group_->setTimeout(timeout);
  }

  // destroy_process_group calls shutdown: work already issued finishes (bounded by its
  // timeout), then the connections close. abort fails work in flight at once, on this rank
  // and (through the closed connections) on its peers. Afterwards every call is an error.
  void shutdown() override;
  void abort() override;
  // The group's first failure ("" while it works; after shutdown, what it was).
  std::string errorText() const;
#if RINGX_HAS_GET_ERROR
  // SUCCESS while the group works; else what failed first: TIMEOUT, REMOTE_ERROR (a peer
  // died or gave up), COMM_ERROR (this rank, or an abort).
  ::c10d::ErrorType getError() override;
#endif

  // Broadcasts many tensors from `src` as few flat buckets of at most
  // `bucketBytes` (one dtype per bucket), at most two buckets in flight.
  // Blocks until every tensor holds src's values.
  void broadcastCoalesced(std::vector<at::Tensor>& tensors, int src, int64_t bucketBytes);

  std::chrono::milliseconds timeout() const {
    checkOpen("timeout");
    return group_->timeout();
  }
  // Per peer: "shm", "tcp", or "self".
  std::vector<std::string> transports() const {
    checkOpen("transports");
    return group_->transports();
  }
  // Where the collectives issued since the group was made ran: on the caller's thread
  // (synchronous calls issued while the group was idle), in place inside another of the
  // group's jobs (issued by a Future callback), or queued for the communication thread.
  struct CallsRun {
    uint64_t callerThread, inPlace, commThread;
  };
  CallsRun callsRun() const {
    const uint64_t caller = ranOnCaller_.load(), inPlace = ranInPlace_.load();
    return {caller, inPlace, collectivesIssued_.load() - caller - inPlace};
  }
  // What this group's collectives on CUDA tensors use within its host: "cuda-ipc" (the device
  // ring), or "" and why not (no CUDA collective yet, or the ring's reason).
  std::pair<std::string, std::string> cudaTransport() const;
  // Bytes sent and received over each connection so far, counted by the transports.
  std::vector<ConnectionTraffic> traffic() const {
    checkOpen("traffic");
    return group_->traffic();
  }

 private:
  using Job = std::function<void()>;
  // A collective on CUDA tensors (cuda_staging.h): when any of `outputs` or `inputs` is on
  // CUDA, runs cpuCall(hostOutputs, hostInputs), the same collective over pinned host
  // stand-ins, stream-ordered, and returns its Work; otherwise returns null and the caller
  // takes the CPU path. An in-place collective passes its tensors as both. Out and In are a
  // tensor, a vector of them or a vector of vectors.
  template <typename Out, typename In, typename CpuCall>
  c10::intrusive_ptr<::c10d::Work> stagedOnCuda(::c10d::OpType type, const char* title,
                                                Out& outputs, In& inputs, CpuCall cpuCall);
  // A collective on CUDA tensors that the device ring can run (cuda_staging.h): allreduce
  // (kind kAllreduce, output and input the same tensor), all-gather into a tensor or
  // reduce-scatter of one; its Work, or null when the ring cannot take it (then stagedOnCuda
  // does, and raises what is wrong with the arguments). `reduceOp` is null for all-gather.
  c10::intrusive_ptr<::c10d::Work> ringOnCuda(::c10d::OpType type, const char* title,
                                              algorithms::CollectiveKind kind,
                                              const at::Tensor& output, const at::Tensor& input,
                                              const ::c10d::ReduceOp* reduceOp,
                                              std::chrono::milliseconds requestedTimeout);
  // Phase 2 and 3: run `job` in the group's order and complete the Work returned. `asyncOp`
  // is the option torch passes: false when the caller waits at once, and then the job may
  // run on the caller's thread (WorkQueue::runHereIfIdle). `runs`: how many collectives the
  // job runs (Group::run calls), for the flight recorder's sequence numbers.
  c10::intrusive_ptr<::c10d::Work> enqueue(::c10d::OpType type, const char* title,
                                           std::vector<at::Tensor> outputs, bool asyncOp, Job job,
                                           uint32_t runs = 1);
  // recv and recvAnysource (srcRank = PointToPoint::kAnySource).
  c10::intrusive_ptr<::c10d::Work> postRecv(std::vector<at::Tensor>& tensors, int srcRank, int tag,
                                            ::c10d::OpType type, const char* title);
  std::chrono::milliseconds callTimeout(std::chrono::milliseconds requested) const;
  // Raises if the group was shut down or aborted; what every call checks first.
  void checkOpen(const char* collective) const;
  // Joins the communication thread after the work queued so far, then closes the group.
  // `inStep`: leave the device ring with the peers (not after an abort: they may be gone).
  void close(bool inStep);
  // Remembers `work` for endCoalescing when a coalescing block is open.
  void noteIssued(const c10::intrusive_ptr<RingxWork>& work);
  // An output/input pair of an all-gather (outputIsWhole) or a reduce-scatter: same dtype,
  // the whole tensor world_size times the share. `index` names the pair of a coalesced call
  // in errors (-1: a single pair).
  void checkTensorPair(const at::Tensor& output, const at::Tensor& input, bool outputIsWhole,
                       const char* collective, int index) const;
  // The pairs of a tensor-coalesced call: as many outputs as inputs, each pair checked.
  void checkTensorPairs(const std::vector<at::Tensor>& outputs,
                        const std::vector<at::Tensor>& inputs, bool outputIsWhole,
                        const char* collective) const;
  // The bodies of _allgather_base and _reduce_scatter_base (communication thread).
  void runAllgatherInto(const at::Tensor& output, const at::Tensor& input,
                        std::chrono::milliseconds timeout);
  void runReduceScatterInto(const at::Tensor& output, const at::Tensor& input,
                            const ReduceSpec& reduce, std::chrono::milliseconds timeout);
  void checkRoot(int64_t root, const char* collective) const;
  // gather_list / scatter_list: one tensor per rank like `like` on the root, nothing elsewhere.
  std::vector<at::Tensor> rootOnlyList(std::vector<std::vector<at::Tensor>>& lists,
                                       const at::Tensor& like, int root, const char* collective,
                                       const char* name) const;
  // Byte buffers reused across calls (fresh large allocations cost page faults
  // on every call): `bytes` of slot 0 or 1. Communication thread only.
  at::Tensor scratch(int slot, size_t bytes);

  // A Group of `size` ranks over `store`, this rank being `rank`.
  std::unique_ptr<Group> makeGroup(std::shared_ptr<Store> store, int rank, int size) const;

  std::unique_ptr<Group> group_;
  // What reconfigure needs whatever state group_ is in: the store the group was made with,
  // the timeout, this process's handle, the uuids used so far.
  std::shared_ptr<Store> store_;
  std::chrono::milliseconds timeout_;
  std::string handle_;
  std::vector<int64_t> reconfigureUuids_;
  // Made with enable_reconfigure=True (or a reconfigure failed): closed until reconfigured.
  std::atomic<bool> awaitingReconfigure_{false};
  // The group's failure, kept when it closes (group_ is gone then).
  std::pair<Group::Failure, std::string> failure() const;
  mutable std::mutex failureMutex_;  // guards group_'s reset against failure()
  std::pair<Group::Failure, std::string> failureAtClose_{Group::Failure::kNone, ""};
  std::atomic<uint64_t> collectivesIssued_{0};
  std::atomic<uint64_t> ranOnCaller_{0};
  std::atomic<uint64_t> ranInPlace_{0};
  std::atomic<bool> closed_{false};
  std::mutex coalescingMutex_;
  bool coalescing_ = false;
  std::vector<c10::intrusive_ptr<RingxWork>> coalesced_;
  std::string name_;
  at::Tensor scratch_[2];
  std::once_flag cudaOnce_;
  std::unique_ptr<CudaCollectives> cuda_;  // made on the first CUDA tensor
  // Declared last: destroyed first, so queued jobs finish while group_ lives.
  std::unique_ptr<WorkQueue> queue_;
};

// The creator handed to torch.distributed.Backend.register_backend.
c10::intrusive_ptr<BackendBase> createProcessGroupRingx(
    const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout, std::string name = "world", bool connect = true);

// For C++ programs (libtorch has no init_process_group): a c10d::ProcessGroup whose CPU
// backend is ringx, which is what the DDP and FSDP engines and torch's own C++ code take.
c10::intrusive_ptr<::c10d::ProcessGroup> makeRingxProcessGroup(
    const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout, std::string name = "world");

// The ringx backend that serves CPU tensors in `group`, or nullptr when another backend does.
ProcessGroupRingx* ringxBackendOf(const c10::intrusive_ptr<::c10d::ProcessGroup>& group);

}  // namespace ringx::c10d_glue
