// Aggregate lanes: ranks grouped by host (or in blocks of eight when the trace
// names one host), busy shares from the bucketed prefix sums, and straggler
// marks on the group of each collective's last arrival.
#include "trace/model/aggregate_lanes.h"

#include <gtest/gtest.h>

#include "tests/cpp/trace/model/sample_store.h"

namespace ringx::model {
namespace {

using testing::kMs;

TEST(AggregateLanes, GroupsRanksByHostAndMeasuresHowBusyEachGroupWas) {
  TraceStore store;
  testing::fillHostsStore(store, 5, 8, /*straggler=*/13);
  const AggregateLanes lanes(store);
  ASSERT_EQ(lanes.groups().size(), 5u);
  EXPECT_EQ(lanes.groups()[1].label, "host1");
  EXPECT_EQ(lanes.groups()[1].ranks, (std::vector<int32_t>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(lanes.groupOf(13), 1);
  EXPECT_EQ(lanes.groupOf(39), 4);
  EXPECT_EQ(lanes.groupOf(40), -1);
  EXPECT_EQ(lanes.generation(), store.generation());
  // Compute is busy [0, 5) ms of every 10 ms on every rank: half of each step.
  float shares[10];
  lanes.busyShares(0, AggregateLanes::kCompute, 0, 90 * kMs, 9, shares);
  for (int c = 0; c < 9; ++c) EXPECT_NEAR(shares[c], 0.5, 0.01) << c;
  // Within a step: all busy in [1, 4) ms, idle in [5.5, 5.9) ms.
  lanes.busyShares(2, AggregateLanes::kCompute, 21 * kMs, 24 * kMs, 1, shares);
  EXPECT_NEAR(shares[0], 1.0, 0.01);
  lanes.busyShares(2, AggregateLanes::kComm, 25 * kMs + kMs / 2, 25 * kMs + 9 * kMs / 10, 1,
                   shares);
  EXPECT_NEAR(shares[0], 0.0, 0.01);
  // Comm [7, 8) ms: every rank is in its allreduce.
  lanes.busyShares(1, AggregateLanes::kComm, 37 * kMs, 38 * kMs, 1, shares);
  EXPECT_NEAR(shares[0], 1.0, 0.02);
}

// The GPU side of collectives on CUDA tensors (a "cuda:comm" lane of device spans that carry the
// collective's seq and group): a lane of its own right below the comm lanes, and not counted
// again, as compute or as comm, in the aggregate lanes.
TEST(AggregateLanes, DeviceLanesOfCollectivesAreNeitherComputeNorCountedTwice) {
  TraceStore store;
  for (int32_t rank = 0; rank < 2; ++rank) {
    store.rank(rank).host = "host0";
    testing::addSpan(store, rank, "compute", "user", "matmul", 0, 5 * kMs);
    testing::addSpan(store, rank, "comm:world", "collective", "allreduce", 6 * kMs, 8 * kMs,
                     {{"seq", 0}, {"bytes", 1 << 20}, {"group_size", 2}}, {{"group", "world"}});
    // The kernel ran later than the host side's span (queued behind other device work).
    testing::addSpan(store, rank, "cuda:comm", "device", "allreduce", 9 * kMs, 10 * kMs,
                     {{"seq", 0}, {"bytes", 1 << 20}}, {{"group", "world"}});
  }
  store.finalize();
  const RankData& rank = *store.findRank(0);
  std::vector<std::string> lanes;
  for (const Track& t : rank.tracks) lanes.push_back(std::string(store.str(t.name)));
  EXPECT_EQ(lanes, (std::vector<std::string>{"compute", "comm:world", "cuda:comm"}));
  EXPECT_EQ(rank.tracks[2].kind, TrackKind::kDevice);
  const AggregateLanes aggregate(store);
  float share[1];
  aggregate.busyShares(0, AggregateLanes::kCompute, 9 * kMs, 10 * kMs, 1, share);
  EXPECT_NEAR(share[0], 0.0, 0.01);
  aggregate.busyShares(0, AggregateLanes::kComm, 9 * kMs, 10 * kMs, 1, share);
  EXPECT_NEAR(share[0], 0.0, 0.01);
  aggregate.busyShares(0, AggregateLanes::kComm, 6 * kMs, 8 * kMs, 1, share);
  EXPECT_NEAR(share[0], 1.0, 0.02);
}

TEST(AggregateLanes, StragglerMarksGoToTheGroupOfTheLastArrival) {
  TraceStore store;
  testing::fillHostsStore(store, 5, 8, /*straggler=*/13);
  const AggregateLanes lanes(store);
  const auto& marks = lanes.groups()[1].marks;
  ASSERT_EQ(marks.size(), 10u);  // every step's allreduce waited for rank 13
  for (size_t i = 0; i < marks.size(); ++i) {
    EXPECT_EQ(marks[i].rank, 13);
    EXPECT_EQ(marks[i].seq, int64_t(i));
    EXPECT_EQ(marks[i].timeNs, int64_t(i) * 10 * kMs + 7 * kMs);
    EXPECT_EQ(marks[i].skewNs, 1 * kMs);  // rank 0 arrived at 6 ms
    EXPECT_EQ(store.str(marks[i].name), "allreduce");
    EXPECT_EQ(store.str(marks[i].group), "world");
  }
  for (size_t g : {0, 2, 3, 4}) EXPECT_TRUE(lanes.groups()[g].marks.empty()) << g;
}

TEST(AggregateLanes, OneHostNameGroupsRanksInBlocksOfEight) {
  TraceStore store;
  testing::fillHostsStore(store, 5, 8, /*straggler=*/39, 2, /*oneHost=*/true);
  const AggregateLanes lanes(store);
  ASSERT_EQ(lanes.groups().size(), 5u);
  EXPECT_EQ(lanes.groups()[0].label, "ranks 0-7");
  EXPECT_EQ(lanes.groups()[4].label, "ranks 32-39");
  EXPECT_EQ(lanes.groups()[4].marks.size(), 2u);
}

TEST(AggregateLanes, TheStoreOffersLanesOnlyForTheGenerationTheyWereBuiltFor) {
  TraceStore store;
  testing::fillHostsStore(store, 5, 8, 13);
  store.setAggregates(std::make_shared<AggregateLanes>(store));
  ASSERT_NE(store.aggregates(), nullptr);
  testing::addSpan(store, 0, "compute", "user", "matmul", 200 * kMs, 201 * kMs);
  store.finalize();
  EXPECT_EQ(store.aggregates(), nullptr);
}

}  // namespace
}  // namespace ringx::model
