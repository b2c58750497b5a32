// Failure behaviour: mismatched calls, timeouts and dead peers become errors on
// every rank that name the collective, its sequence number and the peer.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "backend/bootstrap/sockets.h"
#include "backend/transport/tcp/pair.h"
#include "tests/cpp/rank_threads.h"

namespace ringx {
namespace {

using algorithms::Collective;
using algorithms::CollectiveKind;
using testing::allreduceFloats;
using testing::messageOf;
using testing::runThreads;
using testing::testOptions;

TEST(Failure, SizeMismatchIsAnErrorOnBothSides) {
  auto store = std::make_shared<InMemoryStore>();
  std::vector<std::string> messages(2);
  runThreads(2, [&](int rank) {
    Group group(testOptions(rank, 2, store));
    std::vector<float> data(rank == 0 ? 16 : 32, 1.0f);
    messages[rank] = messageOf([&] { allreduceFloats(group, data); });
  });
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_NE(messages[rank].find("allreduce #0"), std::string::npos) << messages[rank];
    EXPECT_NE(messages[rank].find("mismatch"), std::string::npos) << messages[rank];
    EXPECT_NE(messages[rank].find("64 bytes"), std::string::npos) << messages[rank];
    EXPECT_NE(messages[rank].find("128 bytes"), std::string::npos) << messages[rank];
  }
}

TEST(Failure, DifferentCollectivesAreAMismatch) {
  auto store = std::make_shared<InMemoryStore>();
  std::vector<std::string> messages(2);
  runThreads(2, [&](int rank) {
    Group group(testOptions(rank, 2, store));
    std::vector<char> data(64);
    messages[rank] = messageOf([&] {
      if (rank == 0) {
        group.run(CollectiveKind::kBroadcast, DataType::kUInt8, ReduceOp::kSum, 0, {},
                  [&](Collective& c) { algorithms::chainBroadcast(c, data.data(), 64, 0, 4096); });
      } else {
        group.run(CollectiveKind::kBroadcast, DataType::kUInt8, ReduceOp::kSum, 0, {},
                  [&](Collective& c) { algorithms::chainBroadcast(c, data.data(), 32, 0, 4096); });
      }
    });
  });
  // Only the receiving side can see the sender's header in a broadcast.
  EXPECT_NE(messages[1].find("mismatch"), std::string::npos) << messages[1];
  EXPECT_NE(messages[1].find("broadcast #0"), std::string::npos) << messages[1];
}

TEST(Failure, StuckPeerIsATimeoutNamingIt) {
  auto store = std::make_shared<InMemoryStore>();
  std::string message;
  std::atomic<bool> done{false};
  runThreads(2, [&](int rank) {
    Group group(testOptions(rank, 2, store));
    if (rank == 1) {  // never calls the collective, stays alive
      while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return;
    }
    std::vector<float> data(1000, 1.0f);
    auto start = std::chrono::steady_clock::now();
    message = messageOf([&] { allreduceFloats(group, data, std::chrono::milliseconds(300)); });
    auto took = std::chrono::steady_clock::now() - start;
    EXPECT_LT(took, std::chrono::seconds(5));
    done = true;
  });
  EXPECT_NE(message.find("timed out"), std::string::npos) << message;
  EXPECT_NE(message.find("rank 1"), std::string::npos) << message;
  EXPECT_NE(message.find("allreduce #0"), std::string::npos) << message;
}

// A store that stops answering once cut, as a TCPStore across a partition does (no deadline on
// check or set): calls block until the test releases them at its end. Counts the calls that did.
class UnreachableStore : public Store {
 public:
  void cut() { cut_ = true; }
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    released_ = true;
    wake_.notify_all();
  }
  int blockedCalls() const { return blockedCalls_; }
  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    block();
    inner_.set(key, value);
  }
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override {
    block();
    return inner_.get(key, timeout);
  }
  bool check(const std::string& key) override {
    block();
    return inner_.check(key);
  }
  int64_t add(const std::string& key, int64_t delta) override {
    block();
    return inner_.add(key, delta);
  }

 private:
  void block() {
    if (!cut_) return;
    ++blockedCalls_;
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait(lock, [&] { return released_; });
  }
  InMemoryStore inner_;
  std::atomic<bool> cut_{false};
  std::atomic<int> blockedCalls_{0};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool released_ = false;
};

TEST(Failure, AnUnreachableStoreNeitherDelaysTheErrorNorHoldsAThread) {
  auto store = std::make_shared<UnreachableStore>();
  std::vector<std::string> messages(3);
  std::vector<std::chrono::steady_clock::duration> took(3);
  std::atomic<bool> done{false};
  std::atomic<int> constructed{0};
  // Should a store call creep back onto the failure path, it would block: release the store
  // after 5 s so that the checks below fail instead of the test hanging.
  std::thread releaser([&] {
    for (int i = 0; i < 500 && !done; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    store->release();
  });
  runThreads(3, [&](int rank) {
    Group group(testOptions(rank, 3, store));
    if (++constructed == 3) store->cut();
    while (constructed < 3) std::this_thread::yield();
    if (rank == 2) {  // alive but silent, like a peer across the partition
      while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return;
    }
    std::vector<float> data(1000, 1.0f);
    auto start = std::chrono::steady_clock::now();
    messages[rank] =
        messageOf([&] { allreduceFloats(group, data, std::chrono::milliseconds(300)); });
    took[rank] = std::chrono::steady_clock::now() - start;
    if (rank == 0) done = true;
  });
  done = true;
  releaser.join();
  EXPECT_EQ(store->blockedCalls(), 0);
  for (int rank : {0, 1}) {
    EXPECT_LT(took[rank], std::chrono::milliseconds(300 + 1000)) << "rank " << rank;
    EXPECT_NE(messages[rank].find("allreduce #0"), std::string::npos) << messages[rank];
  }
}

TEST(Failure, APeerThatOnlySeesTheConnectionCloseIsToldWhy) {
  // Three ranks: rank 1 calls with a different size. Rank 0 (whose left neighbour, rank 2,
  // made the same call) only sees rank 2's connection close when rank 2 aborts; the reason
  // comes to it as a failure notice.
  auto store = std::make_shared<InMemoryStore>();
  std::vector<std::string> messages(3);
  runThreads(3, [&](int rank) {
    Group group(testOptions(rank, 3, store));
    // Large enough for the ring, where each rank checks only its left neighbour's call.
    std::vector<float> data(rank == 1 ? 2 << 18 : 1 << 18, 1.0f);
    messages[rank] = messageOf([&] { allreduceFloats(group, data); });
  });
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_NE(messages[rank].find("allreduce #0"), std::string::npos) << messages[rank];
    EXPECT_NE(messages[rank].find("mismatch"), std::string::npos) << messages[rank];
  }
  // Ranks 1 and 2 both find the mismatch (each against its left neighbour); either notice
  // may reach rank 0 first.
  const size_t notice = messages[0].find("<- reported first: ringx: allreduce #0 failed on rank ");
  ASSERT_NE(notice, std::string::npos) << messages[0];
  EXPECT_NE(messages[0].find("mismatch", notice), std::string::npos) << messages[0];
}

TEST(Failure, DeadPeerIsNamedOnEverySurvivingRank) {
  auto store = std::make_shared<InMemoryStore>();
  const int size = 4;
  std::vector<std::string> messages(size);
  runThreads(size, [&](int rank) {
    auto group = std::make_unique<Group>(testOptions(rank, size, store));
    std::vector<float> data(1 << 18, 1.0f);
    allreduceFloats(*group, data);  // #0 succeeds everywhere
    if (rank == 2) {
      group.reset();  // "dies": all its connections close
      return;
    }
    messages[rank] = messageOf([&] { allreduceFloats(*group, data); });
    // A failed group refuses further work with the original reason.
    std::string again = messageOf([&] { allreduceFloats(*group, data); });
    EXPECT_NE(again.find("cannot be used again"), std::string::npos) << again;
  });
  for (int rank : {0, 1, 3}) {
    EXPECT_NE(messages[rank].find("allreduce #1"), std::string::npos) << messages[rank];
    EXPECT_NE(messages[rank].find("rank 2"), std::string::npos) << messages[rank];
  }
}

TEST(Failure, ConnectionWithTheWrongTokenIsRefused) {
  auto store = std::make_shared<InMemoryStore>();
  std::vector<std::string> messages(2);
  runThreads(2, [&](int rank) {
    const std::string token = rank == 0 ? "right-token" : "wrong-token";
    messages[rank] = messageOf([&] {
      transport::tcp::connectMesh(*store, rank, 2, "coll", token,
                                  Clock::now() + std::chrono::milliseconds(1500));
    });
  });
  // Rank 1 drops rank 0's hello and keeps waiting for a member; rank 0 is refused.
  EXPECT_NE(messages[0].find("did not accept"), std::string::npos) << messages[0];
  EXPECT_NE(messages[1].find("timed out waiting for rank(s) 0"), std::string::npos) << messages[1];
}

}  // namespace
}  // namespace ringx
