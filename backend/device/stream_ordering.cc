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
    self->fail(std::current_exception());
  }
  self->finishEnqueue(comm, std::move(keepAlive), std::move(onComplete));
  return self;
}

std::shared_ptr<OrderedCollective> OrderedCollective::enqueueStaged(
    DeviceStream& caller, DeviceStream& comm, const Body& copyIn, const HostPart& hostPart,
    const Body& copyOut, std::shared_ptr<void> keepAlive, OnComplete onComplete) {
  std::shared_ptr<OrderedCollective> self(new OrderedCollective());
  comm.wait(caller.record());
  std::shared_ptr<HostGate> gate;
  bool handedToHost = false;
  try {
    copyIn(comm);
    std::shared_ptr<DeviceEvent> inputsStaged = comm.record();
    gate = comm.waitForHost();
    copyOut(comm);  // held back by the gate until the host has written the results
    hostPart(inputsStaged, [self, gate](std::exception_ptr error) {
      if (error) self->fail(error);
      gate->open();
    });
    handedToHost = true;
  } catch (...) {
    self->fail(std::current_exception());
  }
  if (gate && !handedToHost) gate->open();
  self->finishEnqueue(comm, std::move(keepAlive), std::move(onComplete));
  return self;
}

void OrderedCollective::fail(std::exception_ptr error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!error_) error_ = error;
}

void OrderedCollective::finishEnqueue(DeviceStream& comm, std::shared_ptr<void> keepAlive,
                                      OnComplete onComplete) {
  done_ = comm.record();
  // 4: complete the future and let go of the buffers only once the device is done with them.
  comm.launchHostFunc([self = shared_from_this(), keepAlive = std::move(keepAlive),
                       onComplete = std::move(onComplete)]() mutable {
    keepAlive.reset();
    if (onComplete) onComplete(self->error());
  });
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
