#include "backend/c10d/work.h"

#include <ATen/record_function.h>

#include "backend/c10d/torch_errors.h"
#include "base/error.h"
#include "trace/record/recorder.h"

namespace ringx::c10d_glue {

// c10d::Work makes a RecordFunction for a profiling title, on the heap, even when no profiler
// listens; it keeps nothing of it then. So the title goes only to a Work that a profiler will
// see. The Future's type is torch's one list-of-tensors type rather than a new one per call.
RingxWork::RingxWork(int rank, ::c10d::OpType opType, const char* profilingTitle,
                     std::vector<at::Tensor> outputs, std::chrono::milliseconds waitLimit)
    : ::c10d::Work(rank, opType, at::hasCallbacks() ? profilingTitle : nullptr),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors())),
      waitLimit_(waitLimit) {}

c10::intrusive_ptr<RingxWork> RingxWork::whenAll(
    int rank, ::c10d::OpType opType, const std::vector<c10::intrusive_ptr<RingxWork>>& works,
    std::chrono::milliseconds waitLimit) {
  std::vector<at::Tensor> outputs;
  for (const auto& work : works) {
    for (const at::Tensor& t : work->outputs_) outputs.push_back(t);
  }
  auto all = c10::make_intrusive<RingxWork>(rank, opType, "ringx:coalesced", std::move(outputs),
                                            waitLimit);
  if (works.empty()) {
    all->markSuccess();
    return all;
  }
  // The last of the works to finish completes `all`; the first error is the one reported.
  struct Pending {
    std::mutex mutex;
    size_t left;
    std::exception_ptr error;
  };
  auto pending = std::make_shared<Pending>();
  pending->left = works.size();
  for (const auto& work : works) {
    work->future_->addCallback([all, pending](c10::ivalue::Future& done) {
      std::exception_ptr error;
      {
        std::lock_guard<std::mutex> lock(pending->mutex);
        if (done.hasError() && !pending->error) pending->error = done.exception_ptr();
        if (--pending->left > 0) return;
        error = pending->error;
      }
      if (error) {
        all->markFailed(error);
      } else {
        all->markSuccess();
      }
    });
  }
  return all;
}

void RingxWork::markStarted(int64_t startedNs, int64_t seq) {
  seq_.store(seq, std::memory_order_release);
  startedNs_.store(startedNs, std::memory_order_release);
}

void RingxWork::markSuccess(int sourceRank) {
  finishedNs_.store(trace::nowNs(), std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    sourceRank_ = sourceRank;
  }
  finish();
  future_->markCompleted(c10::IValue(outputs_));
}

void RingxWork::markFailed(std::exception_ptr error) {
  error = asBackendError(error);
  finishedNs_.store(trace::nowNs(), std::memory_order_release);
  finish(error);
  future_->setError(error);
}

int RingxWork::sourceRank() const {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(completed_, "ringx: sourceRank() is only known once the receive has completed");
  return sourceRank_;
}

bool RingxWork::wait(std::chrono::milliseconds timeout) {
  if (queue_ != nullptr && !isCompleted()) {
    queue_->runQueuedInPlace([this] { return isCompleted(); });
  }
  const bool userLimit = timeout != kNoTimeout;
  const auto limit = userLimit ? timeout : waitLimit_;
  std::unique_lock<std::mutex> lock(mutex_);
  if (limit.count() > 0) {
    if (!cv_.wait_for(lock, limit, [&] { return completed_; })) {
      C10_THROW_ERROR(
          DistBackendError,
          strCat("ringx: ", ::c10d::opTypeToString(opType_), " on rank ", rank_,
                 " did not complete within ", limit.count(), " ms",
                 userLimit ? " (the timeout given to wait())" : " (the process group's timeout)"));
    }
  } else {
    cv_.wait(lock, [&] { return completed_; });
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

}  // namespace ringx::c10d_glue
