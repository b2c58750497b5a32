#include "backend/group/work_queue.h"

#include <atomic>
#include <memory>
#include <set>

namespace ringx {
namespace {

struct Registry {
  std::mutex mutex;
  std::set<WorkQueue*> queues;
};
Registry& registry() {
  static Registry* r = new Registry();  // used from exit handlers: never destroyed
  return *r;
}

}  // namespace

WorkQueue::WorkQueue() : thread_([this] { loop(); }) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  registry().queues.insert(this);
}

bool WorkQueue::drainAll(std::chrono::milliseconds limit) {
  auto done = std::make_shared<std::atomic<size_t>>(0);
  size_t submitted = 0;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    for (WorkQueue* queue : registry().queues) {
      // Runs after every earlier job, each destroyed at the end of its turn.
      queue->submit([done] { done->fetch_add(1); });
      ++submitted;
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (done->load() < submitted) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

WorkQueue::~WorkQueue() {
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    registry().queues.erase(this);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void WorkQueue::submit(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  wake_.notify_one();
}

void WorkQueue::loop() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    // Jobs report their own errors (through their Work); nothing escapes here.
    job();
  }
}

}  // namespace ringx
