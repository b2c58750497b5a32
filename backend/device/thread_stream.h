// A DeviceStream on the CPU: one worker thread runs the stream's work items in order. It gives
// the stream-ordering logic the same semantics a CUDA stream has (the host enqueues and goes
// on; events complete in stream order; a stream-side wait holds back only later work on that
// stream), so that logic is tested where there is no GPU.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "backend/device/device_stream.h"

namespace ringx::device {

class ThreadStream : public DeviceStream {
 public:
  ThreadStream();
  // Finishes the work already enqueued, then stops the thread.
  ~ThreadStream() override;

  // Enqueues a work item (the CPU's "kernel launch").
  void enqueue(std::function<void()> work);

  std::shared_ptr<DeviceEvent> record() override;
  void wait(const std::shared_ptr<DeviceEvent>& event) override;
  void launchHostFunc(std::function<void()> fn) override;

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ringx::device
