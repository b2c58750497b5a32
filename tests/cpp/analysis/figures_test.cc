// The figures' definitions (analysis/figures.h) on inputs with known answers:
// hidden and exposed communication, prefetched share, arrival skew, bus
// bandwidth and medians. Every tool prints these, so they are pinned here.
#include "analysis/figures.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ringx::analysis {
namespace {

TEST(Figures, HiddenShareIsWireTimeNotExposed) {
  CommOverlap o;
  EXPECT_EQ(o.hiddenShare(), 0);  // no communication: nothing hidden, not 100%
  o.add(100, 0);                  // fully hidden
  o.add(100, 40);                 // 40 of 100 exposed
  EXPECT_EQ(o.wireNs(), 200);
  EXPECT_EQ(o.exposedNs(), 40);
  EXPECT_DOUBLE_EQ(o.hiddenShare(), 0.8);
}

TEST(Figures, ExposureIsCappedAtEachTransfersOwnWireTime) {
  // A bucket that finished 500 us after compute ended but was on the wire for
  // only 100 us exposes 100, not 500; negative exposure (finished early) is 0.
  CommOverlap o;
  o.add(100, 500);
  o.add(100, -50);
  EXPECT_EQ(o.exposedNs(), 100);
  EXPECT_DOUBLE_EQ(o.hiddenShare(), 0.5);
  // Capping per transfer, not over the sum: the sum would give 1 - 450/200 < 0.
  CommOverlap capped;
  capped.add(100, 400);
  capped.add(100, 50);
  EXPECT_DOUBLE_EQ(capped.hiddenShare(), 1.0 - 150.0 / 200.0);
}

TEST(Figures, PrefetchedShare) {
  EXPECT_EQ(prefetchedShare(0, 0), 0);
  EXPECT_DOUBLE_EQ(prefetchedShare(3, 4), 0.75);
}

TEST(Figures, ArrivalSkewNamesTheSingleLastRank) {
  EXPECT_EQ(arrivalSkew({}).skewNs, 0);
  EXPECT_EQ(arrivalSkew({{3, 100}}).lastRank, -1);  // one rank: no one waited
  const ArrivalSkew s = arrivalSkew({{0, 100}, {1, 350}, {2, 120}});
  EXPECT_EQ(s.skewNs, 250);
  EXPECT_EQ(s.lastRank, 1);
  const ArrivalSkew tied = arrivalSkew({{0, 100}, {1, 350}, {2, 350}});
  EXPECT_EQ(tied.skewNs, 250);
  EXPECT_EQ(tied.lastRank, -1);
}

TEST(Figures, BusBandwidthInGigabytesPerSecond) {
  // 1 MB in 1 ms on 4 ranks: algbw 1 GB/s, allreduce busbw x 2(n-1)/n = 1.5.
  EXPECT_DOUBLE_EQ(busBandwidthGBps("allreduce", 1000000, 1000000, 4), 1.5);
  EXPECT_DOUBLE_EQ(busBandwidthGBps("broadcast", 1000000, 1000000, 4), 1.0);
  EXPECT_EQ(busBandwidthGBps("allreduce", 0, 1000, 4), 0);
  EXPECT_EQ(busBandwidthGBps("allreduce", 1000, 0, 4), 0);
}

TEST(Figures, MedianIsNearestRank) {
  std::vector<double> v{4, 1, 3, 2};
  EXPECT_EQ(median(v), 2);  // the 2nd of 4, not the mean of the middle two
  std::vector<double> none;
  EXPECT_EQ(median(none), 0);
  EXPECT_EQ(meanOf(10, 0), 0);
  EXPECT_EQ(meanOf(10, 4), 2);
}

TEST(Figures, FormatsBytes) {
  EXPECT_EQ(formatBytes(512), "512 B");
  EXPECT_EQ(formatBytes(12595), "12.3 KiB");
  EXPECT_EQ(formatBytes(int64_t{9} << 19), "4.50 MiB");
}

}  // namespace
}  // namespace ringx::analysis

namespace ringx::analysis {
namespace {

// Up to kExactSamples a Distribution's percentiles are the exact nearest-rank
// ones; beyond, within kRelativeError, and merging in any order agrees.
TEST(Distribution, ExactThenWithinItsErrorBound) {
  Distribution small;
  std::vector<int64_t> values;
  for (int i = 1; i <= 1000; ++i) {
    small.add(static_cast<double>(i * 7 % 1000 + 1));
    values.push_back(i * 7 % 1000 + 1);
  }
  std::sort(values.begin(), values.end());
  EXPECT_EQ(small.percentile(50), static_cast<double>(percentile(values, 50)));
  EXPECT_EQ(small.percentile(99), static_cast<double>(percentile(values, 99)));
  EXPECT_EQ(small.max(), 1000);

  Distribution a, b, all;
  const size_t n = Distribution::kExactSamples * 3;
  for (size_t i = 0; i < n; ++i) {
    const double v = 1000.0 + static_cast<double>((i * 7919) % n);  // 1000 .. 1000+n-1
    (i % 2 ? a : b).add(v);
    all.add(v);
  }
  Distribution ab = a, ba = b;
  ab.merge(b);
  ba.merge(a);
  for (int p : {1, 50, 99, 100}) {
    const double exact = 1000.0 + std::ceil(p / 100.0 * static_cast<double>(n)) - 1;
    EXPECT_NEAR(all.percentile(p), exact, exact * Distribution::kRelativeError) << p;
    EXPECT_EQ(ab.percentile(p), ba.percentile(p)) << p;
    EXPECT_NEAR(ab.percentile(p), exact, exact * Distribution::kRelativeError) << p;
  }
  EXPECT_EQ(ab.count(), n);
  EXPECT_EQ(ab.max(), 1000.0 + static_cast<double>(n - 1));
}

TEST(ArrivalTracker, MergedPartsGiveTheSameSkewAndLastRank) {
  ArrivalTracker left, right;
  left.add({0, 100});
  left.add({1, 400});
  right.add({2, 250});
  right.add({3, 400});
  ArrivalTracker merged = left;
  merged.merge(right);
  EXPECT_EQ(merged.skew().skewNs, 300);
  EXPECT_EQ(merged.skew().lastRank, -1);  // ranks 1 and 3 tie
  right.add({4, 500});
  merged = left;
  merged.merge(right);
  EXPECT_EQ(merged.skew().lastRank, 4);
  EXPECT_EQ(merged.count(), 5u);
  EXPECT_EQ(merged.earliestNs(), 100);
}

TEST(RankList, RunsOfThreeOrMorePrintAsRanges) {
  EXPECT_EQ(rankList({2}), "rank 2");
  EXPECT_EQ(rankList({0, 1}), "ranks 0, 1");
  EXPECT_EQ(rankList({0, 1, 2, 3, 4, 5, 6, 7, 9, 12, 13, 14, 15}), "ranks 0-7, 9, 12-15");
  EXPECT_EQ(rankList({0, 1, 3}), "ranks 0, 1, 3");
}

TEST(RankList, ParsesWhatUsersTypeAndWhatRankListPrints) {
  std::vector<int32_t> ranks;
  std::string error;
  ASSERT_TRUE(parseRankList("0-3,9, 12-13", &ranks, &error)) << error;
  EXPECT_EQ(ranks, (std::vector<int32_t>{0, 1, 2, 3, 9, 12, 13}));
  ASSERT_TRUE(parseRankList(rankList({0, 1, 2, 5}), &ranks, &error)) << error;
  EXPECT_EQ(ranks, (std::vector<int32_t>{0, 1, 2, 5}));
  ASSERT_TRUE(parseRankList("3,1,3", &ranks, &error)) << error;
  EXPECT_EQ(ranks, (std::vector<int32_t>{1, 3}));
  EXPECT_FALSE(parseRankList("", &ranks, &error));
  EXPECT_FALSE(parseRankList("7-2", &ranks, &error));
  EXPECT_NE(error.find("runs backwards"), std::string::npos) << error;
  EXPECT_FALSE(parseRankList("0-", &ranks, &error));
  EXPECT_FALSE(parseRankList("a", &ranks, &error));
  EXPECT_FALSE(parseRankList("99999999", &ranks, &error));
}

}  // namespace
}  // namespace ringx::analysis
