// The Work returned by every ringx call.
//
// It completes on the communication thread (collectives) or the point-to-point
// thread (send/recv) and carries a Future holding the output tensors, which is
// what DDP's communication hooks chain on. The Future's callbacks run where it
// completes; collectives they issue on the same group run there in place
// (work_queue.h). wait() without a timeout still ends: collectives carry their
// own deadline, and point-to-point waits are bounded by the group's timeout,
// like gloo's.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "backend/device/work_queue.h"

namespace ringx::c10d_glue {

class RingxWork : public ::c10d::Work {
 public:
  RingxWork(int rank, ::c10d::OpType opType, const char* profilingTitle,
            std::vector<at::Tensor> outputs, std::chrono::milliseconds waitLimit);

  // A Work that completes when every one of `works` has (failing with the first error), with
  // their outputs: what endCoalescing returns.
  static c10::intrusive_ptr<RingxWork> whenAll(
      int rank, ::c10d::OpType opType, const std::vector<c10::intrusive_ptr<RingxWork>>& works,
      std::chrono::milliseconds waitLimit);

  // The queue this Work's job was submitted to (not run at once). A callback running on
  // that queue that waits for this Work runs the queue up to it in place
  // (WorkQueue::runQueuedInPlace): queued behind the callback, it would never start.
  void queuedOn(WorkQueue* queue) { queue_ = queue; }

  // Called exactly once from the thread that ran the operation.
  void markSuccess(int sourceRank = -1);
  void markFailed(std::exception_ptr error);

  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  std::vector<at::Tensor> result() override { return outputs_; }
  int sourceRank() const override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  // When the communication thread began and ended this operation (trace::nowNs;
  // 0 until then) and the sequence number its group gave it (-1 until then). The
  // DDP engine reads them for its per-bucket "wire" times.
  void markStarted(int64_t startedNs, int64_t seq);
  int64_t startedNs() const { return startedNs_.load(std::memory_order_acquire); }
  int64_t finishedNs() const { return finishedNs_.load(std::memory_order_acquire); }
  int64_t seq() const { return seq_.load(std::memory_order_acquire); }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  const std::chrono::milliseconds waitLimit_;
  // Only compared with the queues the waiting thread runs jobs of (WorkQueue::runningHere),
  // which are alive: never used after its group is gone.
  WorkQueue* queue_ = nullptr;
  int sourceRank_ = -1;
  std::atomic<int64_t> startedNs_{0};
  std::atomic<int64_t> finishedNs_{0};
  std::atomic<int64_t> seq_{-1};
};

}  // namespace ringx::c10d_glue
