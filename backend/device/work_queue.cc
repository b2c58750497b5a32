#include "backend/device/work_queue.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <set>
#include <vector>

#include "backend/transport/context.h"

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

// The queues whose jobs this thread is running, innermost last: a job of one group may
// complete a Future whose callback runs a collective of another group on the same thread.
thread_local std::vector<const WorkQueue*> runningOnThisThread;

// Marks the calling thread as running one of `queue`'s jobs for its lifetime.
class Running {
 public:
  explicit Running(const WorkQueue* queue) { runningOnThisThread.push_back(queue); }
  ~Running() { runningOnThisThread.pop_back(); }
  Running(const Running&) = delete;
  Running& operator=(const Running&) = delete;
};

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

bool WorkQueue::runHereIfIdle(const std::function<void()>& job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (busy_ || !jobs_.empty() || stopping_) return false;
    busy_ = true;
  }
  {
    transport::PatientWaits patient;  // this thread waits for the job anyway
    Running running(this);
    job();
  }
  bool more;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    busy_ = false;
    // Submitted by another thread meanwhile (or the queue is being destroyed): go on.
    more = !jobs_.empty() || stopping_;
  }
  if (more) wake_.notify_one();
  return true;
}

bool WorkQueue::runningHere() const {
  return std::find(runningOnThisThread.begin(), runningOnThisThread.end(), this) !=
         runningOnThisThread.end();
}

bool WorkQueue::runInPlace(const std::function<void()>& job) {
  if (!runningHere()) return false;
  // busy_ stays set by the job this one runs inside: nothing else starts meanwhile.
  job();
  return true;
}

bool WorkQueue::runQueuedInPlace(const std::function<bool()>& done) {
  if (!runningHere()) return false;
  while (!done()) {
    std::function<void()> job;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (jobs_.empty()) break;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
  return true;
}

void WorkQueue::loop() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return !busy_ && (stopping_ || !jobs_.empty()); });
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
      busy_ = true;
    }
    // Jobs report their own errors (through their Work); nothing escapes here.
    {
      Running running(this);
      job();
    }
    job = nullptr;  // its captures go before the next caller may run one inline
    std::lock_guard<std::mutex> lock(mutex_);
    busy_ = false;
  }
}

}  // namespace ringx
