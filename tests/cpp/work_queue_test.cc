// The communication thread's queue: order, and drainAll() (what Python's exit
// handler uses so that no job is released after the interpreter has finalised).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "backend/group/work_queue.h"

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
