// ProcessGroupRingx's collectives (process_group_ringx.h describes their three phases): each
// checks its arguments on the caller's thread, stages CUDA tensors through the host when they
// are on a device (stagedOnCuda), and queues one job on the group's communication thread
// (enqueue), which records it for the trace and the flight recorder, runs the torch-free
// algorithm and completes the Work. Point-to-point calls go to the group's point-to-point
// engine instead, so a blocking recv never stalls collectives.
#include "backend/c10d/process_group_ringx.h"

#include "backend/c10d/cuda_staging.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <optional>

#include "backend/c10d/store_adapter.h"
#include "backend/c10d/tensor_utils.h"
#include "backend/c10d/torch_errors.h"
#include "trace/record/recorder.h"

namespace ringx::c10d_glue {

using algorithms::Collective;
using algorithms::CollectiveKind;
using ::c10d::OpType;

namespace {

// Set while stagedOnCuda's host part issues the CPU collective: that call must queue its job,
// whatever the caller's async_op, because it runs behind copies the device has yet to make;
// the job first waits for them (stagedInputsWait, when set).
thread_local bool stagingForCuda = false;
thread_local const std::function<void()>* stagedInputsWait = nullptr;

// The output tensors of a collective, in order: what its Work's result() holds.
std::vector<at::Tensor> resultTensors(const at::Tensor& output) { return {output}; }
std::vector<at::Tensor> resultTensors(const std::vector<at::Tensor>& outputs) { return outputs; }
std::vector<at::Tensor> resultTensors(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<at::Tensor> all;
  for (const auto& list : lists) all.insert(all.end(), list.begin(), list.end());
  return all;
}

// The collective a call runs, as the flight recorder names it when the call is issued
// (Group::run names it the same way when it starts).
const char* flightOpName(OpType type) {
  if (type == kReduceScatterTensorCoalesced) {  // COALESCED before torch 2.12 (torch_compat.h)
    return algorithms::collectiveName(CollectiveKind::kReduceScatter);
  }
  switch (type) {
    case OpType::BROADCAST:
      return algorithms::collectiveName(CollectiveKind::kBroadcast);
    case OpType::ALLREDUCE:
    case OpType::ALLREDUCE_COALESCED:
      return algorithms::collectiveName(CollectiveKind::kAllreduce);
    case OpType::REDUCE:
      return algorithms::collectiveName(CollectiveKind::kReduce);
    case OpType::ALLGATHER:
    case OpType::_ALLGATHER_BASE:
    case OpType::ALLGATHER_COALESCED:
      return algorithms::collectiveName(CollectiveKind::kAllgather);
    case OpType::GATHER:
      return algorithms::collectiveName(CollectiveKind::kGather);
    case OpType::SCATTER:
      return algorithms::collectiveName(CollectiveKind::kScatter);
    case OpType::REDUCE_SCATTER:
    case OpType::_REDUCE_SCATTER_BASE:
      return algorithms::collectiveName(CollectiveKind::kReduceScatter);
    case OpType::ALLTOALL_BASE:
    case OpType::ALLTOALL:
      return algorithms::collectiveName(CollectiveKind::kAlltoall);
    case OpType::BARRIER:
      return algorithms::collectiveName(CollectiveKind::kBarrier);
    default:
      return "collective";
  }
}

std::string messageOf(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}
}  // namespace

std::vector<at::Tensor> ProcessGroupRingx::rootOnlyList(std::vector<std::vector<at::Tensor>>& lists,
                                                        const at::Tensor& like, int root,
                                                        const char* collective,
                                                        const char* name) const {
  if (rank_ != root) {
    TORCH_CHECK_VALUE(lists.empty() || lists[0].empty(), "ringx: ", collective,
                      ": only the root (rank ", root, ") may pass ", name);
    return {};
  }
  TORCH_CHECK_VALUE(lists.size() == 1 && static_cast<int>(lists[0].size()) == size_,
                    "ringx: ", collective, ": the root needs ", name, " with one tensor per rank (",
                    size_, ")");
  for (int i = 0; i < size_; ++i) {
    checkLike(lists[0][i], like, collective, std::string(name) + "[" + std::to_string(i) + "]");
  }
  return lists[0];
}

void ProcessGroupRingx::checkRoot(int64_t root, const char* collective) const {
  TORCH_CHECK_VALUE(root >= 0 && root < size_, "ringx: ", collective, ": root rank ", root,
                    " is not in this group of ", size_, " ranks");
}

at::Tensor ProcessGroupRingx::scratch(int slot, size_t bytes) {
  at::Tensor& buffer = scratch_[slot];
  if (!buffer.defined() || static_cast<size_t>(buffer.numel()) < bytes) {
    buffer = at::empty({static_cast<int64_t>(bytes)}, at::kByte);
  }
  return buffer.narrow(0, 0, static_cast<int64_t>(bytes));
}

template <typename Out, typename In, typename CpuCall>
c10::intrusive_ptr<::c10d::Work> ProcessGroupRingx::stagedOnCuda(OpType type, const char* title,
                                                                 Out& outputs, In& inputs,
                                                                 CpuCall cpuCall) {
  if (!anyOnCuda(outputs) && !anyOnCuda(inputs)) return {};
  HostStaging staging;
  auto hostOutputs = staging.out(outputs);
  auto hostInputs = staging.in(inputs);  // an in-place tensor keeps its one stand-in
  std::call_once(cudaOnce_, [&] { cuda_ = CudaCollectives::create(rank_); });
  return cuda_->run(staging, type, title, resultTensors(outputs), group_->timeout(),
                    [&](std::function<void()> waitForInputs) {
                      // The host part must not block the caller: it runs behind the
                      // device-to-host copies.
                      stagingForCuda = true;
                      stagedInputsWait = &waitForInputs;
                      struct Reset {
                        ~Reset() {
                          stagingForCuda = false;
                          stagedInputsWait = nullptr;
                        }
                      } reset;
                      return cpuCall(hostOutputs, hostInputs);
                    });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupRingx::ringOnCuda(
    OpType type, const char* title, CollectiveKind kind, const at::Tensor& output,
    const at::Tensor& input, const ::c10d::ReduceOp* reduceOp,
    std::chrono::milliseconds requestedTimeout) {
  // Every rank must come to the same answer without asking the others (the ring's set-up is a
  // collective): only what the call's arguments say decides, never where they happen to live.
  if (!cudaBuilt() || !output.defined() || !input.defined() || !output.is_cuda() ||
      !input.is_cuda() || output.device() != input.device() ||
      output.scalar_type() != input.scalar_type() || output.layout() != at::kStrided ||
      input.layout() != at::kStrided) {
    return {};
  }
  DataType dtype;
  ReduceSpec reduce;
  try {
    dtype = toDataType(output, title);
    if (reduceOp != nullptr) reduce = toReduceSpec(*reduceOp, output, title);
  } catch (const std::exception&) {
    return {};  // the staged path raises the error
  }
  if (reduce.premul) return {};  // PREMUL_SUM's factor is applied by the staged path
  const uint64_t n = static_cast<uint64_t>(size_);
  const uint64_t outCount = output.numel(), inCount = input.numel();
  CudaCollectives::RingCall call;
  call.input = input;
  call.output = output;
  call.dtype = dtype;
  call.reduceOp = reduce.op;
  call.divideBy = reduce.average ? static_cast<double>(size_) : 0;
  if (kind == CollectiveKind::kAllreduce && outCount == inCount) {
    call.op = device_ring::RingOp::kAllreduce;
    call.count = outCount;
  } else if (kind == CollectiveKind::kAllgather && outCount == inCount * n) {
    call.op = device_ring::RingOp::kAllgather;
    call.count = inCount;
  } else if (kind == CollectiveKind::kReduceScatter && inCount == outCount * n) {
    call.op = device_ring::RingOp::kReduceScatter;
    call.count = outCount;
  } else {
    return {};
  }
  std::call_once(cudaOnce_, [&] { cuda_ = CudaCollectives::create(rank_); });
  device_ring::DeviceRing* ring = cuda_->ring(
      group_->store(), rank_, size_, group_->hosts().hosts() <= 1, output.device().index());
  if (ring == nullptr) return {};
  if (call.op == device_ring::RingOp::kAllreduce) call.op = ring->allreduceKind(call.count, dtype);
  const char* algorithm =
      call.op == device_ring::RingOp::kOneShotAllreduce ? "one-shot (cuda-ipc)" : "ring (cuda-ipc)";
  const auto timeout = callTimeout(requestedTimeout);
  const AskedReduce op = reduce.asked();  // what the records name; the ring runs call.reduceOp
  std::vector<at::Tensor> outputs = {output};
  // The watch queues (it must not run on this thread: it waits for the kernel). The ring's
  // collectives must each be watched to their end, in order, even when the group refuses to
  // run one (it failed earlier): else the ring's later ones wait for a status slot forever.
  using Watch = std::function<CudaCollectives::DeviceSpan()>;
  auto enqueueWatch = [&](Watch watch) {
    stagingForCuda = true;
    struct Reset {
      ~Reset() { stagingForCuda = false; }
    } reset;
    return enqueue(type, title, outputs, /*asyncOp=*/true, [=, this] {
      bool watched = false;
      try {
        group_->run(kind, dtype, op, -1, timeout, [&](Collective& c) {
          c.setAlgorithm(algorithm);
          watched = true;
          const CudaCollectives::DeviceSpan span = watch();
          c.setDeviceSpan(span.beginNs, span.endNs);
        });
      } catch (...) {
        if (!watched) {
          try {
            watch();
          } catch (...) {
            // The group's error is the one to report.
          }
        }
        throw;
      }
    });
  };
  return cuda_->runOnRing(*ring, call, type, title, outputs, timeout, enqueueWatch);
}

std::pair<std::string, std::string> ProcessGroupRingx::cudaTransport() const {
  if (!cuda_) {
    return {"",
            "no allreduce, all-gather or reduce-scatter on CUDA tensors yet (the device "
            "ring is set up on the first)"};
  }
  return cuda_->ringTransport();
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupRingx::enqueue(OpType type, const char* title,
                                                            std::vector<at::Tensor> outputs,
                                                            bool asyncOp, Job job, uint32_t runs) {
  collectivesIssued_++;
  // For the trace and the flight recorder: when the caller issued it, and its size as
  // nccl-tests counts it (the outputs are the whole buffer except for reduce-scatter and
  // scatter, whose outputs are one rank's share).
  CallNote note;
  for (const at::Tensor& t : outputs) note.bytes += t.numel() * t.element_size();
  if (type == OpType::REDUCE_SCATTER || type == OpType::_REDUCE_SCATTER_BASE ||
      type == kReduceScatterTensorCoalesced || type == OpType::SCATTER) {
    note.bytes *= size_;
  }
  if (trace::Recorder::enabled()) note.enqueueNs = trace::nowNs();
  // Issued from inside one of this group's jobs (a Future callback: a DDP comm hook's
  // next step), it runs there and then, synchronous or not: queued, it would wait behind
  // the job that waits for it (work_queue.h). So it runs ahead of the calls queued.
  const bool inPlace = queue_->runningHere();
  if (FlightRecorder* flight = group_->flightRecorder()) {
    note.flightEntry = flight->issue(flightOpName(type), note.bytes, runs, inPlace);
  }
  auto work = c10::make_intrusive<RingxWork>(rank_, type, title, std::move(outputs),
                                             std::chrono::milliseconds(0));
  Group* group = group_.get();
  if (stagedInputsWait != nullptr) {
    // A staged CUDA collective's job starts once the device has copied its inputs out; a
    // failure to get them is the collective's error, as any other.
    job = [wait = *stagedInputsWait, job = std::move(job)] {
      wait();
      job();
    };
  }
  auto run = [work, group, note, job = std::move(job)] {
    try {
      work->markStarted(trace::nowNs(), static_cast<int64_t>(group->collectivesIssued()));
      group->noteCall(note);
      job();
    } catch (...) {
      // A job that failed before its collective started (its group failed earlier, or
      // staging did): the flight recorder shows the call failed rather than queued.
      if (FlightRecorder* flight = group->flightRecorder())
        flight->abandon(note.flightEntry, messageOf(std::current_exception()));
      work->markFailed(std::current_exception());
      return;
    }
    work->markSuccess();
  };
  // A synchronous call (async_op=False: torch waits right after this returns) runs on the
  // caller's thread when the group has nothing else to do; its error then surfaces from
  // the wait() torch makes at once. Asynchronous calls, and calls that a CUDA collective
  // stages, go to the communication thread.
  if (inPlace && queue_->runInPlace(run)) {
    ranInPlace_++;
  } else if (!asyncOp && !stagingForCuda && queue_->runHereIfIdle(run)) {
    ranOnCaller_++;
  } else {
    work->queuedOn(queue_.get());
    queue_->submit(std::move(run));
  }
  noteIssued(work);
  return work;
}

// ---- allreduce family --------------------------------------------------------------------------

c10::intrusive_ptr<::c10d::Work> ProcessGroupRingx::allreduce(
    std::vector<at::Tensor>& tensors, const ::c10d::AllreduceOptions& opts) {
  checkOpen("allreduce");
  if (tensors.size() == 1) {
    if (auto work = ringOnCuda(OpType::ALLREDUCE, "ringx:all_reduce", CollectiveKind::kAllreduce,
                               tensors[0], tensors[0], &opts.reduceOp, opts.timeout)) {
      return work;  // the device ring: cuda_staging.h
    }
  }
  if (auto work = stagedOnCuda(OpType::ALLREDUCE, "ringx:all_reduce", tensors, tensors,
                               [&](auto& o, auto&) { return allreduce(o, opts); })) {
    return work;  // CUDA tensors: cuda_staging.h
  }
  at::Tensor tensor = checkSingle(tensors, "allreduce", "tensors");
  const ReduceSpec reduce = toReduceSpec(opts.reduceOp, tensor, "allreduce");
  const DataType dtype = toDataType(tensor, "allreduce");
  const auto timeout = callTimeout(opts.timeout);
  return enqueue(OpType::ALLREDUCE, "ringx:all_reduce", tensors, opts.asyncOp, [=, this] {
    Staged staged(tensor);
    reduce.premultiplyInPlace(staged.tensor());  // the tensor is the output: scale it in place
    const double divideBy = reduce.divideBy(dtype, size_);  // AVG, fused where it can be
    group_->run(CollectiveKind::kAllreduce, dtype, reduce.asked(), -1, timeout, [&](Collective& c) {
      algorithms::allreduce(c, staged.data(), tensor.numel(), dtype, reduce.op, group_->tuning(),
                            divideBy);
    });
    reduce.finish(staged.tensor(), size_, divideBy);
    staged.copyBack();
  });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupRingx::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const ::c10d::AllreduceCoalescedOptions& opts) {
  checkOpen("allreduce_coalesced");
  if (auto work =
          stagedOnCuda(OpType::ALLREDUCE_COALESCED, "ringx:all_reduce_coalesced", tensors, tensors,
                       [&](auto& o, auto&) { return allreduce_coalesced(o, opts); })) {
    return work;  // CUDA tensors: cuda_staging.h
  }
  TORCH_CHECK_VALUE(!tensors.empty(), "ringx: allreduce_coalesced needs at least one tensor");
  const ReduceSpec reduce = toReduceSpec(opts.reduceOp, tensors[0], "allreduce_coalesced");
  const DataType dtype = toDataType(tensors[0], "allreduce_coalesced");
  for (size_t i = 0; i < tensors.size(); ++i) {
    checkTensor(tensors[i], "allreduce_coalesced", "tensors");
    TORCH_CHECK_TYPE(
        tensors[i].scalar_type() == tensors[0].scalar_type(),
        "ringx: allreduce_coalesced: all tensors must have the same dtype, but tensor ", i, " is ",
        tensors[i].scalar_type(), " and tensor 0 is ", tensors[0].scalar_type());
  }
  const auto timeout = callTimeout(opts.timeout);
  // Flatten, run once, copy back into the caller's tensors.
  return enqueue(OpType::ALLREDUCE_COALESCED, "ringx:all_reduce_coalesced", tensors, opts.asyncOp,
                 [=, this]() mutable {
                   at::Tensor flat = flattenBytes(tensors, &scratch_[0]);
                   const size_t count = byteSize(flat) / elementSize(dtype);
                   if (reduce.premul)
                     reduce.premultiplyInPlace(flat.view(tensors[0].scalar_type()));
                   const double divideBy = reduce.divideBy(dtype, size_);
                   group_->run(CollectiveKind::kAllreduce, dtype, reduce.asked(), -1, timeout,
                               [&](Collective& c) {
                                 algorithms::allreduce(c, flat.data_ptr(), count, dtype, reduce.op,
                                                       group_->tuning(), divideBy);
                               });
                   unflattenBytes(flat, tensors);
                   for (auto& t : tensors) reduce.finish(t, size_, divideBy);
                 });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupRingx::reduce(std::vector<at::Tensor>& tensors,
                                                           const ::c10d::ReduceOptions& opts) {
  checkOpen("reduce");
  if (auto work = stagedOnCuda(OpType::REDUCE, "ringx:reduce", tensors, tensors,
                               [&](auto& o, auto&) { return reduce(o, opts); })) {
    return work;  // CUDA tensors: cuda_staging.h
  }
  at::Tensor tensor = checkSingle(tensors, "reduce", "tensors");
  checkRoot(opts.rootRank, "reduce");
  const ReduceSpec reduce = toReduceSpec(opts.reduceOp, tensor, "reduce");
  const DataType dtype = toDataType(tensor, "reduce");
  const int root = static_cast<int>(opts.rootRank);
  const auto timeout = callTimeout(opts.timeout);
  return enqueue(OpType::REDUCE, "ringx:reduce", tensors, opts.asyncOp, [=, this] {
    // Only the root's tensor is an output: the others' stay as they are.
    Staged staged(reduce.premultiplied(tensor));
    group_->run(CollectiveKind::kReduce, dtype, reduce.asked(), root, timeout, [&](Collective& c) {
      algorithms::chainReduce(c, staged.data(), tensor.numel(), dtype, reduce.op, root,
                              group_->tuning().segmentBytes);
    });
    if (rank_ == root) {
      reduce.finish(staged.tensor(), size_);
      if (!staged.tensor().is_same(tensor)) tensor.copy_(staged.tensor());
    }
  });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupRingx::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const ::c10d::ReduceScatterOptions& opts) {
  checkOpen("reduce_scatter");
  if (auto work = stagedOnCuda(OpType::REDUCE_SCATTER, "ringx:reduce_scatter", outputs, inputs,
                               [&](auto& o, auto& i) { return reduce_scatter(o, i, opts); })) {
    return work;  // CUDA tensors: cuda_staging.h
  }
  at::Tensor output = checkSingle(outputs, "reduce_scatter", "output_tensors");
  TORCH_CHECK_VALUE(inputs.size() == 1, "ringx: reduce_scatter expects one input list per process");
  TORCH_CHECK_VALUE(static_cast<int>(inputs[0].size()) == size_,
                    "ringx: reduce_scatter: the input "
                    "list must hold one tensor per rank (",
                    size_, "), got ", inputs[0].size());
  for (int i = 0; i < size_; ++i) {
    checkLike(inputs[0][i], output, "reduce_scatter", "input_list[" + std::to_string(i) + "]");
  }
  const ReduceSpec reduce = toReduceSpec(opts.reduceOp, output, "reduce_scatter");
  const DataType dtype = toDataType(output, "reduce_scatter");
  const auto timeout = callTimeout(opts.timeout);
  std::vector<at::Tensor> inputList = inputs[0];
  return enqueue(OpType::REDUCE_SCATTER, "ringx:reduce_scatter", outputs, opts.asyncOp, [=, this] {
    // Read straight from the caller's input tensors (staged if not contiguous or scaled).
    std::vector<Staged> ins;
    for (const at::Tensor& in : inputList) ins.emplace_back(reduce.premultiplied(in));
    std::vector<const void*> blocks;
    for (auto& in : ins) blocks.push_back(in.data());
    Staged staged(output);
    const double divideBy = reduce.divideBy(dtype, size_);
    group_->run(CollectiveKind::kReduceScatter, dtype, reduce.asked(), -1, timeout,
                [&](Collective& c) {
                  algorithms::ringReduceScatter(c, blocks, staged.data(), output.numel(), dtype,
                                                reduce.op, group_->tuning().segmentBytes, divideBy);
                });
    reduce.finish(staged.tensor(), size_, divideBy);
    staged.copyBack();
  });
}

void ProcessGroupRingx::checkTensorPair(const at::Tensor& output, const at::Tensor& input,
                                        bool outputIsWhole, const char* collective,
                                        int index) const {
  // "output"/"input" for the single-tensor calls, "outputs[i]"/"inputs[i]" for coalesced ones.
  const std::string out = index < 0 ? "output" : c10::str("outputs[", index, "]");
  const std::string in = index < 0 ? "input" : c10::str("inputs[", index, "]");
  checkTensor(output, collective, out.c_str());
  checkTensor(input, collective, in.c_str());
  TORCH_CHECK_TYPE(input.scalar_type() == output.scalar_type(), "ringx: ", collective, ": ", in,
                   " has dtype ", input.scalar_type(), " but ", out, " has ", output.scalar_type());
  const at::Tensor& whole = outputIsWhole ? output : input;
  const at::Tensor& share = outputIsWhole ? input : output;
  TORCH_CHECK_VALUE(whole.numel() == share.numel() * size_, "ringx: ", collective, ": ",
                    outputIsWhole ? out : in, " must have world_size (", size_,
                    ") times the elements of ", outputIsWhole ? in : out, " (", share.numel(),
                    "), got ", whole.numel());
}

void ProcessGroupRingx::checkTensorPairs(const std::vector<at::Tensor>& outputs,
                                         const std::vector<at::Tensor>& inputs, bool outputIsWhole,
                                         const char* collective) const {
  TORCH_CHECK_VALUE(!outputs.empty() && outputs.size() == inputs.size(), "ringx: ", collective,
                    " needs as many outputs as inputs (at least one), got ", outputs.size(),
                    " and ", inputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    checkTensorPair(outputs[i], inputs[i], outputIsWhole, collective, static_cast<int>(i));
    toDataType(inputs[i], collective);
  }
}

void ProcessGroupRingx::runReduceScatterInto(const at::Tensor& output, const at::Tensor& input,
                                             const ReduceSpec& reduce,
                                             std::chrono::milliseconds timeout) {
  const DataType dtype = toDataType(output, "reduce_scatter");
  Staged in(reduce.premultiplied(input));  // the input stays as the caller gave it
  Staged out(output);
  const double divideBy = reduce.divideBy(dtype, size_);
  group_->run(CollectiveKind::kReduceScatter, dtype, reduce.asked(), -1, timeout,
              [&](Collective& c) {
                algorithms::ringReduceScatter(c, in.data(), out.data(), output.numel(), dtype,
                                              reduce.op, group_->tuning().segmentBytes, divideBy);
              });
  reduce.finish(out.tensor(), size_, divideBy);
  out.copyBack();
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupRingx::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const ::c10d::ReduceScatterOptions& opts) {
  checkOpen("_reduce_scatter_base");
  if (auto work =
          ringOnCuda(OpType::_REDUCE_SCATTER_BASE, "ringx:_reduce_scatter_base",
                     CollectiveKind::kReduceScatter, output, input, &opts.reduceOp, opts.timeout)) {
    return work;  // the device ring: cuda_staging.h
  }
  if (auto work =
          stagedOnCuda(OpType::_REDUCE_SCATTER_BASE, "ringx:_reduce_scatter_base", output, input,
                       [&](auto& o, auto& i) { return _reduce_scatter_base(o, i, opts); })) {
    return work;  // CUDA tensors: cuda_staging.h
  }
  checkTensorPair(output, input, /*outputIsWhole=*/false, "_reduce_scatter_base", -1);
  const ReduceSpec reduce = toReduceSpec(opts.reduceOp, output, "_reduce_scatter_base");
  const auto timeout = callTimeout(opts.timeout);
  return enqueue(OpType::_REDUCE_SCATTER_BASE, "ringx:_reduce_scatter_base", {output}, opts.asyncOp,
                 [=, this] { runReduceScatterInto(output, input, reduce, timeout); });
}

// DTensor and functional collectives call this even for one tensor; FSDP2 with several.
// Each pair is one ring reduce-scatter, all in one Work (the tensors may differ in dtype).
c10::intrusive_ptr<::c10d::Work> ProcessGroupRingx::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const ::c10d::ReduceScatterOptions& opts) {
  checkOpen("reduce_scatter_tensor_coalesced");
  if (outputs.size() == 1 && inputs.size() == 1) {
    if (auto work = ringOnCuda(
            kReduceScatterTensorCoalesced, "ringx:reduce_scatter_tensor_coalesced",
            CollectiveKind::kReduceScatter, outputs[0], inputs[0], &opts.reduceOp, opts.timeout)) {
      return work;  // the device ring: cuda_staging.h
    }
  }
  if (auto work = stagedOnCuda(
          kReduceScatterTensorCoalesced, "ringx:reduce_scatter_tensor_coalesced", outputs, inputs,
          [&](auto& o, auto& i) { return reduce_scatter_tensor_coalesced(o, i, opts); })) {
    return work;  // CUDA tensors: cuda_staging.h
  }
  checkTensorPairs(outputs, inputs, /*outputIsWhole=*/false, "reduce_scatter_tensor_coalesced");
  std::vector<ReduceSpec> reduces;
  for (const at::Tensor& output : outputs) {
    reduces.push_back(toReduceSpec(opts.reduceOp, output, "reduce_scatter_tensor_coalesced"));
  }
  const auto timeout = callTimeout(opts.timeout);
  return enqueue(
      kReduceScatterTensorCoalesced, "ringx:reduce_scatter_tensor_coalesced", outputs, opts.asyncOp,
      [=, this] {
        for (size_t i = 0; i < outputs.size(); ++i) {
          runReduceScatterInto(outputs[i], inputs[i], reduces[i], timeout);
        }
      },
      static_cast<uint32_t>(outputs.size()));
}

// ---- broadcast ----------------------------------------------------------------------------------

c10::intrusive_ptr<::c10d::Work> ProcessGroupRingx::broadcast(
    std::vector<at::Tensor>& tensors, const ::c10d::BroadcastOptions& opts) {
  checkOpen("broadcast");
  if (auto work = stagedOnCuda(OpType::BROADCAST, "ringx:broadcast", tensors, tensors,
                               [&](auto& o, auto&) { return broadcast(o, opts); })) {
    return work;  // CUDA tensors: cuda_staging.h
  }
  at::Tensor tensor = checkSingle(tensors, "broadcast", "tensors");
  checkRoot(opts.rootRank, "broadcast");
  const DataType dtype = toDataType(tensor, "broadcast");
  const int root = static_cast<int>(opts.rootRank);
  const auto timeout = callTimeout(opts.timeout);
  return enqueue(OpType::BROADCAST, "ringx:broadcast", tensors, opts.asyncOp, [=, this] {
    Staged staged(tensor);
    group_->run(CollectiveKind::kBroadcast, dtype, ReduceOp::kSum, root, timeout,
                [&](Collective& c) {
                  algorithms::broadcast(c, staged.data(), byteSize(tensor), root, group_->tuning());
                });
    if (rank_ != root) staged.copyBack();
  });
}

void ProcessGroupRingx::broadcastCoalesced(std::vector<at::Tensor>& tensors, int src,
                                           int64_t bucketBytes) {
  checkOpen("broadcastCoalesced");
  checkRoot(src, "broadcast_coalesced");
  TORCH_CHECK_VALUE(bucketBytes > 0,
                    "ringx: broadcast_coalesced: bucket_bytes must be positive, got ", bucketBytes);
  // CUDA tensors (DDP's parameters on a GPU) are flattened on their device and broadcast as one
  // CUDA tensor per bucket (broadcast stages it, stream-ordered); CPU tensors through bytes.
  const bool onCuda = anyOnCuda(tensors);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string what = "tensors[" + std::to_string(i) + "]";
    checkTensor(tensors[i], "broadcast_coalesced", what.c_str(), /*cudaToo=*/onCuda);
    TORCH_CHECK_VALUE(tensors[i].device() == tensors[0].device(),
                      "ringx: broadcast_coalesced: ", what, " is on ", tensors[i].device(),
                      " but tensors[0] is on ", tensors[0].device(),
                      "; one call takes the tensors of one device");
    toDataType(tensors[i], "broadcast_coalesced");
  }
  // Buckets: consecutive tensors of one dtype up to bucketBytes (a larger tensor
  // gets a bucket of its own).
  std::vector<std::vector<at::Tensor>> buckets;
  size_t filled = 0;
  for (auto& t : tensors) {
    bool fits = !buckets.empty() && buckets.back()[0].scalar_type() == t.scalar_type() &&
                filled + byteSize(t) <= static_cast<size_t>(bucketBytes);
    if (!fits) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(t);
    filled += byteSize(t);
  }
  auto flatten = [&](const std::vector<at::Tensor>& bucket) {
    if (!onCuda) return flattenBytes(bucket);
    std::vector<at::Tensor> rows;
    for (const at::Tensor& t : bucket) rows.push_back(t.reshape({-1}));
    return at::cat(rows);  // one dtype per bucket
  };
  auto receiveBuffer = [&](const std::vector<at::Tensor>& bucket) {
    int64_t elements = 0;
    size_t bytes = 0;
    for (const at::Tensor& t : bucket) {
      elements += t.numel();
      bytes += byteSize(t);
    }
    return onCuda ? at::empty({elements}, bucket[0].options())
                  : at::empty({static_cast<int64_t>(bytes)}, at::kByte);
  };
  auto unflatten = [&](const at::Tensor& flat, std::vector<at::Tensor>& bucket) {
    if (!onCuda) return unflattenBytes(flat, bucket);
    int64_t offset = 0;
    for (at::Tensor& t : bucket) {
      t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  };
  // Flatten bucket k+1 while bucket k is on the wire; never more than two in flight. (On CUDA,
  // wait() orders the current stream, where the copies out of the flat tensor then run.)
  struct InFlight {
    std::vector<at::Tensor>* bucket;
    at::Tensor flat;
    c10::intrusive_ptr<::c10d::Work> work;
  };
  std::deque<InFlight> inFlight;
  auto drainOne = [&] {
    InFlight& front = inFlight.front();
    front.work->wait();
    if (rank_ != src) unflatten(front.flat, *front.bucket);
    inFlight.pop_front();
  };
  for (auto& bucket : buckets) {
    if (inFlight.size() == 2) drainOne();
    at::Tensor flat = rank_ == src ? flatten(bucket) : receiveBuffer(bucket);
    std::vector<at::Tensor> one{flat};
    ::c10d::BroadcastOptions opts;
    opts.rootRank = src;
    inFlight.push_back(InFlight{&bucket, flat, broadcast(one, opts)});
  }
  while (!inFlight.empty()) drainOne();
}

// ---- gather family ------------------------------------------------------------------------------

c10::intrusive_ptr<::c10d::Work> ProcessGroupRingx::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const ::c10d::AllgatherOptions& opts) {
  checkOpen("allgather");
  if (auto work = stagedOnCuda(OpType::ALLGATHER, "ringx:all_gather", outputs, inputs,
                               [&](auto& o, auto& i) { return allgather(o, i, opts); })) {
    return work;  // CUDA tensors: cuda_staging.h
  }
  at::Tensor input = checkSingle(inputs, "allgather", "input_tensor");
  TORCH_CHECK_VALUE(outputs.size() == 1,
                    "ringx: allgather expects one output list per process, got ", outputs.size());
  TORCH_CHECK_VALUE(static_cast<int>(outputs[0].size()) == size_,
                    "ringx: allgather: the output list "
                    "must hold one tensor per rank (",
                    size_, "), got ", outputs[0].size());
  for (int i = 0; i < size_; ++i) {
    checkLike(outputs[0][i], input, "allgather", "tensor_list[" + std::to_string(i) + "]");
  }
  toDataType(input, "allgather");
  const auto timeout = callTimeout(opts.timeout);
  std::vector<at::Tensor> outputList = outputs[0];
  return enqueue(OpType::ALLGATHER, "ringx:all_gather", outputList, opts.asyncOp,
                 [=, this]() mutable {
                   Staged in(input);
                   const size_t bytes = byteSize(input);
                   // Straight into the caller's tensors when they are contiguous.
                   std::vector<Staged> outs(outputList.begin(), outputList.end());
                   std::vector<void*> blocks;
                   for (auto& out : outs) blocks.push_back(out.data());
                   group_->run(CollectiveKind::kAllgather, toDataType(input, "allgather"),
                               ReduceOp::kSum, -1, timeout, [&](Collective& c) {
                                 algorithms::ringAllgatherInto(c, in.data(), blocks, bytes,
                                                               group_->tuning().segmentBytes);
                               });
                   for (auto& out : outs) out.copyBack();
                 });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupRingx::_allgather_base(
    at::Tensor& output, at::Tensor& input, const ::c10d::AllgatherOptions& opts) {
  checkOpen("_allgather_base");
  if (auto work = ringOnCuda(OpType::_ALLGATHER_BASE, "ringx:_all_gather_base",
                             CollectiveKind::kAllgather, output, input, nullptr, opts.timeout)) {
    return work;  // the device ring: cuda_staging.h
  }
  if (auto work = stagedOnCuda(OpType::_ALLGATHER_BASE, "ringx:_all_gather_base", output, input,
                               [&](auto& o, auto& i) { return _allgather_base(o, i, opts); })) {
    return work;  // CUDA tensors: cuda_staging.h
  }
  checkTensorPair(output, input, /*outputIsWhole=*/true, "_allgather_base", -1);
  toDataType(input, "_allgather_base");
  const auto timeout = callTimeout(opts.timeout);
  return enqueue(OpType::_ALLGATHER_BASE, "ringx:_all_gather_base", {output}, opts.asyncOp,
                 [=, this] { runAllgatherInto(output, input, timeout); });
}

void ProcessGroupRingx::runAllgatherInto(const at::Tensor& output, const at::Tensor& input,
                                         std::chrono::milliseconds timeout) {
  Staged in(input);
  Staged out(output);
  group_->run(CollectiveKind::kAllgather, toDataType(input, "allgather"), ReduceOp::kSum, -1,
              timeout, [&](Collective& c) {
                algorithms::ringAllgather(c, in.data(), out.data(), byteSize(input),
                                          group_->tuning().segmentBytes);
              });
  out.copyBack();
}

// DTensor and functional collectives call this even for one tensor; FSDP2 with several.
// Each pair is one ring all-gather, all in one Work (the tensors may differ in dtype).
c10::intrusive_ptr<::c10d::Work> ProcessGroupRingx::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const ::c10d::AllgatherOptions& opts) {
  checkOpen("allgather_into_tensor_coalesced");
  if (outputs.size() == 1 && inputs.size() == 1) {
    if (auto work =
            ringOnCuda(OpType::ALLGATHER_COALESCED, "ringx:all_gather_into_tensor_coalesced",
                       CollectiveKind::kAllgather, outputs[0], inputs[0], nullptr, opts.timeout)) {
      return work;  // the device ring: cuda_staging.h
    }
  }
  if (auto work = stagedOnCuda(
          OpType::ALLGATHER_COALESCED, "ringx:all_gather_into_tensor_coalesced", outputs, inputs,
          [&](auto& o, auto& i) { return allgather_into_tensor_coalesced(o, i, opts); })) {
    return work;  // CUDA tensors: cuda_staging.h
  }
  checkTensorPairs(outputs, inputs, /*outputIsWhole=*/true, "allgather_into_tensor_coalesced");
  const auto timeout = callTimeout(opts.timeout);
  return enqueue(
      OpType::ALLGATHER_COALESCED, "ringx:all_gather_into_tensor_coalesced", outputs, opts.asyncOp,
      [=, this] {
        for (size_t i = 0; i < outputs.size(); ++i)
          runAllgatherInto(outputs[i], inputs[i], timeout);
      },
      static_cast<uint32_t>(outputs.size()));
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupRingx::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
    const ::c10d::AllgatherOptions& opts) {
  checkOpen("allgather_coalesced");
  if (auto work =
          stagedOnCuda(OpType::ALLGATHER_COALESCED, "ringx:all_gather_coalesced", outputLists,
                       inputs, [&](auto& o, auto& i) { return allgather_coalesced(o, i, opts); })) {
    return work;  // CUDA tensors: cuda_staging.h
  }
  TORCH_CHECK_VALUE(static_cast<int>(outputLists.size()) == size_,
                    "ringx: allgather_coalesced: "
                    "expected one output list per rank (",
                    size_, "), got ", outputLists.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkTensor(inputs[i], "allgather_coalesced", "input_tensor_list");
  }
  for (int r = 0; r < size_; ++r) {
    TORCH_CHECK_VALUE(outputLists[r].size() == inputs.size(),
                      "ringx: allgather_coalesced: output list ", r, " holds ",
                      outputLists[r].size(), " tensors but there are ", inputs.size(), " inputs");
    for (size_t i = 0; i < inputs.size(); ++i) {
      checkLike(outputLists[r][i], inputs[i], "allgather_coalesced",
                "output_tensor_lists[" + std::to_string(r) + "][" + std::to_string(i) + "]");
    }
  }
  const auto timeout = callTimeout(opts.timeout);
  std::vector<at::Tensor> flatOutputs;
  for (auto& list : outputLists) flatOutputs.insert(flatOutputs.end(), list.begin(), list.end());
  // Any mix of dtypes: gathering moves bytes.
  return enqueue(OpType::ALLGATHER_COALESCED, "ringx:all_gather_coalesced", flatOutputs,
                 opts.asyncOp, [=, this]() mutable {
                   at::Tensor in = flattenBytes(inputs, &scratch_[1]);
                   const size_t bytes = byteSize(in);
                   at::Tensor flat = scratch(0, bytes * size_);
                   group_->run(CollectiveKind::kAllgather, DataType::kUInt8, ReduceOp::kSum, -1,
                               timeout, [&](Collective& c) {
                                 algorithms::ringAllgather(c, in.data_ptr(), flat.data_ptr(), bytes,
                                                           group_->tuning().segmentBytes);
                               });
                   unflattenBytes(flat, flatOutputs);
                 });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupRingx::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const ::c10d::GatherOptions& opts) {
  checkOpen("gather");
  if (auto work = stagedOnCuda(OpType::GATHER, "ringx:gather", outputs, inputs,
                               [&](auto& o, auto& i) { return gather(o, i, opts); })) {
    return work;  // CUDA tensors: cuda_staging.h
  }
  at::Tensor input = checkSingle(inputs, "gather", "tensor");
  checkRoot(opts.rootRank, "gather");
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> outputList = rootOnlyList(outputs, input, root, "gather", "gather_list");
  const DataType dtype = toDataType(input, "gather");
  const auto timeout = callTimeout(opts.timeout);
  return enqueue(OpType::GATHER, "ringx:gather", outputList, opts.asyncOp, [=, this]() mutable {
    Staged in(input);
    const size_t bytes = byteSize(input);
    at::Tensor flat = scratch(0, rank_ == root ? bytes * size_ : 0);
    group_->run(CollectiveKind::kGather, dtype, ReduceOp::kSum, root, timeout, [&](Collective& c) {
      algorithms::gather(c, in.data(), flat.data_ptr(), bytes, root);
    });
    if (rank_ == root) unflattenBytes(flat, outputList);
  });
}

#if RINGX_HAS_GATHER_SINGLE
c10::intrusive_ptr<::c10d::Work> ProcessGroupRingx::gather_single(
    at::Tensor& output, at::Tensor& input, const ::c10d::GatherOptions& opts) {
  checkOpen("gather_single");
  if (auto work = stagedOnCuda(OpType::GATHER, "ringx:gather_single", output, input,
                               [&](auto& o, auto& i) { return gather_single(o, i, opts); })) {
    return work;  // CUDA tensors: cuda_staging.h
  }
  checkRoot(opts.rootRank, "gather_single");
  const int root = static_cast<int>(opts.rootRank);
  if (rank_ == root) {
    checkTensorPair(output, input, /*outputIsWhole=*/true, "gather_single", -1);
  } else {
    checkTensor(input, "gather_single", "input");
  }
  const DataType dtype = toDataType(input, "gather_single");
  const auto timeout = callTimeout(opts.timeout);
  std::vector<at::Tensor> outputs;
  if (rank_ == root) outputs.push_back(output);
  return enqueue(OpType::GATHER, "ringx:gather_single", outputs, opts.asyncOp, [=, this] {
    Staged in(input);
    std::optional<Staged> out;
    if (rank_ == root) out.emplace(output);
    group_->run(CollectiveKind::kGather, dtype, ReduceOp::kSum, root, timeout, [&](Collective& c) {
      algorithms::gather(c, in.data(), out ? out->data() : nullptr, byteSize(input), root);
    });
    if (out) out->copyBack();
  });
}
#endif

c10::intrusive_ptr<::c10d::Work> ProcessGroupRingx::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const ::c10d::ScatterOptions& opts) {
  checkOpen("scatter");
  if (auto work = stagedOnCuda(OpType::SCATTER, "ringx:scatter", outputs, inputs,
                               [&](auto& o, auto& i) { return scatter(o, i, opts); })) {
    return work;  // CUDA tensors: cuda_staging.h
  }
  at::Tensor output = checkSingle(outputs, "scatter", "tensor");
  checkRoot(opts.rootRank, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> inputList = rootOnlyList(inputs, output, root, "scatter", "scatter_list");
  const DataType dtype = toDataType(output, "scatter");
  const auto timeout = callTimeout(opts.timeout);
  return enqueue(OpType::SCATTER, "ringx:scatter", outputs, opts.asyncOp, [=, this] {
    at::Tensor flat = rank_ == root ? flattenBytes(inputList, &scratch_[0]) : scratch(0, 0);
    Staged out(output);
    group_->run(CollectiveKind::kScatter, dtype, ReduceOp::kSum, root, timeout, [&](Collective& c) {
      algorithms::scatter(c, flat.data_ptr(), out.data(), byteSize(output), root);
    });
    out.copyBack();
  });
}

// ---- all-to-all ---------------------------------------------------------------------------------

c10::intrusive_ptr<::c10d::Work> ProcessGroupRingx::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplitSizes,
    std::vector<int64_t>& inputSplitSizes, const ::c10d::AllToAllOptions& opts) {
  checkOpen("alltoall_base");
  if (auto work = stagedOnCuda(
          OpType::ALLTOALL_BASE, "ringx:all_to_all", output, input, [&](auto& o, auto& i) {
            return alltoall_base(o, i, outputSplitSizes, inputSplitSizes, opts);
          })) {
    return work;  // CUDA tensors: cuda_staging.h
  }
  checkTensor(output, "alltoall_base", "output");
  checkTensor(input, "alltoall_base", "input");
  TORCH_CHECK_TYPE(input.scalar_type() == output.scalar_type(),
                   "ringx: alltoall_base: input dtype ", input.scalar_type(),
                   " differs from output dtype ", output.scalar_type());
  const DataType dtype = toDataType(input, "alltoall_base");
  // Split sizes count rows of dim 0; empty means equal splits.
  auto layout = [&](const at::Tensor& t, const std::vector<int64_t>& splits, const char* what,
                    std::vector<size_t>* offsets, std::vector<size_t>* bytes) {
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    const size_t rowBytes = rows == 0 ? 0 : byteSize(t) / rows;
    offsets->clear();
    bytes->clear();
    if (splits.empty()) {
      TORCH_CHECK_VALUE(rows % size_ == 0, "ringx: alltoall_base: ", what, " has ", rows,
                        " rows, which do not split evenly over ", size_,
                        " ranks; pass split sizes");
      for (int i = 0; i < size_; ++i) {
        offsets->push_back(i * (rows / size_) * rowBytes);
        bytes->push_back((rows / size_) * rowBytes);
      }
      return;
    }
    TORCH_CHECK_VALUE(static_cast<int>(splits.size()) == size_, "ringx: alltoall_base: ", what,
                      " split sizes must have one entry per rank (", size_, "), got ",
                      splits.size());
    int64_t sum = 0;
    for (int64_t s : splits) {
      TORCH_CHECK_VALUE(s >= 0, "ringx: alltoall_base: negative split size ", s, " in ", what);
      offsets->push_back(sum * rowBytes);
      bytes->push_back(s * rowBytes);
      sum += s;
    }
    TORCH_CHECK_VALUE(sum == rows, "ringx: alltoall_base: ", what, " split sizes add up to ", sum,
                      " but the tensor has ", rows, " rows");
  };
  std::vector<size_t> sendOffsets, sendBytes, recvOffsets, recvBytes;
  layout(input, inputSplitSizes, "input", &sendOffsets, &sendBytes);
  layout(output, outputSplitSizes, "output", &recvOffsets, &recvBytes);
  TORCH_CHECK_VALUE(sendBytes[rank_] == recvBytes[rank_], "ringx: alltoall_base: rank ", rank_,
                    " sends ", sendBytes[rank_], " bytes to itself but its output expects ",
                    recvBytes[rank_]);
  const auto timeout = callTimeout(opts.timeout);
  return enqueue(OpType::ALLTOALL_BASE, "ringx:all_to_all", {output}, opts.asyncOp, [=, this] {
    Staged in(input);
    Staged out(output);
    group_->run(CollectiveKind::kAlltoall, dtype, ReduceOp::kSum, -1, timeout, [&](Collective& c) {
      algorithms::alltoall(c, in.data(), sendOffsets, sendBytes, out.data(), recvOffsets,
                           recvBytes);
    });
    out.copyBack();
  });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupRingx::alltoall(std::vector<at::Tensor>& outputs,
                                                             std::vector<at::Tensor>& inputs,
                                                             const ::c10d::AllToAllOptions& opts) {
  checkOpen("alltoall");
  if (auto work = stagedOnCuda(OpType::ALLTOALL, "ringx:all_to_all", outputs, inputs,
                               [&](auto& o, auto& i) { return alltoall(o, i, opts); })) {
    return work;  // CUDA tensors: cuda_staging.h
  }
  TORCH_CHECK_VALUE(
      static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
      "ringx: alltoall needs one input and one output tensor per rank (", size_, "), got ",
      inputs.size(), " and ", outputs.size());
  for (int i = 0; i < size_; ++i) {
    checkTensor(inputs[i], "alltoall", "input_tensor_list");
    checkTensor(outputs[i], "alltoall", "output_tensor_list");
    TORCH_CHECK_TYPE(inputs[i].scalar_type() == inputs[0].scalar_type() &&
                         outputs[i].scalar_type() == inputs[0].scalar_type(),
                     "ringx: alltoall: all tensors must have the same dtype");
  }
  TORCH_CHECK_VALUE(inputs[rank_].numel() == outputs[rank_].numel(), "ringx: alltoall: rank ",
                    rank_, " sends ", inputs[rank_].numel(), " elements to itself but expects ",
                    outputs[rank_].numel());
  const DataType dtype = toDataType(inputs[0], "alltoall");
  std::vector<size_t> sendOffsets, sendBytes, recvOffsets, recvBytes;
  size_t sendTotal = 0, recvTotal = 0;
  for (int i = 0; i < size_; ++i) {
    sendOffsets.push_back(sendTotal);
    sendBytes.push_back(byteSize(inputs[i]));
    sendTotal += sendBytes.back();
    recvOffsets.push_back(recvTotal);
    recvBytes.push_back(byteSize(outputs[i]));
    recvTotal += recvBytes.back();
  }
  const auto timeout = callTimeout(opts.timeout);
  return enqueue(OpType::ALLTOALL, "ringx:all_to_all", outputs, opts.asyncOp, [=, this]() mutable {
    at::Tensor in = flattenBytes(inputs, &scratch_[1]);
    at::Tensor out = scratch(0, recvTotal);
    group_->run(CollectiveKind::kAlltoall, dtype, ReduceOp::kSum, -1, timeout, [&](Collective& c) {
      algorithms::alltoall(c, in.data_ptr(), sendOffsets, sendBytes, out.data_ptr(), recvOffsets,
                           recvBytes);
    });
    unflattenBytes(out, outputs);
  });
}

// ---- barrier ------------------------------------------------------------------------------------

c10::intrusive_ptr<::c10d::Work> ProcessGroupRingx::barrier(const ::c10d::BarrierOptions& opts) {
  checkOpen("barrier");
  const auto timeout = callTimeout(opts.timeout);
  return enqueue(OpType::BARRIER, "ringx:barrier", {}, opts.asyncOp, [=, this] {
    group_->run(CollectiveKind::kBarrier, DataType::kUInt8, ReduceOp::kSum, -1, timeout,
                [&](Collective& c) { algorithms::barrier(c, group_->tuning()); });
  });
}

// ---- point-to-point -----------------------------------------------------------------------------

namespace {
// Completes a point-to-point Work from the engine's callback; keeps the tensor alive.
PointToPoint::Callback completeWork(c10::intrusive_ptr<RingxWork> work, at::Tensor staging,
                                    at::Tensor target) {
  return [work, staging, target](std::exception_ptr error, int source) mutable {
    if (error) {
      work->markFailed(error);
      return;
    }
    if (!staging.is_same(target)) target.copy_(staging);
    work->markSuccess(source);
  };
}
}  // namespace

c10::intrusive_ptr<::c10d::Work> ProcessGroupRingx::send(std::vector<at::Tensor>& tensors,
                                                         int dstRank, int tag) {
  at::Tensor tensor = checkSingle(tensors, "send", "tensor");
  TORCH_CHECK_VALUE(dstRank >= 0 && dstRank < size_ && dstRank != rank_,
                    "ringx: send: destination rank ", dstRank, " is invalid (this is rank ", rank_,
                    " of ", size_, ")");
  checkOpen("send");
  at::Tensor contiguous = tensor.contiguous();
  auto work =
      c10::make_intrusive<RingxWork>(rank_, OpType::SEND, "ringx:send", tensors, group_->timeout());
  group_->p2p().send(dstRank, tag, contiguous.data_ptr(), byteSize(contiguous),
                     completeWork(work, contiguous, contiguous));
  noteIssued(work);
  return work;
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupRingx::recv(std::vector<at::Tensor>& tensors,
                                                         int srcRank, int tag) {
  TORCH_CHECK_VALUE(srcRank >= 0 && srcRank < size_ && srcRank != rank_,
                    "ringx: recv: source rank ", srcRank, " is invalid (this is rank ", rank_,
                    " of ", size_, ")");
  return postRecv(tensors, srcRank, tag, OpType::RECV, "ringx:recv");
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupRingx::recvAnysource(std::vector<at::Tensor>& tensors,
                                                                  int tag) {
  return postRecv(tensors, PointToPoint::kAnySource, tag, OpType::RECVANYSOURCE,
                  "ringx:recv_anysource");
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupRingx::postRecv(std::vector<at::Tensor>& tensors,
                                                             int srcRank, int tag, OpType type,
                                                             const char* title) {
  at::Tensor tensor = checkSingle(tensors, "recv", "tensor");
  checkOpen(title);
  at::Tensor staging =
      tensor.is_contiguous() ? tensor : at::empty_like(tensor, at::MemoryFormat::Contiguous);
  auto work = c10::make_intrusive<RingxWork>(rank_, type, title, tensors, group_->timeout());
  group_->p2p().recv(srcRank, tag, staging.data_ptr(), byteSize(staging),
                     completeWork(work, staging, tensor));
  noteIssued(work);
  return work;
}

}  // namespace ringx::c10d_glue
