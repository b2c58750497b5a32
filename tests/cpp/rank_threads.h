// Test harness: runs every rank of a group as a thread of this process, over an
// in-memory store and real TCP loopback connections (gloo's test style).
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backend/algorithms/algorithms.h"
#include "backend/group/group.h"
#include "backend/store/store.h"

namespace ringx::testing {

// The options of rank `rank` of a test group of `size` over `store`.
inline GroupOptions groupOptions(int rank, int size, std::shared_ptr<Store> store,
                                 std::chrono::seconds timeout) {
  GroupOptions options;
  options.rank = rank;
  options.size = size;
  options.store = std::move(store);
  options.timeout = timeout;
  return options;
}

// A group whose ranks are runThreads' threads (60 s timeout, named "test").
inline GroupOptions testOptions(int rank, int size, std::shared_ptr<Store> store) {
  GroupOptions options = groupOptions(rank, size, std::move(store), std::chrono::seconds(60));
  options.name = "test";
  return options;
}

// Calls body(rank) on `size` threads; rethrows the first exception of any rank.
inline void runThreads(int size, const std::function<void(int rank)>& body) {
  std::vector<std::exception_ptr> errors(size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        body(rank);
      } catch (...) {
        errors[rank] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

// Creates a connected Group per rank and calls body(group).
inline void runGroup(int size, const std::function<void(Group& group)>& body,
                     const std::function<void(GroupOptions&)>& configure = nullptr) {
  auto store = std::make_shared<InMemoryStore>();
  runThreads(size, [&](int rank) {
    GroupOptions options = testOptions(rank, size, store);
    if (configure) configure(options);
    Group group(options);
    body(group);
  });
}

// What `fn` threw (its what()), or "" when it returned.
inline std::string messageOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// One float32 sum allreduce of `data` on `group` (0 ms: the group's timeout).
inline void allreduceFloats(Group& group, std::vector<float>& data,
                            std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
  group.run(algorithms::CollectiveKind::kAllreduce, DataType::kFloat32, ReduceOp::kSum, -1, timeout,
            [&](algorithms::Collective& c) {
              algorithms::allreduce(c, data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum,
                                    group.tuning());
            });
}

}  // namespace ringx::testing
