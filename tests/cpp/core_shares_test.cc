// The host's cores as a shared resource (analysis/replay/core_shares.h) and the replay program
// that runs compute at the shares its own schedule leaves it: cases worked out by hand.
#include <gtest/gtest.h>

#include "analysis/replay/core_shares.h"
#include "analysis/replay/program.h"

namespace ringx::replay {
namespace {

using K = PathSegment::Kind;

// Two ranks of one compute thread on one core: together, half a core each; alone, all of it.
TEST(CoreShares, TwoRanksOnOneCore) {
  const HostCores oneCore{1, 1, 1};
  const CoreShares shares(oneCore, 1, {{{0, 4000}}, {{0, 8000}}}, {});
  EXPECT_DOUBLE_EQ(shares.lostNs(0, 0, 4000), 2000);  // 4000 at 0.5
  EXPECT_DOUBLE_EQ(shares.lostNs(1, 0, 8000), 2000);  // 4000 at 0.5, then 4000 alone
  // 6000 of work from 0: 2000 done by 4000 beside rank 0, the other 4000 alone.
  EXPECT_EQ(shares.durationNs(1, 0, 6000), 8000);
  // Past the last recorded moment a rank is alone.
  EXPECT_EQ(shares.durationNs(0, 9000, 1000), 1000);
  // Where the cores are unknown nothing is shared.
  const CoreShares unknown(HostCores{}, 1, {{{0, 4000}}, {{0, 8000}}}, {});
  EXPECT_DOUBLE_EQ(unknown.lostNs(0, 0, 4000), 0);
  EXPECT_EQ(unknown.durationNs(0, 0, 3000), 3000);
}

// Three ranks on two cores: all computing, two thirds of a core each; one computing while the
// ring runs (every rank's communication thread runnable): 1 + 3 threads, half a core.
TEST(CoreShares, ThreeRanksOnTwoCoresAndTheRingsThreads) {
  const HostCores twoCores{2, 1, 1};
  const CoreShares shares(twoCores, 1, {{{0, 3000}, {3000, 6000}}, {{0, 3000}}, {{0, 3000}}},
                          {{3000, 6000}});
  EXPECT_DOUBLE_EQ(shares.lostNs(1, 0, 3000), 1000);
  EXPECT_DOUBLE_EQ(shares.lostNs(0, 3000, 6000), 1500);
  const std::vector<LossRate> rates = shares.lossRates(0, 0, 6000, 1000);
  ASSERT_EQ(rates.size(), 2u);  // by offsets from 1000
  EXPECT_EQ(rates[0].begin, -1000);
  EXPECT_EQ(rates[0].end, 2000);
  EXPECT_DOUBLE_EQ(rates[0].rate, 1.0 / 3);
  EXPECT_DOUBLE_EQ(rates[1].rate, 0.5);
  EXPECT_DOUBLE_EQ(lostIn(rates, 0, 5000), 2000.0 / 3 + 1500);
  // The ring's threads: beside rank 0's compute, 1 + 3 threads, half a core; alone, three
  // threads on the two cores, two thirds.
  EXPECT_DOUBLE_EQ(shares.lostNs(CoreShares::kRing, 3000, 6000), 1500);
  EXPECT_DOUBLE_EQ(shares.lostNs(CoreShares::kRing, 6000, 7000), 1000.0 / 3);
  // Each recorded rank standing for two: six ranks on the two cores, a third of a core each.
  const CoreShares doubled(twoCores, 2, {{{0, 3000}}, {{0, 3000}}, {{0, 3000}}}, {});
  EXPECT_DOUBLE_EQ(doubled.lostNs(0, 0, 3000), 2000);
}

// Two hosts of 0.4 of a core each (a CFS quota), a rank each: alone, its compute thread gets the
// 0.4 and loses 0.6 of each ns; beside the ring (its communication thread runnable too), 0.2.
TEST(CoreShares, AHostsQuotaIsSplitByItsRanksThreads) {
  const HostCores quota{0.4, 1, 2};
  const CoreShares shares(quota, 1, {{{0, 5000}}, {{0, 5000}}}, {{2000, 4000}});
  EXPECT_DOUBLE_EQ(shares.lostNs(0, 0, 2000), 1200);
  EXPECT_DOUBLE_EQ(shares.lostNs(0, 2000, 4000), 1600);
  // 1000 ns of work from 0: 800 done by 2000, then 200 at 0.2 of a core.
  EXPECT_EQ(shares.durationNs(1, 0, 1000), 3000);
  // The ring's threads beside the compute: 0.2 each; alone after 5000: the quota, 0.4.
  EXPECT_DOUBLE_EQ(shares.lostNs(CoreShares::kRing, 2000, 4000), 1600);
  EXPECT_DOUBLE_EQ(shares.lostNs(CoreShares::kRing, 6000, 7000), 600);
}

// One step per rank: compute, then an allreduce of 2000 ns of its ring threads' work (timed
// alone on enough cores) waited on at once.
Program computeThenAllreduce(size_t steps) {
  Program p;
  for (size_t step = 0; step < steps; ++step) {
    p.beginStep();
    p.compute(K::kBackward, 0);
    p.wait(p.issue(K::kAllreduce, 100, 0, 0));
  }
  for (ProgramCollective& c : p.collectives) c.ns = 2000;
  return p;
}

// Two ranks on one core, 4000 and 8000 ns of work recorded alone (nothing lost): rank 0 runs at
// half a core until it ends at 8000; rank 1 has done 4000 by then and the rest alone, to 12000;
// the allreduce's two ring threads then share the core: 4000 more, to 16000.
TEST(ReplayProgram, TwoRanksOnOneCoreShareItAsTheirScheduleDoes) {
  const Program p = computeThenAllreduce(1);
  ProgramTimes t;
  t.ranks = {0, 1};
  t.durations = {{{4000}}, {{8000}}};
  EXPECT_EQ(runProgram(p, t).stepNs, 10000);  // the cores unknown: as recorded
  t.host = {1, 1, 1};
  t.lost = {{{0}}, {{0}}};
  EXPECT_EQ(runProgram(p, t).stepNs, 16000);
  // The same step recorded as it ran on that core: 8000 and 12000 ns, of which 4000 and 4000
  // were lost to the other rank. The replay of its own schedule gives it back.
  t.durations = {{{8000}}, {{12000}}};
  t.lost = {{{4000}}, {{4000}}};
  EXPECT_EQ(runProgram(p, t).stepNs, 16000);
}

// Three ranks on two cores, 3000 ns of work each: two thirds of a core each, 4500 ns; then the
// allreduce's three ring threads, two thirds each: 3000; 7500 a step. Replayed as six ranks on
// the same cores (each recorded rank standing for two): a third of a core each, 9000 ns of
// compute and 6000 of allreduce, 15000 a step.
TEST(ReplayProgram, ThreeRanksOnTwoCores) {
  const Program p = computeThenAllreduce(3);
  ProgramTimes t;
  t.ranks = {0, 1, 2};
  t.host = {2, 1, 1};
  for (int r = 0; r < 3; ++r) {
    t.durations.push_back({{4500}, {4500}, {4500}});
    t.lost.push_back({{1500}, {1500}, {1500}});
  }
  EXPECT_EQ(runProgram(p, t).stepNs, 7500);
  t.world = 6;
  EXPECT_EQ(runProgram(p, t).stepNs, 15000);
}

// Two ranks on one core, each issuing an allreduce of 2000 ns of its ring threads' work and
// computing 2000 ns beside it: four threads on the core, a quarter each, so both take 8000.
TEST(ReplayProgram, ARingBesideComputeOnTooFewCoresSlowsBoth) {
  Program p;
  p.beginStep();
  const size_t c = p.issue(K::kAllreduce, 100, 0, 0);
  p.compute(K::kBackward, 0);
  p.wait(c);
  p.collectives[c].ns = 2000;
  ProgramTimes t;
  t.ranks = {0, 1};
  t.durations = {{{2000}}, {{2000}}};
  EXPECT_EQ(runProgram(p, t).stepNs, 2000);
  t.host = {1, 1, 1};
  t.lost = {{{0}}, {{0}}};
  EXPECT_NEAR(static_cast<double>(runProgram(p, t).stepNs), 8000, 80);
}

}  // namespace
}  // namespace ringx::replay
