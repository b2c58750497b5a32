// A DeviceStream on the CPU: a WorkQueue (one thread, jobs in order, as a group's
// communication thread) runs the stream's work items. It gives the stream-ordering logic the
// same semantics a CUDA stream has (the host enqueues and goes on; events complete in stream
// order; a stream-side wait holds back only later work on that stream), so that logic is
// tested where there is no GPU.
#pragma once

#include <functional>
#include <memory>

#include "backend/device/device_stream.h"
#include "backend/device/work_queue.h"

namespace ringx::device {

class ThreadStream : public DeviceStream {
 public:
  // Enqueues a work item (the CPU's "kernel launch"). Destroying the stream finishes the work
  // already enqueued.
  void enqueue(std::function<void()> work) { queue_.submit(std::move(work)); }

  std::shared_ptr<DeviceEvent> record() override;
  void wait(const std::shared_ptr<DeviceEvent>& event) override;
  std::shared_ptr<HostSignal> signalHost() override;
  std::shared_ptr<HostGate> waitForHost() override;

 private:
  WorkQueue queue_;
};

}  // namespace ringx::device
