// The communication thread's queue: order, runHereIfIdle (a synchronous caller
// runs its job itself, never ahead of or beside queued ones), runInPlace and
// runQueuedInPlace (jobs issued and waited for by a running job), and drainAll()
// (what Python's exit handler uses so that no job is released after the
// interpreter has finalised).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backend/device/work_queue.h"

namespace ringx {
namespace {

TEST(WorkQueue, RunsJobsInSubmissionOrder) {
  std::vector<int> order;
  {
    WorkQueue queue;
    for (int i = 0; i < 100; ++i) queue.submit([&order, i] { order.push_back(i); });
  }  // the destructor runs what was queued
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

TEST(WorkQueue, AnIdleQueueLetsTheCallerRunTheJobOnItsOwnThread) {
  WorkQueue queue;
  std::thread::id ranOn;
  EXPECT_TRUE(queue.runHereIfIdle([&] { ranOn = std::this_thread::get_id(); }));
  EXPECT_EQ(ranOn, std::this_thread::get_id());
}

TEST(WorkQueue, ACallerNeverOvertakesOrOverlapsQueuedJobs) {
  WorkQueue queue;
  std::atomic<bool> release{false};
  std::atomic<int> running{0}, overlapped{0};
  std::vector<int> order;
  auto job = [&](int i) {
    return [&, i] {
      if (running.fetch_add(1) != 0) overlapped++;
      order.push_back(i);
      running.fetch_sub(1);
    };
  };
  queue.submit([&] {
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  queue.submit(job(0));
  // The communication thread is busy and a job waits: the caller must queue instead.
  EXPECT_FALSE(queue.runHereIfIdle(job(-1)));
  release = true;
  ASSERT_TRUE(WorkQueue::drainAll(std::chrono::seconds(10)));
  EXPECT_TRUE(queue.runHereIfIdle(job(1000)));  // idle again: the caller runs it
  // Callers run inline while another thread keeps submitting: nothing may run
  // beside an inline job, and every job runs exactly once, each thread's in its own order.
  std::thread submitter([&] {
    for (int i = 1; i <= 200; ++i) queue.submit(job(i));
  });
  for (int i = 1001; i <= 1200; ++i) {
    if (!queue.runHereIfIdle(job(i))) queue.submit(job(i));
  }
  submitter.join();
  EXPECT_TRUE(WorkQueue::drainAll(std::chrono::seconds(10)));
  EXPECT_EQ(overlapped.load(), 0);
  ASSERT_EQ(order.size(), 402u);
  int lastSubmitted = 0, lastCaller = 999;
  for (size_t k = 1; k < order.size(); ++k) {
    int& last = order[k] >= 1000 ? lastCaller : lastSubmitted;
    EXPECT_GT(order[k], last);
    last = order[k];
  }
  EXPECT_EQ(order[0], 0);
  EXPECT_EQ(order[1], 1000);
}

TEST(WorkQueue, AJobIssuedFromARunningJobRunsInPlaceAheadOfQueuedOnes) {
  WorkQueue queue, other;
  std::vector<std::string> order;
  std::atomic<bool> go{false};
  EXPECT_FALSE(queue.runInPlace([] {}));  // not inside one of its jobs
  EXPECT_FALSE(queue.runningHere());
  queue.submit([&] {
    while (!go.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    order.push_back("first");
    // A Future callback of "first" issues two more, the second from inside the first (two
    // deep), and one on another queue, which does not run here.
    EXPECT_TRUE(queue.runningHere());
    EXPECT_FALSE(other.runningHere());
    EXPECT_FALSE(other.runInPlace([] {}));
    EXPECT_TRUE(queue.runInPlace([&] {
      order.push_back("callback");
      EXPECT_TRUE(queue.runInPlace([&] { order.push_back("nested"); }));
    }));
  });
  queue.submit([&] { order.push_back("queued"); });  // issued before the callback ran
  go = true;
  ASSERT_TRUE(WorkQueue::drainAll(std::chrono::seconds(10)));
  EXPECT_EQ(order, (std::vector<std::string>{"first", "callback", "nested", "queued"}));
  // A caller's inline job counts as running one of the queue's jobs too.
  bool inside = false;
  EXPECT_TRUE(queue.runHereIfIdle([&] { inside = queue.runInPlace([] {}); }));
  EXPECT_TRUE(inside);
}

TEST(WorkQueue, AJobWaitingForAQueuedOneRunsTheQueueUpToItInOrder) {
  WorkQueue queue;
  std::vector<int> order;
  std::atomic<bool> go{false};
  std::atomic<bool> thirdDone{false};
  queue.submit([&] {
    while (!go.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    order.push_back(1);
    // Waits for job 3, queued behind it: jobs 2 and 3 run here, 4 stays queued.
    EXPECT_TRUE(queue.runQueuedInPlace([&] { return thirdDone.load(); }));
    order.push_back(100);
  });
  queue.submit([&] { order.push_back(2); });
  queue.submit([&] {
    order.push_back(3);
    thirdDone = true;
  });
  queue.submit([&] { order.push_back(4); });
  EXPECT_FALSE(queue.runQueuedInPlace([] { return false; }));  // not on a job's thread
  go = true;
  ASSERT_TRUE(WorkQueue::drainAll(std::chrono::seconds(10)));
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 100, 4}));
}

TEST(WorkQueue, DrainAllWaitsUntilEarlierJobsAreRunAndDestroyed) {
  WorkQueue a, b;
  auto released = std::make_shared<std::atomic<int>>(0);
  struct Captured {  // stands for a job's tensors
    explicit Captured(std::shared_ptr<std::atomic<int>> counter) : released(std::move(counter)) {}
    ~Captured() { released->fetch_add(1); }
    std::shared_ptr<std::atomic<int>> released;
  };
  std::atomic<bool> go{false};
  for (WorkQueue* q : {&a, &b}) {
    auto captured = std::make_shared<Captured>(released);
    q->submit([captured, &go] {
      while (!go.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  }
  EXPECT_EQ(released->load(), 0);  // the jobs still own them
  go = true;
  EXPECT_TRUE(WorkQueue::drainAll(std::chrono::seconds(10)));
  EXPECT_EQ(released->load(), 2);
}

TEST(WorkQueue, DrainAllGivesUpOnAStuckQueue) {
  std::atomic<bool> release{false};
  WorkQueue stuck;
  stuck.submit([&release] {
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  EXPECT_FALSE(WorkQueue::drainAll(std::chrono::milliseconds(50)));
  release = true;
}

}  // namespace
}  // namespace ringx
