#include "backend/device/stream_ordering.h"

namespace ringx::device {

std::shared_ptr<OrderedCollective> OrderedCollective::enqueue(DeviceStream& caller,
                                                              DeviceStream& comm, const Body& body,
                                                              std::shared_ptr<void> keepAlive,
                                                              OnComplete onComplete) {
  std::shared_ptr<OrderedCollective> self(new OrderedCollective());
  comm.wait(caller.record());  // 1: after the caller's work so far
  try {
    body(comm);  // 2: the collective's device work, on the communication stream
  } catch (...) {
    std::lock_guard<std::mutex> lock(self->mutex_);
    self->error_ = std::current_exception();
  }
  self->done_ = comm.record();
  // 4: complete the future and let go of the buffers only once the device is done with them.
  comm.launchHostFunc(
      [self, keepAlive = std::move(keepAlive), onComplete = std::move(onComplete)]() mutable {
        keepAlive.reset();
        if (onComplete) onComplete(self->error());
      });
  return self;
}

void OrderedCollective::blockStream(DeviceStream& stream) {
  if (std::exception_ptr failed = error()) std::rethrow_exception(failed);
  stream.wait(done_);
}

bool OrderedCollective::isCompleted() { return done_->query(); }

void OrderedCollective::synchronize() {
  done_->synchronize();
  if (std::exception_ptr failed = error()) std::rethrow_exception(failed);
}

std::exception_ptr OrderedCollective::error() {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

}  // namespace ringx::device
