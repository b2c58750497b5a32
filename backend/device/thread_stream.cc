#include "backend/device/thread_stream.h"

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>

namespace ringx::device {
namespace {

class ThreadEvent : public DeviceEvent {
 public:
  void complete() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    completed_.notify_all();
  }

  bool query() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_;
  }

  void synchronize() override {
    std::unique_lock<std::mutex> lock(mutex_);
    completed_.wait(lock, [&] { return done_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable completed_;
  bool done_ = false;
};

class ThreadSignal : public HostSignal {
 public:
  void raise() { raised_.store(true, std::memory_order_release); }
  bool reached() override { return raised_.load(std::memory_order_acquire); }

 private:
  std::atomic<bool> raised_{false};
};

class ThreadGate : public HostGate {
 public:
  void open() override { opened_.set_value(); }
  void wait() { opened_.get_future().wait(); }

 private:
  std::promise<void> opened_;
};

}  // namespace

std::shared_ptr<DeviceEvent> ThreadStream::record() {
  auto event = std::make_shared<ThreadEvent>();
  enqueue([event] { event->complete(); });
  return event;
}

void ThreadStream::wait(const std::shared_ptr<DeviceEvent>& event) {
  // The worker blocks, so only this stream's later work waits: as cudaStreamWaitEvent.
  enqueue([event] { event->synchronize(); });
}

std::shared_ptr<HostSignal> ThreadStream::signalHost() {
  auto signal = std::make_shared<ThreadSignal>();
  enqueue([signal] { signal->raise(); });
  return signal;
}

std::shared_ptr<HostGate> ThreadStream::waitForHost() {
  auto gate = std::make_shared<ThreadGate>();
  enqueue([gate] { gate->wait(); });
  return gate;
}

}  // namespace ringx::device
