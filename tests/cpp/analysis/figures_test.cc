// The figures' definitions (analysis/figures.h) on inputs with known answers:
// hidden and exposed communication, prefetched share, arrival skew, bus
// bandwidth and medians. Every tool prints these, so they are pinned here.
#include "analysis/figures.h"

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
