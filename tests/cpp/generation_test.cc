// A group's generation (backend/store/generation.h): every rank of an instance agrees on one
// that no earlier instance used, whatever earlier instances left in the store (whole groups
// still alive, or instances that died half way through forming), and a group built on such a
// store reads none of it.
#include "backend/store/generation.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "base/error.h"
#include "tests/cpp/rank_threads.h"

namespace ringx {
namespace {

using testing::messageOf;
using testing::runThreads;
using testing::testOptions;

std::chrono::steady_clock::time_point in(std::chrono::milliseconds ms) {
  return std::chrono::steady_clock::now() + ms;
}

// Every rank joins; returns their generations (rank order). `delay(rank)` holds a rank back.
std::vector<Generation> joinAll(Store& store, int size,
                                const std::function<int(int)>& delayMs = nullptr) {
  std::vector<Generation> out(size);
  runThreads(size, [&](int rank) {
    if (delayMs) std::this_thread::sleep_for(std::chrono::milliseconds(delayMs(rank)));
    out[rank] = joinGeneration(store, rank, size, in(std::chrono::seconds(20)), "test");
  });
  return out;
}

void expectAgreed(const std::vector<Generation>& generations) {
  for (const Generation& g : generations) {
    EXPECT_EQ(g.number, generations[0].number);
    EXPECT_EQ(g.token, generations[0].token);
    EXPECT_EQ(g.prefix, generations[0].prefix);
  }
  EXPECT_EQ(generations[0].token.size(), 32u);
}

TEST(Generation, EveryRankOfAFreshStoreAgreesOnTheFirst) {
  InMemoryStore store;
  const auto generations = joinAll(store, 5);
  expectAgreed(generations);
  EXPECT_EQ(generations[0].number, 0);
}

TEST(Generation, EachLaterInstanceOnTheSameStoreGetsANewOneAndANewToken) {
  InMemoryStore store;
  std::set<int64_t> numbers;
  std::set<std::string> tokens;
  for (int instance = 0; instance < 4; ++instance) {
    // Rank 0 comes last: the others must not take what the last instance left.
    const auto generations = joinAll(store, 3, [](int rank) { return rank == 0 ? 50 : 0; });
    expectAgreed(generations);
    numbers.insert(generations[0].number);
    tokens.insert(generations[0].token);
  }
  EXPECT_EQ(numbers.size(), 4u);
  EXPECT_EQ(tokens.size(), 4u);
  EXPECT_EQ(*numbers.rbegin(), 3);  // no round wasted between whole instances
}

// What an earlier instance left when it died half way: rank 1 claimed generation 0 alone (its
// rank 0 never came), and ranks 0 and 2 claimed generation 1 and acknowledged there.
void leaveHalfFormedInstance(Store& store) {
  store.add("ringx/gen/0/slot/1", 1);
  store.add("ringx/gen/1/slot/0", 1);
  store.setString("ringx/gen/1/ready", "1");
  store.add("ringx/gen/1/slot/2", 1);
  store.add("ringx/gen/1/acks", 1);
}

TEST(Generation, AnInstanceThatDiedHalfWayDoesNotHoldUpTheNext) {
  for (int first = -1; first < 3; ++first) {
    // Whichever rank comes first (-1: all at once), they meet past what the dead claimed.
    InMemoryStore store;
    leaveHalfFormedInstance(store);
    const auto generations =
        joinAll(store, 3, [first](int rank) { return first < 0 || rank == first ? 0 : 30; });
    expectAgreed(generations);
    EXPECT_GE(generations[0].number, 2) << "first=" << first;
  }
}

// A rank of an earlier instance that dies after `budget` store calls (a process killed
// anywhere in the agreement): its keys stay behind.
class DyingStore : public Store {
 public:
  DyingStore(Store& inner, int budget) : inner_(inner), budget_(budget) {}
  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    spend();
    inner_.set(key, value);
  }
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override {
    spend();
    return inner_.get(key, timeout);
  }
  bool check(const std::string& key) override {
    spend();
    return inner_.check(key);
  }
  int64_t add(const std::string& key, int64_t delta) override {
    spend();
    return inner_.add(key, delta);
  }

 private:
  void spend() {
    if (budget_-- <= 0) RINGX_THROW(Error, "died");
  }
  Store& inner_;
  int budget_;
};

TEST(Generation, DeadInstancesLeftAnywhereNeverSplitTheRanksOfTheNext) {
  std::mt19937 random(1234);
  for (int trial = 0; trial < 40; ++trial) {
    InMemoryStore store;
    const int size = 2 + static_cast<int>(random() % 3);
    // Two earlier instances (of this size or one more or less), each rank killed after a
    // random number of store calls, or timing out if it outlived the others.
    for (int dead = 0; dead < 2; ++dead) {
      const int deadSize = std::max(1, size - 1 + static_cast<int>(random() % 3));
      std::vector<int> budgets(deadSize);
      for (int& b : budgets) b = static_cast<int>(random() % 12);
      runThreads(deadSize, [&](int rank) {
        DyingStore dying(store, budgets[rank]);
        try {
          joinGeneration(dying, rank, deadSize, in(std::chrono::milliseconds(50)), "dead");
        } catch (const Error&) {
        }
      });
    }
    std::vector<int> delays(size);
    for (int& d : delays) d = static_cast<int>(random() % 10);
    const auto generations = joinAll(store, size, [&](int rank) { return delays[rank]; });
    expectAgreed(generations);
  }
}

TEST(Generation, RanksThatNeverComeAreATimeoutNamingTheGroupNotAHang) {
  InMemoryStore store;
  const auto start = std::chrono::steady_clock::now();
  const std::string lonelyZero = messageOf(
      [&] { joinGeneration(store, 0, 3, in(std::chrono::milliseconds(200)), "trainers"); });
  EXPECT_NE(lonelyZero.find("group 'trainers' did not form"), std::string::npos) << lonelyZero;
  EXPECT_NE(lonelyZero.find("the other ranks to join"), std::string::npos) << lonelyZero;
  InMemoryStore other;
  const std::string lonelyTwo = messageOf(
      [&] { joinGeneration(other, 2, 3, in(std::chrono::milliseconds(200)), "trainers"); });
  EXPECT_NE(lonelyTwo.find("rank 2 waited in vain for rank 0"), std::string::npos) << lonelyTwo;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// ---- groups on a store that holds an earlier group's keys -------------------------------------

float allreduceOne(Group& group, float value) {
  group.run(algorithms::CollectiveKind::kAllreduce, DataType::kFloat32, ReduceOp::kSum, -1,
            std::chrono::milliseconds(0), [&](algorithms::Collective& c) {
              algorithms::allreduce(c, &value, 1, DataType::kFloat32, ReduceOp::kSum,
                                    group.tuning());
            });
  return value;
}

TEST(Generation, ASecondGroupOnTheFirstsStoreNeverReadsItsKeys) {
  // The first group is gone; its addresses and token are still in the store. The second
  // group's rank 0 comes late, so the others would read the first group's keys if they could.
  auto store = std::make_shared<InMemoryStore>();
  const int size = 3;
  runThreads(size, [&](int rank) {
    Group group(testOptions(rank, size, store));
    EXPECT_EQ(allreduceOne(group, float(rank)), 3.0f);
  });
  runThreads(size, [&](int rank) {
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    Group group(testOptions(rank, size, store));
    EXPECT_EQ(allreduceOne(group, float(rank + 1)), 6.0f);
  });
}

TEST(Generation, TwoLiveGroupsOnOneStoreKeepTheirRingsApart) {
  // Built one after the other on the same store (the same keys), both alive, used in turn:
  // a rank of the second must never connect to a rank of the first.
  auto store = std::make_shared<InMemoryStore>();
  const int size = 3;
  runThreads(size, [&](int rank) {
    Group first(testOptions(rank, size, store));
    EXPECT_EQ(allreduceOne(first, 1.0f), 3.0f);
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    Group second(testOptions(rank, size, store));
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(allreduceOne(second, float(10 * rank)), 30.0f);
      EXPECT_EQ(allreduceOne(first, float(rank)), 3.0f);
    }
    EXPECT_EQ(first.collectivePeers().size(), second.collectivePeers().size());
  });
}

}  // namespace
}  // namespace ringx
