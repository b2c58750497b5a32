// The replay model (analysis/replay): the cost model's fit, the program runner, and DDP steps
// whose answers are worked out by hand in the comments.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "analysis/replay/cost_model.h"
#include "analysis/replay/ddp_fit.h"
#include "analysis/replay/ddp_replay.h"
#include "analysis/replay/program.h"
#include "analysis/replay/step.h"

namespace ringx::replay {
namespace {

TEST(ReplayCost, RingShapesFollowTheAlgorithm) {
  EXPECT_EQ(ringShape("allreduce", 1000, 4).steps, 6);
  EXPECT_DOUBLE_EQ(ringShape("allreduce", 1000, 4).bytesSent, 1500);
  EXPECT_EQ(ringShape("all_gather", 1000, 4).steps, 3);
  EXPECT_DOUBLE_EQ(ringShape("reduce_scatter", 1000, 4).bytesSent, 750);
  EXPECT_EQ(ringShape("broadcast", 1000, 4).steps, 3);
  EXPECT_EQ(collectiveNs({100, 1}, "allreduce", 1000, 1), 0);
  EXPECT_EQ(collectiveNs({100, 0.5}, "allreduce", 1000, 2), 2 * 100 + 500);
}

TEST(ReplayCost, TheFitRecoversBothConstantsFromTwoShapes) {
  const LinkCost truth{5000, 0.25};
  std::vector<CostSample> samples;
  for (int64_t n : {2, 3}) {
    for (int64_t bytes : {4096, 1 << 20, 16 << 20}) {
      samples.push_back({"allreduce", bytes, n, collectiveNs(truth, "allreduce", bytes, n)});
    }
  }
  const LinkFit fit = fitLinkCost(samples);
  ASSERT_TRUE(fit.ok);
  EXPECT_TRUE(fit.separated);
  EXPECT_NEAR(fit.link.stepNs, 5000, 1);
  EXPECT_NEAR(fit.link.nsPerByte, 0.25, 1e-6);
  EXPECT_LT(fit.medianErrorShare, 1e-6);
}

TEST(ReplayCost, OneShapeAloneGoesOnTheBytes) {
  const LinkFit fit = fitLinkCost({{"allreduce", 1000, 2, 100}, {"allreduce", 1000, 2, 100}});
  ASSERT_TRUE(fit.ok);
  EXPECT_FALSE(fit.separated);
  EXPECT_EQ(fit.link.stepNs, 0);
  EXPECT_NEAR(fit.link.nsPerByte, 0.1, 1e-9);
  EXPECT_FALSE(fitLinkCost({}).ok);
  EXPECT_FALSE(fitLinkCost({{"allreduce", 1000, 2, 0}}).ok);  // no duration
}

// The calibration ladder of a job between two hosts joined by a 1 Gbit/s link (recorded by
// ringx.trace.calibrate): the two middle sizes went faster than either end's cost says (the
// token bucket's 500 KB burst at the veth's speed). The per-step cost comes from the smallest
// size, the per-byte cost from the smallest to the largest: the link's 8.19 ns a byte, where a
// least-squares fit of the ladder in relative error had made it 1.66.
TEST(ReplayCost, ACalibrationsCostComesFromItsEndsNotItsBurstyMiddle) {
  const std::vector<CostSample> ladder = {
      {"allreduce", 4096, 2, 78627},         {"allreduce", 32768, 2, 43395},
      {"allreduce", 262144, 2, 1760748},     {"allreduce", 2097152, 2, 17054883},
      {"allreduce", 16777216, 2, 137411335}, {"all_gather", 4096, 2, 34391}};
  const LinkFit fit = calibratedLink(ladder, "allreduce");
  ASSERT_TRUE(fit.ok);
  EXPECT_EQ(fit.samples, 5u);
  const double perByte = (137411335.0 - 78627.0) / (16777216.0 - 4096.0);
  EXPECT_NEAR(fit.link.nsPerByte, perByte, 1e-9);
  EXPECT_NEAR(fit.link.stepNs, (78627.0 - perByte * 4096) / 2, 1e-6);
  EXPECT_NEAR(static_cast<double>(collectiveNs(fit.link, "allreduce", 2097152, 2)), 17054883.0,
              0.01 * 17054883.0);
  EXPECT_LT(fitLinkCost(std::vector<CostSample>(ladder.begin(), ladder.end() - 1)).link.nsPerByte,
            2);
  // One size of the op is no ladder.
  EXPECT_FALSE(calibratedLink(ladder, "all_gather").ok);
}

// Two identical ranks, four parameters of 1000 bytes whose gradients are ready 100, 200, 300
// and 400 ns into backward, last registered first; forward 100, loss 10, backward compute
// 450, optimizer 50; every parameter its own bucket; an allreduce of 1000 bytes takes 100 ns
// at 2 ranks; a pass over a gradient 0.05 ns per byte (50 ns each).
DdpModel fourBuckets() {
  DdpModel m;
  for (int i = 0; i < 4; ++i) m.params.push_back({1000, "float32@cpu"});
  for (int32_t r = 0; r < 2; ++r) {
    DdpRankProfile p;
    p.rank = r;
    p.forwardNs = 100;
    p.toBackwardNs = 10;
    p.backwardComputeNs = 450;
    p.gradReadyNs = {400, 300, 200, 100};
    p.optimizerNs = 50;
    m.ranks.push_back(p);
  }
  m.limits = {1000, 1000};
  m.worldSize = 2;
  m.order = {3, 2, 1, 0};
  m.link = {0, 0.1};
  m.copyNsPerByte = 0.05;
  return m;
}

TEST(ReplayDdp, TheRecordedPlanReplaysToTheHandWorkedStep) {
  // Backward begins at 110. Bucket k (parameter 3-k) is filled at 110 + 100(k+1) + 50 and on
  // the ring from 260 + 100k to 360 + 100k. Compute ends at 560; finalize copies the buckets
  // back, 50 each, from 560: 610, 660, 710, 760; the optimizer ends the step at 810.
  const DdpReplay r = replayDdp(fourBuckets());
  EXPECT_EQ(r.stepNs, 810);
  ASSERT_EQ(r.buckets.size(), 4u);
  EXPECT_EQ(r.buckets[0].readyNs, 260);
  EXPECT_EQ(r.buckets[3].startNs, 560);
  EXPECT_EQ(r.buckets[3].endNs, 660);
  // The last allreduce ends 100 after compute, while the first copies back run: no wait.
  EXPECT_EQ(r.exposedCommNs, 0);
  EXPECT_EQ(r.commNs, 400);
}

TEST(ReplayDdp, BucketCapsAndTheViewChangeTheStepAsWorkedOut) {
  const DdpModel m = fourBuckets();
  DdpWhatIf one;
  one.bucketCapBytes = 4000;  // first bucket min(1 MiB, cap): one bucket of all four
  // Its last gradient is filled at 110 + 450 = 560; 400 ns on the ring; copy back 200 ns;
  // optimizer: 560 + 400 + 200 + 50 = 1210.
  const DdpReplay r = replayDdp(m, one);
  ASSERT_EQ(r.buckets.size(), 1u);
  EXPECT_EQ(r.buckets[0].bytes, 4000);
  EXPECT_EQ(r.stepNs, 1210);
  EXPECT_EQ(plannedBuckets(m, one).size(), 1u);

  DdpWhatIf view;
  view.gradientAsBucketView = true;  // no copy back: finalize ends with the ring at 660
  EXPECT_EQ(replayDdp(m, view).stepNs, 710);

  DdpModel viewed = m;
  viewed.gradientAsBucketView = true;
  viewed.copyNsPerByte = -1;  // such a recording timed no copy back
  DdpWhatIf copies;
  copies.gradientAsBucketView = false;
  EXPECT_THROW(replayDdp(viewed, copies), std::invalid_argument);
  EXPECT_NO_THROW(replayDdp(viewed));
}

TEST(ReplayDdp, BoundsWorldSizeAndWire) {
  const DdpModel m = fourBuckets();
  DdpWhatIf commFree;
  commFree.commFree = true;  // 110 + 450 + 4 copies of 50 + 50
  EXPECT_EQ(replayDdp(m, commFree).stepNs, 810);
  DdpWhatIf computeFree;
  computeFree.computeFree = true;  // four allreduces back to back
  EXPECT_EQ(replayDdp(m, computeFree).stepNs, 400);
  DdpWhatIf four;
  four.worldSize = 4;  // 6 steps, 1500 bytes sent: 150 ns per bucket, the last ends at 710
  EXPECT_EQ(replayDdp(m, four).buckets[3].endNs, 260 + 3 * 150 + 150);
  DdpWhatIf slow;
  slow.link = LinkCost{0, 0.4};  // 400 ns per bucket: the ring ends at 260 + 1600
  const DdpReplay s = replayDdp(m, slow);
  EXPECT_EQ(s.buckets[3].endNs, 1860);
  EXPECT_EQ(s.stepNs, 1860 + 50 + 50);  // the last copy back follows the ring
  EXPECT_THROW(replayDdp(DdpModel{}), std::invalid_argument);
}

// The hosts' cores shared out: each rank's threads get cores / (ranks on the host x threads)
// of a core when that is below one.
TEST(ReplayCost, HostSharesFollowTheRanksPerCore) {
  const HostCores twoCores{2, 1, 1};
  EXPECT_DOUBLE_EQ(hostShareRatio(twoCores, 2, 4), 2.0);   // 1 core each -> half a core
  EXPECT_DOUBLE_EQ(hostShareRatio(twoCores, 2, 3), 1.5);   // three ranks on two cores
  EXPECT_DOUBLE_EQ(hostShareRatio(twoCores, 4, 2), 0.5);   // and back
  EXPECT_DOUBLE_EQ(hostShareRatio(twoCores, 1, 2), 1.0);   // still a core each
  EXPECT_DOUBLE_EQ(hostShareRatio({1, 1, 1}, 2, 3), 1.5);  // two ranks on one core, then three
  EXPECT_DOUBLE_EQ(hostShareRatio({2, 2, 1}, 1, 2), 2.0);  // two compute threads per rank
  // Across hosts a world grows by hosts of as many ranks each: two hosts of 2 ranks, then
  // four; two of one rank on 0.4 of a core (a CPU quota), then three hosts.
  EXPECT_DOUBLE_EQ(hostShareRatio({2, 1, 2}, 4, 8), 1.0);
  EXPECT_DOUBLE_EQ(hostShareRatio({0.4, 1, 2}, 2, 3), 1.0);
  EXPECT_EQ(hostsAt({0.4, 1, 2}, 2, 3).hosts, 3);
  EXPECT_EQ(hostsAt({2, 1, 2}, 4, 5).hosts, 3);              // the third host part full
  EXPECT_DOUBLE_EQ(hostShareRatio({0.4, 1, 1}, 1, 2), 2.0);  // one host's quota, then shared
  EXPECT_DOUBLE_EQ(hostShareRatio({16, 1, 1}, 2, 4), 1.0);   // cores to spare
  EXPECT_DOUBLE_EQ(hostShareRatio(HostCores{}, 2, 4), 1.0);  // not recorded: nothing scaled
}

// Four ranks where two ran on two cores: every compute and every collective takes twice as
// long. Bucket k is filled at 110 x 2 + (100(k+1) + 50) x 2 (backward from 220) and runs 300 ns
// (150 at four ranks, doubled) from max(its fill, the previous one's end): 520, 820, 1120, 1420
// to 1720; the copies back (100 each) follow compute's end at 1120 and each allreduce: the last
// at 1720 + 100, the optimizer 100 more.
TEST(ReplayDdp, AWorldOfMoreRanksOnTheSameCoresStretchesComputeAndCollectives) {
  DdpModel m = fourBuckets();
  m.host = {2, 1, 1};
  DdpWhatIf four;
  four.worldSize = 4;
  const DdpReplay r = replayDdp(m, four);
  EXPECT_EQ(r.buckets[0].startNs, 520);
  EXPECT_EQ(r.buckets[3].endNs, 1720);
  EXPECT_EQ(r.stepNs, 1720 + 100 + 100);
  DdpWhatIf two;
  two.worldSize = 2;  // as recorded: nothing changes
  EXPECT_EQ(replayDdp(m, two).stepNs, 810);
}

TEST(ReplayDdp, TheCriticalPathTilesTheStepAndFollowsTheStraggler) {
  DdpModel m = fourBuckets();
  const DdpReplay base = replayDdp(m);
  ASSERT_FALSE(base.criticalPath.empty());
  // Every allreduce ends before the copy back that needs it: forward, backward, the four copies
  // back, the optimizer, back to back from 0 to the step's end.
  int64_t from = 0;
  for (const PathSegment& s : base.criticalPath) {
    EXPECT_EQ(s.beginNs, from) << pathKindName(s.kind);
    from = s.endNs;
  }
  EXPECT_EQ(from, base.stepNs);
  ASSERT_EQ(base.criticalPath.size(), 7u);
  EXPECT_EQ(base.criticalPath[1].kind, PathSegment::Kind::kBackward);
  EXPECT_EQ(base.criticalPath[1].endNs, 560);
  EXPECT_EQ(base.criticalPath[2].kind, PathSegment::Kind::kCopyBack);

  // On a wire four times slower the ring is the path: backward until bucket 0 is filled (260),
  // the four allreduces back to back (to 1860), the last copy back, the optimizer. The slowest
  // rank waits for them after its compute: 100 for the first, 350 for each after its copy back.
  DdpWhatIf slowWire;
  slowWire.link = LinkCost{0, 0.4};
  const DdpReplay wired = replayDdp(m, slowWire);
  ASSERT_EQ(wired.criticalPath.size(), 8u);
  EXPECT_EQ(wired.criticalPath[1].endNs, 260);
  for (size_t i = 2; i < 6; ++i) {
    EXPECT_EQ(wired.criticalPath[i].kind, PathSegment::Kind::kAllreduce);
    EXPECT_EQ(wired.criticalPath[i].bucket, static_cast<int64_t>(i - 2));
  }
  EXPECT_EQ(wired.criticalPath[6].kind, PathSegment::Kind::kCopyBack);
  EXPECT_EQ(wired.criticalPath[7].endNs, wired.stepNs);
  EXPECT_EQ(wired.exposedCommNs, 100 + 3 * 350);

  // Rank 1 computes twice as long: the ring waits for it, and its backward is on the path.
  DdpRankProfile& slow = m.ranks[1];
  slow.backwardComputeNs = 900;
  slow.gradReadyNs = {800, 600, 400, 200};
  const DdpReplay r = replayDdp(m);
  EXPECT_EQ(r.slowestRank, 1);
  // Rank 1: backward 110..1010, its last gradient filled at 110 + 850 = 960 and on the ring
  // until 1060, before its compute ends; it copies back 1010..1210; optimizer: 1260. Rank 0
  // waits for it on the ring every step, so both settle at 1260, and rank 1 is the one waited
  // for: its own compute is its whole step.
  EXPECT_EQ(r.stepNs, 1260);
  int64_t at = 0;
  for (const PathSegment& s : r.criticalPath) {
    EXPECT_EQ(s.beginNs, at) << pathKindName(s.kind);
    EXPECT_EQ(s.rank, 1);
    at = s.endNs;
  }
  EXPECT_EQ(at, 1260);
  bool slowBackward = false;
  for (const PathSegment& s : r.criticalPath) {
    slowBackward |= s.kind == PathSegment::Kind::kBackward && s.rank == 1;
  }
  EXPECT_TRUE(slowBackward);
}

TEST(ReplayDdp, AutoChoosesTheCapTheReplayFindsFastestAndKeepsTheDefaultWithinTheMargin) {
  DdpModel m = fourBuckets();
  m.link = {200, 0.1};  // 200 ns a ring step: an allreduce of 1000 bytes takes 500 ns
  // Cap 1000, four buckets: the ring runs 260..2260, the last copy back ends at 2310: 2360.
  // Cap 2000, two buckets of 600 ns: 360..960, 960..1560; copies of 100: 1710.
  // Cap 4000, one bucket of 800 ns from 560: 1360; its copy of 200: 1610.
  const CapChoice c = chooseBucketCap(m, {2000, 4000}, 1000, 0.02);
  EXPECT_EQ(c.capBytes, 4000);
  EXPECT_EQ(c.predictedNs, 1610);
  EXPECT_EQ(c.defaultNs, 2360);
  EXPECT_EQ(c.buckets, 1u);
  EXPECT_NE(c.reason.find("(1 bucket)"), std::string::npos) << c.reason;
  // Nothing is 50% faster than the default: it stays, and the reason says so.
  const CapChoice kept = chooseBucketCap(m, {2000, 4000}, 1000, 0.5);
  EXPECT_EQ(kept.capBytes, 1000);
  EXPECT_EQ(kept.predictedNs, 2360);
  EXPECT_NE(kept.reason.find("no cap predicted more than 50% faster"), std::string::npos)
      << kept.reason;
}

// The program runner: a collective starts when the last rank has issued it and its lane is
// free; a wait's rank is the last issuer.
TEST(ReplayProgram, CollectivesWaitForTheLastIssuerAndTheirLane) {
  using K = PathSegment::Kind;
  Program p;
  for (int step = 0; step < 2; ++step) {
    p.beginStep();
    p.compute(K::kForward, 0);
    const size_t a = p.issue(K::kAllGather, 100, 0, 7);
    const size_t b = p.issue(K::kAllGather, 100, 0, 8);      // same lane: after a
    const size_t c = p.issue(K::kReduceScatter, 100, 1, 9);  // a lane of its own
    p.compute(K::kBackward, 1);
    p.wait(a);
    p.wait(b);
    p.wait(c);
  }
  for (ProgramCollective& c : p.collectives) c.ns = 100;
  // Rank 0 computes 10 + 20, rank 1 50 + 20: every collective waits for rank 1's issue at 50.
  ProgramTimes t;
  t.ranks = {0, 1};
  t.durations = {{{10, 20}, {10, 20}}, {{50, 20}, {50, 20}}};
  const ProgramRun run = runProgram(p, t);
  // Step 0: a 50..150, b 150..250, c 50..150; rank 1 ends at 250, rank 0 too. Step 1 the same
  // from 250: a step of 250.
  EXPECT_EQ(run.stepNs, 250);
  EXPECT_EQ(run.typical, 1u);
  ASSERT_EQ(run.startNs.size(), 6u);
  EXPECT_EQ(run.startNs[4] - run.issuedNs[4], 100);  // b waited for a, on its lane
  EXPECT_EQ(run.startNs[5], run.issuedNs[5]);        // c did not
  // The slowest rank (equal periods: the last to start, then the one that waited least) is 1;
  // its waits are on rank 1's issue.
  EXPECT_EQ(run.slowestRank, 1);
  EXPECT_EQ(run.exposedCommNs, 250 - 70);
  for (const PathSegment& s : run.criticalPath) EXPECT_EQ(s.rank, 1);
  EXPECT_THROW(runProgram(p, ProgramTimes{}), std::invalid_argument);
}

// Contention: compute beside a collective in flight on its rank is slower by the constant per
// ns of overlap; the recorded overlap's share is taken out first.
// The shared link's rule (program.h): over a stretch where k lanes run a collective, each
// loses (k - 1) / k of it.
TEST(ReplayProgram, ASharedLinkSplitsBetweenTheLanesInFlight) {
  using K = PathSegment::Kind;
  // Lanes 0 and 1 overlap over 50-100: each ran at half its pace there, 25 lost.
  EXPECT_EQ(linkSharedNs({{0, 0, 100}, {1, 50, 150}}), (std::vector<double>{25, 25}));
  // One lane's collectives never share (the lane runs one at a time; ends may touch).
  EXPECT_EQ(linkSharedNs({{0, 0, 100}, {0, 90, 150}}), (std::vector<double>{0, 0}));
  // Three lanes over 0-90: two thirds of it each; a fourth span beside lane 2's, on lane 2,
  // counts lane 2 once.
  EXPECT_EQ(linkSharedNs({{0, 0, 90}, {1, 0, 90}, {2, 0, 90}}), (std::vector<double>{60, 60, 60}));
  EXPECT_EQ(linkSharedNs({{0, 0, 60}, {2, 0, 60}, {2, 0, 60}}), (std::vector<double>{30, 30, 30}));

  // A rank computes 1000 then issues a gather (lane 1, 100000 alone) and a reduce-scatter
  // (lane 0, 50000 alone) at once and waits for both. Shared, they go at half pace until the
  // reduce-scatter ends at 100000, the gather alone after: 1000 + 150000 a step, not the
  // 1000 + 100000 of separate links (the passes settle within 0.1% of the run).
  Program p;
  for (int step = 0; step < 3; ++step) {
    p.beginStep();
    p.compute(K::kForward, 0);
    const size_t g = p.issue(K::kAllGather, 100, 1, 0);
    const size_t r = p.issue(K::kReduceScatter, 100, 0, 0);
    p.wait(g);
    p.wait(r);
  }
  for (size_t c = 0; c < p.collectives.size(); ++c) p.collectives[c].ns = c % 2 ? 50000 : 100000;
  ProgramTimes t;
  t.ranks = {0};
  t.durations = {{{1000}, {1000}, {1000}}};
  EXPECT_EQ(runProgram(p, t).stepNs, 101000);
  t.sharedLink = true;
  const ProgramRun run = runProgram(p, t);
  EXPECT_NEAR(static_cast<double>(run.stepNs), 151000, 151000 * 0.002);
  EXPECT_NEAR(static_cast<double>(run.endNs[4] - run.startNs[4]), 150000, 150000 * 0.002);
  EXPECT_NEAR(static_cast<double>(run.endNs[5] - run.startNs[5]), 100000, 100000 * 0.002);
}

// A larger world replays its every rank: the added ones take the recorded ranks' steps after the
// first turned by one per round of the recorded, so that no two ranks jitter alike.
TEST(ReplayProgram, ALargerWorldsAddedRanksTakeTheRecordedStepsTurned) {
  EXPECT_EQ(replayedRanks(2, 4), 4u);
  EXPECT_EQ(replayedRanks(2, 1), 2u);  // fewer: the recorded ones
  EXPECT_EQ(replayedRanks(2, 4096), kMostReplayedRanks);
  EXPECT_EQ(replayedRanks(128, 4096), 128u);
  // Two recorded ranks, 4 steps: rank 3 is recorded rank 1 turned by one (steps 1..3 cycle).
  const RecordedSource own = recordedSourceOf(1, 2, 2, 4), turned = recordedSourceOf(3, 2, 2, 4);
  EXPECT_EQ(own.rank, 1u);
  EXPECT_EQ(own.step, 2u);
  EXPECT_EQ(turned.rank, 1u);
  EXPECT_EQ(turned.step, 3u);
  EXPECT_EQ(recordedSourceOf(3, 3, 2, 4).step, 1u);  // wraps past the last
  EXPECT_EQ(recordedSourceOf(5, 0, 2, 4).step, 0u);  // the first step stays every rank's first
  EXPECT_EQ(recordedSourceOf(5, 1, 2, 4).step, 3u);  // turned by two
}

TEST(ReplayProgram, ContentionStretchesComputeBesideACollective) {
  using K = PathSegment::Kind;
  Program p;
  for (int step = 0; step < 2; ++step) {
    p.beginStep();
    const size_t c = p.issue(K::kAllreduce, 100, 0, 0);
    p.compute(K::kBackward, 0);  // 1000 ns, all of it beside the 1000 ns allreduce
    p.wait(c);
  }
  for (ProgramCollective& c : p.collectives) c.ns = 1000;
  ProgramTimes t;
  t.ranks = {0};
  t.durations = {{{1000}, {1000}}};
  EXPECT_EQ(runProgram(p, t).stepNs, 1000);
  // kappa 0.5, recorded with no overlap: 1000 + 0.5 * 1000 (the first run's overlap), then
  // 1000 + 0.5 * 1000 again (the allreduce still covers only its first 1000 ns).
  t.contention = 0.5;
  t.overlaps = {{{0}, {0}}};
  EXPECT_EQ(runProgram(p, t).stepNs, 1500);
  // Recorded with all of it overlapped: 1000 is 500 of compute and 500 of contention; the
  // replay, with the same overlap, gives it back.
  t.overlaps = {{{1000}, {1000}}};
  EXPECT_EQ(runProgram(p, t).stepNs, 1000);
  // A constant of 0.5 from samples whose compute grows by half of each ns of overlap.
  ContentionSamples samples;
  samples[{0, 1, 0}] = {{1000, 0}, {1250, 500}, {1500, 1000}};
  samples[{1, 1, 0}] = {{2000, 200}, {2100, 400}};
  EXPECT_DOUBLE_EQ(fitContention(samples).value_or(ContentionFit{-1, 0}).value, 0.5);
  samples[{0, 1, 0}] = {{1000, 0}, {5000, 1000}};  // more than the compute: clamped
  samples.erase({1, 1, 0});
  EXPECT_DOUBLE_EQ(fitContention(samples).value_or(ContentionFit{-1, 0}).value, 0.95);
  // One bucket launched as backward ends: no stretch ran beside part of a collective.
  samples[{0, 1, 0}] = {{1000, 0}, {1100, 0}};
  EXPECT_FALSE(fitContention(samples).has_value());
  samples[{0, 1, 0}] = {{1000, 1000}, {1100, 1100}};  // covered end to end: says nothing either
  EXPECT_FALSE(fitContention(samples).has_value());
}

// Where the recording cannot fit it, contention comes from the cores: a rank's ring thread,
// runnable beside its compute threads while a collective runs, takes its share of them.
TEST(ReplayCost, ContentionFromTheCoresIsTheComputeShareARingThreadTakes) {
  // Two ranks of one compute thread on two cores: a core each, then half a core beside the ring
  // thread: compute beside a collective runs at half speed, 0.5 ns more per ns of it.
  EXPECT_DOUBLE_EQ(coresContention({2, 1, 1}, 2), 0.5);
  // Three on two cores: 2/3 of a core, then 1/3.
  EXPECT_DOUBLE_EQ(coresContention({2, 1, 1}, 3), 0.5);
  // Two ranks on one core: half a core, then a quarter.
  EXPECT_DOUBLE_EQ(coresContention({1, 1, 1}, 2), 0.5);
  // Two compute threads per rank, two ranks on four cores: a core each, then 4/6 of one.
  EXPECT_NEAR(coresContention({4, 2, 1}, 2), 1.0 / 3, 1e-12);
  // Cores to spare (16 for two ranks of two threads and their ring threads): none.
  EXPECT_DOUBLE_EQ(coresContention({16, 2, 1}, 2), 0);
  // Three ranks, one compute thread each, on four cores: a core each, then 4/6 of one.
  EXPECT_NEAR(coresContention({4, 1, 1}, 3), 1.0 / 3, 1e-12);
  EXPECT_DOUBLE_EQ(coresContention(HostCores{}, 2), 0);  // not recorded
}

// The recording's fit and the cores' value, each weighted by how sure it is: the cores' by
// kCoresContentionSpread (0.25), the fit by its standard error.
TEST(ReplayCost, ContentionIsTheFitAsFarAsTheRecordingPinsItDown) {
  const HostCores twoCores{2, 1, 1}, spare{16, 2, 1};  // 0.5 and 0 from the cores
  ContentionSamples samples;
  // On a line: the fit is exact and taken as it is, whatever the cores say.
  samples[{0, 1, 0}] = {{1000, 0}, {1250, 500}, {1500, 1000}};
  EXPECT_EQ(modelContention(samples, spare, 2), std::make_pair(0.5, true));
  // Two points of one stretch leave no freedom for an error: the cores' value, not fitted.
  samples[{0, 1, 0}] = {{1000, 0}, {1500, 1000}};
  EXPECT_EQ(modelContention(samples, spare, 2), std::make_pair(0.0, false));
  // Noisy: slope 40000 / 50000 = 0.8, residuals -80, 240, -240, 80 on 4 - 2 degrees of
  // freedom, standard error sqrt(128000 / 2 / 50000) = sqrt(1.28); the cores' 0.5 weighs 16.
  samples[{0, 1, 0}] = {{1000, 0}, {1400, 100}, {1000, 200}, {1400, 300}};
  EXPECT_NEAR(fitContention(samples)->standardError, std::sqrt(1.28), 1e-12);
  const auto [kappa, fitted] = modelContention(samples, twoCores, 2);
  EXPECT_NEAR(kappa, (0.8 / 1.28 + 0.5 * 16) / (1 / 1.28 + 16), 1e-12);
  EXPECT_TRUE(fitted);
}

// A DDP recording made by the replay's own rules (2 ranks, 2 buckets, a 150 ns ring), with
// the ranks late in turn: rank 0's forward takes 400 ns in steps 1, 3 and 5, rank 1's in steps
// 2 and 4, 100 otherwise. Every recorded step waits for one late rank; the medians (100 each)
// hide it.
DdpRecording lateInTurn() {
  DdpRecording rec;
  rec.params = {{1000, "float32@cpu"}, {1000, "float32@cpu"}};
  rec.limits = {1000, 1000};
  rec.worldSize = 2;
  const int64_t steps = 7, wire = 150;
  std::vector<int64_t> begin(2, 1000);
  for (int32_t r = 0; r < 2; ++r) rec.ranks.push_back({r, {}});
  for (int64_t k = 0; k < steps; ++k) {
    std::vector<DdpStepRecord> s(2);
    int64_t launch[2][2], ringEnd[2], previous = 0;
    for (int r = 0; r < 2; ++r) {
      const bool late = k > 0 && k < 6 && (k % 2 == 1) == (r == 0);
      s[r].step = k;
      s[r].forwardBeginNs = begin[r];
      s[r].forwardEndNs = begin[r] + (late ? 400 : 100);
      s[r].backwardBeginNs = s[r].forwardEndNs + 10;
      s[r].computeEndNs = s[r].backwardBeginNs + 300;
      s[r].grads = {{1, s[r].backwardBeginNs + 100}, {0, s[r].backwardBeginNs + 200}};
      launch[r][0] = s[r].backwardBeginNs + 100;
      launch[r][1] = s[r].backwardBeginNs + 200;
    }
    for (int b = 0; b < 2; ++b) {
      const int64_t start = std::max({launch[0][b], launch[1][b], previous});
      ringEnd[b] = previous = start + wire;
      for (int r = 0; r < 2; ++r) {
        s[r].buckets.push_back({b, 1000, wire, -1, launch[r][b], ringEnd[b]});
      }
    }
    for (int r = 0; r < 2; ++r) {
      s[r].finalizeEndNs = std::max(s[r].computeEndNs, ringEnd[1]);
      s[r].optimizerNs = 50;
      begin[r] = s[r].finalizeEndNs + 50;
      rec.ranks[r].steps.push_back(s[r]);
    }
  }
  return rec;
}

// Two ranks taking turns being late, as at a ring of two where the last to arrive finishes
// first: each alternates a 190 ms period and a 225 ms one, in opposite phase. The job runs a
// step every 207.5 ms; the slowest rank's single periods would say 225 every step.
TEST(ReplaySteps, RanksTakingTurnsBeingLateCountTheJobsRateNotEveryLongHalf) {
  RecordedSteps recorded;
  int64_t begin[2] = {1'000'000'000, 1'015'000'000};
  for (int64_t step = 0; step < 8; ++step) {
    for (int32_t rank = 0; rank < 2; ++rank) {
      const int64_t period = (step + rank) % 2 == 0 ? 190'000'000 : 225'000'000;
      recorded.add(rank, step, begin[rank], begin[rank] + period);
      begin[rank] += period;
    }
  }
  EXPECT_EQ(recorded.medianNs(), 207'500'000);
  // A rank the others wait for: every rank's periods alike, the pairs change nothing.
  EXPECT_EQ(stepTimesNs({{200, 200, 300, 200, 200}, {200, 200, 300, 200, 200}}),
            (std::vector<int64_t>{200, 250, 250, 200, 200}));
}

// A profiler trace's one to three steps are no steady state: each step is its slowest rank's.
TEST(ReplaySteps, AShortTraceKeepsEachStepsSlowestRank) {
  EXPECT_EQ(stepTimesNs({{10}, {12}}), (std::vector<int64_t>{12}));
  EXPECT_EQ(stepTimesNs({{10, 30, 20}, {12, 28, -1}}), (std::vector<int64_t>{12, 30, 20}));
  // From kPairedStepsFrom steps, a step the rank did not record the next of keeps its own.
  EXPECT_EQ(stepTimesNs({{10, 30, 20, -1, 40}}), (std::vector<int64_t>{20, 25, 20, 0, 40}));
}

TEST(ReplayDdp, TheRecordedStepsReplayedInTurnGiveTheRecordedStepWhereMediansDoNot) {
  const DdpFit fit = fitDdpModel(lateInTurn());
  ASSERT_EQ(fit.model.samples.size(), 7u);
  ASSERT_EQ(fit.model.recordedAllreduceNs.size(), 7u);
  EXPECT_EQ(fit.model.recordedAllreduceNs[3], (std::vector<int64_t>{150, 150}));
  EXPECT_EQ(fit.model.recordedBucketBytes, (std::vector<int64_t>{1000, 1000}));
  EXPECT_DOUBLE_EQ(fit.model.contention, 0);  // backward never changed: nothing to fit
  // A late step: 400 + 10 + 200 to the last launch, the ring to +150... 860 a step.
  EXPECT_EQ(fit.recordedStepNs, 860);
  EXPECT_EQ(replayDdp(fit.model).stepNs, fit.recordedStepNs);
  DdpModel medians = fit.model;
  medians.samples.clear();
  EXPECT_LT(replayDdp(medians).stepNs, fit.recordedStepNs - 200);
}

// torch DDP's first iteration runs buckets of its own (before it rebuilds them in readiness
// order) under the same limits: step 0 as one 2000-byte bucket whose allreduce took 3 us.
// The fit keeps the steps of the last step's plan: its two buckets' times, not a scale taken
// from the first step's one (which had made every allreduce 20 times shorter, an unchanged
// replay half the recorded step on hosts joined by a 1 Gbit/s link).
TEST(ReplayDdp, StepsOfAnEarlierPlanAreLeftOutOfTheFit) {
  DdpRecording rec = lateInTurn();
  for (DdpRankRecord& r : rec.ranks) {
    DdpStepRecord& first = r.steps.front();
    const int64_t end = first.buckets.back().wireEndNs;
    first.buckets = {{0, 2000, 3000, -1, first.backwardBeginNs + 200, end}};
  }
  const DdpFit fit = fitDdpModel(rec);
  EXPECT_EQ(fit.model.recordedBucketBytes, (std::vector<int64_t>{1000, 1000}));
  ASSERT_EQ(fit.model.recordedAllreduceNs.size(), 6u);
  for (const std::vector<int64_t>& step : fit.model.recordedAllreduceNs) {
    EXPECT_EQ(step, (std::vector<int64_t>{150, 150}));
  }
  EXPECT_EQ(replayDdp(fit.model).stepNs, fit.recordedStepNs);
}

// Every bucket launched as backward ends (one bucket of torch's 25 MB, say): no backward ran
// beside part of an allreduce, so the recording cannot fit the contention; the cores price it.
TEST(ReplayDdp, ContentionTheRecordingCannotShowComesFromTheCores) {
  DdpRecording rec = lateInTurn();
  for (DdpRankRecord& rank : rec.ranks) {
    for (DdpStepRecord& s : rank.steps) {
      for (DdpStepRecord::Bucket& b : s.buckets) {
        b.launchNs = s.computeEndNs;
        b.wireEndNs = std::max(b.wireEndNs, s.computeEndNs + 150);
      }
    }
  }
  rec.host = {2, 1, 1};  // two ranks of one compute thread on two cores
  const DdpFit fit = fitDdpModel(rec);
  EXPECT_FALSE(fit.model.contentionFitted);
  EXPECT_DOUBLE_EQ(fit.model.contention, 0.5);
  rec.host = {16, 1, 1};  // cores to spare
  EXPECT_DOUBLE_EQ(fitDdpModel(rec).model.contention, 0);
}

// The same steps recorded by two ranks on one core: where both computed, each had half of it
// (core_shares.h). Replayed at the shares its own schedule leaves each compute, the recorded
// plan gives the recorded step back.
TEST(ReplayDdp, TwoRanksOnOneCoreLoseHalfWhereBothComputeAndReplayTheirStep) {
  DdpRecording rec = lateInTurn();
  rec.host = {1, 1, 1};
  const DdpFit fit = fitDdpModel(rec);
  const DdpRankProfile& first = fit.model.samples[0][0];
  ASSERT_FALSE(first.lossRates.empty());
  // Step 0: both ranks begin forward at 1000 and compute to their backward's end at 410: half
  // a core each (offsets from backward begin, 110 after forward begin).
  EXPECT_EQ(first.lossRates.front().begin, -110);
  EXPECT_DOUBLE_EQ(first.lossRates.front().rate, 0.5);
  EXPECT_EQ(replayDdp(fit.model).stepNs, fit.recordedStepNs);
  // Rank 0 recorded alone (as ringx.ddp's bucket_cap_mb="auto" records itself) stands for
  // both: where it computes, so does the other, and each has half the core.
  DdpRecording alone = rec;
  alone.ranks.resize(1);
  const DdpFit one = fitDdpModel(alone);
  ASSERT_FALSE(one.model.samples[0][0].lossRates.empty());
  EXPECT_DOUBLE_EQ(one.model.samples[0][0].lossRates.front().rate, 0.5);
}

}  // namespace
}  // namespace ringx::replay
