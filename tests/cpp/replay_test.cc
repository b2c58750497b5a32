// The replay model (analysis/replay): the cost model's fit, and DDP steps whose answers are
// worked out by hand in the comments.
#include <gtest/gtest.h>

#include <stdexcept>

#include "analysis/replay/cost_model.h"
#include "analysis/replay/ddp_replay.h"

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
  EXPECT_EQ(r.exposedCommNs, 100);  // the last allreduce ends 100 after compute
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
  // the four allreduces back to back (to 1860), the last copy back, the optimizer.
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

  // Rank 1 computes twice as long: the ring waits for it, and its backward is on the path.
  DdpRankProfile& slow = m.ranks[1];
  slow.backwardComputeNs = 900;
  slow.gradReadyNs = {800, 600, 400, 200};
  const DdpReplay r = replayDdp(m);
  EXPECT_EQ(r.slowestRank, 1);
  // Rank 1: backward 110..1010, its last gradient filled at 110 + 850 = 960 and on the ring
  // until 1060, before its compute ends; it copies back 1010..1210; optimizer: 1260. Rank 0
  // waits for it on the ring every step, so both settle at 1260, and rank 1 is the one waited
  // for: its own compute is the whole path.
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

}  // namespace
}  // namespace ringx::replay
