#include "backend/device/stream_ordering.h"

#include <algorithm>
#include <thread>

namespace ringx::device {

std::shared_ptr<OrderedCollective> OrderedCollective::enqueue(DeviceStream& caller,
                                                              DeviceStream& comm, const Body& body,
                                                              std::shared_ptr<void> keepAlive,
                                                              OnComplete onComplete,
                                                              WorkQueue& completions) {
  std::shared_ptr<OrderedCollective> self(new OrderedCollective());
  comm.wait(caller.record());  // 1: after the caller's work so far
  try {
    body(comm);  // 2: the collective's device work, on the communication stream
  } catch (...) {
    self->fail(std::current_exception());
  }
  self->finishEnqueue(comm, std::move(keepAlive), std::move(onComplete), completions);
  return self;
}

std::shared_ptr<OrderedCollective> OrderedCollective::enqueueStaged(
    DeviceStream& caller, DeviceStream& comm, const Body& copyIn, const HostPart& hostPart,
    const Body& copyOut, std::shared_ptr<void> keepAlive, OnComplete onComplete,
    WorkQueue& completions) {
  std::shared_ptr<OrderedCollective> self(new OrderedCollective());
  comm.wait(caller.record());
  std::shared_ptr<HostGate> gate;
  bool handedToHost = false;
  try {
    copyIn(comm);
    std::shared_ptr<HostSignal> inputsStaged = comm.signalHost();
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
  self->finishEnqueue(comm, std::move(keepAlive), std::move(onComplete), completions);
  return self;
}

void OrderedCollective::fail(std::exception_ptr error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!error_) error_ = error;
}

void OrderedCollective::finishEnqueue(DeviceStream& comm, std::shared_ptr<void> keepAlive,
                                      OnComplete onComplete, WorkQueue& completions) {
  done_ = comm.record();
  // 4: complete the future and let go of the buffers only once the device is done with them.
  completions.submit([self = shared_from_this(), keepAlive = std::move(keepAlive),
                      onComplete = std::move(onComplete)]() mutable {
    try {
      self->done_->synchronize();
    } catch (...) {
      self->fail(std::current_exception());  // the device failed (a sticky CUDA error)
    }
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

bool waitUntilReached(HostSignal& signal, Deadline deadline) {
  auto pause = std::chrono::microseconds(1);
  for (unsigned polls = 0; !signal.reached(); ++polls) {
    if (polls < 64) continue;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(200));
  }
  return true;
}

}  // namespace ringx::device
