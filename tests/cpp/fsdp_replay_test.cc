// The FSDP replay (analysis/replay/fsdp_replay.h) and its fit (fsdp_fit.h), on steps whose
// answers are worked out by hand in the comments.
#include <gtest/gtest.h>

#include <stdexcept>

#include "analysis/replay/fsdp_fit.h"
#include "analysis/replay/fsdp_replay.h"

namespace ringx::replay {
namespace {

// Two identical ranks; a root (1000 bytes of parameters and gradients) with two leaf units A
// and B (2000 each) run in that order. Every collective sends half its bytes at 2 ranks, at
// 0.1 ns per byte: a gather or reduce-scatter of 2000 bytes takes 100 ns, of 1000 bytes 50,
// an allreduce twice that. Forward: root's own compute 10 before A and after B, A and B 300
// each; loss 20; backward: 10 before B, A and B 600 each, root 10 after A; finalize 5,
// optimizer 50; frees take no time. FULL_SHARD, BACKWARD_PRE, no forward prefetch, the
// limiter on, gathers on their own group.
FsdpModel rootAndTwoBlocks() {
  FsdpModel m;
  m.units = {{"", 1000, 1000}, {"A", 2000, 2000}, {"B", 2000, 2000}};
  m.forward = {{0, true}, {1, true}, {1, false}, {2, true}, {2, false}, {0, false}};
  m.backward = {{0, true}, {2, true}, {2, false}, {1, true}, {1, false}, {0, false}};
  for (int32_t r = 0; r < 2; ++r) {
    FsdpRankProfile p;
    p.rank = r;
    p.forwardGapNs = {0, 10, 300, 0, 300, 10};
    p.toBackwardNs = 20;
    p.backwardGapNs = {0, 10, 600, 0, 600, 10};
    p.finalizeNs = 5;
    p.optimizerNs = 50;
    p.reshardNs = {0, 0, 0};
    m.ranks.push_back(p);
  }
  m.worldSize = 2;
  m.gather = m.reduceScatter = m.allreduce = {0, 0.1};
  return m;
}

// Forward: gather the root 0-50; A 60-160, compute to 460, free; B 460-560, compute to 860;
// root 870; loss 890. Backward: B gathered 900-1000, A prefetched 1000-1100 (hidden behind
// B's 600); B's reduce-scatter 1600-1700; A's 2200-2300; the root's waits for the group
// until 2300-2350; the limiter waits for A's (2210-2300), the end for the root's (to 2350);
// finalize 2355, optimizer 2405. Waits: 50 + 100 + 100 + 100 + 90 + 50 = 490.
TEST(ReplayFsdp, TheRecordedScheduleReplaysToTheHandWorkedStep) {
  const FsdpReplay r = replayFsdp(rootAndTwoBlocks());
  EXPECT_EQ(r.stepNs, 2405);
  EXPECT_EQ(r.exposedCommNs, 490);
  EXPECT_EQ(r.units, 3u);
  EXPECT_EQ(r.gathers, 5u);  // root, A, B in forward; B, A again in backward
  EXPECT_EQ(r.commNs, 50 + 100 + 100 + 100 + 100 + 100 + 100 + 50);
  // The slowest rank's step is tiled by its compute and its waits.
  int64_t covered = 0, at = 0;
  for (const PathSegment& s : r.criticalPath) {
    EXPECT_EQ(s.beginNs, at) << pathKindName(s.kind);
    covered += s.endNs - s.beginNs;
    at = s.endNs;
  }
  EXPECT_EQ(covered, r.stepNs);
  ASSERT_FALSE(r.criticalPath.empty());
  EXPECT_EQ(r.criticalPath.front().kind, PathSegment::Kind::kAllGather);  // the root's gather
  EXPECT_EQ(r.criticalPath.front().bucket, 0);
  EXPECT_EQ(r.criticalPath.back().kind, PathSegment::Kind::kOptimizer);
}

TEST(ReplayFsdp, ScheduleChangesGiveTheHandWorkedSteps) {
  const FsdpModel m = rootAndTwoBlocks();
  FsdpWhatIf c;
  // SHARD_GRAD_OP keeps A and B gathered from forward to backward: no backward gathers, so
  // backward starts its compute at 900 and everything after moves 100 earlier: 2305.
  c.sharding = FsdpSharding::kShardGradOp;
  EXPECT_EQ(replayFsdp(m, c).stepNs, 2305);
  EXPECT_EQ(replayFsdp(m, c).gathers, 3u);
  // NO_SHARD gathers nothing (forward and loss end at 640) and allreduces: B's 1250-1450, A's
  // 1850-2050, the root's 2050-2150; finalize 2155; the optimizer steps over all of the
  // parameters instead of half of them: 100, to 2255.
  c.sharding = FsdpSharding::kNoShard;
  EXPECT_EQ(replayFsdp(m, c).stepNs, 2255);
  EXPECT_EQ(replayFsdp(m, c).gathers, 0u);
  // Without backward prefetch A's gather starts after B's backward (1600-1700): +100.
  c = {};
  c.backwardPrefetch = FsdpBackwardPrefetch::kNone;
  EXPECT_EQ(replayFsdp(m, c).stepNs, 2505);
  // BACKWARD_POST issues A's gather when B's backward ends, as late as no prefetch here.
  c.backwardPrefetch = FsdpBackwardPrefetch::kBackwardPost;
  EXPECT_EQ(replayFsdp(m, c).stepNs, 2505);
  // Forward prefetch: A's gather is issued when the root's is done (50-150) and B's when A
  // starts (150-250), so forward waits only 50 + 90: forward ends at 760, loss 780, backward
  // as before from there: 2295.
  c = {};
  c.forwardPrefetch = true;
  EXPECT_EQ(replayFsdp(m, c).stepNs, 2295);
  // The limiter only moved the wait for A's reduce-scatter to the root's post-backward; the
  // end waits for it anyway.
  c = {};
  c.limitAllGathers = false;
  EXPECT_EQ(replayFsdp(m, c).stepNs, 2405);
}

// A blocking gather's copy out (FSDP2 on CPU) comes with the gather: 20 ns for A and B each
// after every gather, on the compute thread, where the unit is needed: four of them, +80;
// SHARD_GRAD_OP gathers A and B in forward only: +40.
TEST(ReplayFsdp, ACopyOutComesAndGoesWithItsGather) {
  FsdpModel m = rootAndTwoBlocks();
  for (FsdpRankProfile& p : m.ranks) p.copyOutNs = {0, 20, 20};
  EXPECT_EQ(replayFsdp(m).stepNs, 2405 + 80);
  FsdpWhatIf c;
  c.sharding = FsdpSharding::kShardGradOp;
  EXPECT_EQ(replayFsdp(m, c).stepNs, 2305 + 40);
}

// A and B merged: one unit of 4000 bytes (gathers and reduce-scatters of 200 ns). Forward:
// root 0-50, AB 60-260, compute 600 to 860, root 870, loss 890; backward: AB 900-1100,
// compute 1200 to 2300, its reduce-scatter 2300-2500, the root's 2500-2550; 2555, 2605.
TEST(ReplayFsdp, MergedUnitsGatherAtOnce) {
  const FsdpModel m = rootAndTwoBlocks();
  const FsdpModel merged = mergeUnits(m, 2);
  ASSERT_EQ(merged.units.size(), 2u);
  EXPECT_EQ(merged.units[1].name, "A+B");
  EXPECT_EQ(merged.units[1].paramBytes, 4000);
  EXPECT_EQ(merged.forward.size(), 4u);
  EXPECT_EQ(merged.ranks[0].forwardGapNs, (std::vector<int64_t>{0, 10, 600, 10}));
  EXPECT_EQ(merged.ranks[0].backwardGapNs, (std::vector<int64_t>{0, 10, 1200, 10}));
  FsdpWhatIf c;
  c.mergeUnits = 2;
  EXPECT_EQ(replayFsdp(m, c).stepNs, 2605);
  EXPECT_EQ(replayFsdp(m, c).units, 2u);
  // Three leaves in twos: the third stays alone.
  FsdpModel three = m;
  three.units.push_back({"C", 2000, 2000});
  three.forward = {{0, true},  {1, true}, {1, false}, {2, true},
                   {2, false}, {3, true}, {3, false}, {0, false}};
  EXPECT_EQ(mergeUnits(three, 2).units.size(), 3u);
  EXPECT_THROW(replayFsdp(m, FsdpWhatIf{"", {}, {}, {}, {}, 0}), std::invalid_argument);
}

// The engine's own work at the hooks a merge drops goes with them: A's post-forward 3 ns and
// B's pre-forward 5 (both in the gap between them, 8 ns of it), B's post-backward 7 (the gap
// after it). Unmerged, the step is 15 longer; merged, the step and the gaps are the ones above,
// which had no such work.
TEST(ReplayFsdp, MergedUnitsRunTheirHooksOnce) {
  FsdpModel m = rootAndTwoBlocks();
  for (FsdpRankProfile& p : m.ranks) {
    p.forwardGapNs = {0, 10, 300, 8, 300, 10};
    p.forwardHookNs = {0, 0, 3, 5, 0, 0};
    p.backwardGapNs = {0, 10, 600, 7, 600, 10};
    p.backwardHookNs = {0, 0, 7, 0, 0, 0};
  }
  EXPECT_EQ(replayFsdp(m).stepNs, 2405 + 15);
  const FsdpModel merged = mergeUnits(m, 2);
  EXPECT_EQ(merged.ranks[0].forwardGapNs, (std::vector<int64_t>{0, 10, 600, 10}));
  EXPECT_EQ(merged.ranks[0].backwardGapNs, (std::vector<int64_t>{0, 10, 1200, 10}));
  EXPECT_EQ(merged.ranks[0].forwardHookNs, (std::vector<int64_t>{0, 0, 0, 0}));
  FsdpWhatIf c;
  c.mergeUnits = 2;
  EXPECT_EQ(replayFsdp(m, c).stepNs, 2605);
}

// A copy-out costs per call and per byte: the root's 15 ns for 1000 bytes and A's and B's 20
// for 2000 fit 10 ns a call and 0.005 a byte, so merged A+B (4000 bytes) copies out in
// 10 + 20 = 30, not 40. Units of one size cannot tell the two apart: their sum.
TEST(ReplayFsdp, AMergedUnitCopiesOutInOneCall) {
  FsdpModel m = rootAndTwoBlocks();
  for (FsdpRankProfile& p : m.ranks) p.copyOutNs = {15, 20, 20};
  EXPECT_EQ(mergeUnits(m, 2).ranks[1].copyOutNs, (std::vector<int64_t>{15, 30}));
  for (FsdpRankProfile& p : m.ranks) p.copyOutNs = {0, 20, 20};  // the root: none recorded
  EXPECT_EQ(mergeUnits(m, 2).ranks[1].copyOutNs, (std::vector<int64_t>{0, 40}));
}

TEST(ReplayFsdp, BoundsAndAStraggler) {
  FsdpModel m = rootAndTwoBlocks();
  FsdpWhatIf c;
  // Communication free: compute alone, 620 + 20 + 1220 + 5 + 50.
  c.commFree = true;
  EXPECT_EQ(replayFsdp(m, c).stepNs, 1915);
  EXPECT_EQ(replayFsdp(m, c).exposedCommNs, 0);
  // Compute free: the collectives back to back where the schedule lets them: forward gathers
  // 0-250, B's 250-350, A's 350-450 beside B's reduce-scatter, A's 450-550, the root's 550-600.
  c = {};
  c.computeFree = true;
  EXPECT_EQ(replayFsdp(m, c).stepNs, 600);
  // Rank 1 computes B's backward 400 ns longer: everyone's step grows by it (the
  // reduce-scatters wait for rank 1), and rank 1, which waits least, is the one the others
  // wait for.
  m.ranks[1].backwardGapNs[2] += 400;
  const FsdpReplay r = replayFsdp(m);
  EXPECT_EQ(r.stepNs, 2805);
  EXPECT_EQ(r.slowestRank, 1);
}

// Contention: compute beside the rank's own collectives in flight runs slower. The recorded
// gaps here had no overlap, so the replay stretches what it overlaps: the step grows, and
// prefetching (which puts gathers under compute) gains less than without contention.
TEST(ReplayFsdp, ContentionStretchesOverlappedCompute) {
  FsdpModel m = rootAndTwoBlocks();
  FsdpWhatIf none;
  none.backwardPrefetch = FsdpBackwardPrefetch::kNone;
  const int64_t free = replayFsdp(m).stepNs, freeNone = replayFsdp(m, none).stepNs;
  m.contention = 1;
  const int64_t busy = replayFsdp(m).stepNs, busyNone = replayFsdp(m, none).stepNs;
  EXPECT_GT(busy, free);
  EXPECT_LT(busyNone - busy, freeNone - free);
  FsdpWhatIf comm;
  comm.commFree = true;  // nothing in flight: no contention either
  EXPECT_EQ(replayFsdp(m, comm).stepNs, 1915);
}

// Across hosts the gathers' group shares the links with the reduce-scatters (program.h's shared
// link). Units root, A, B; BACKWARD_POST: A's backward gather is issued with B's reduce-scatter
// at B's post-backward, both on the wire 1500-1600 (each step's t on), where alone each takes
// 50. The fit times each alone: 100 less the 50 its half of the link cost it. On one host
// (shared memory, no link) they keep their 100.
FsdpRecording besideAReduceScatter(int64_t hosts) {
  FsdpRecording rec;
  rec.units = {"(root)", "A", "B"};
  rec.worldSize = 2;
  rec.runtime.gatherLane = true;
  rec.runtime.backwardPrefetch = FsdpBackwardPrefetch::kBackwardPost;
  rec.host.hosts = hosts;
  for (int32_t rank = 0; rank < 2; ++rank) {
    FsdpRankRecord rr;
    rr.rank = rank;
    for (int64_t step = 0; step < 3; ++step) {
      const int64_t t = 1000 + step * 10000;
      FsdpStepRecord s;
      s.step = step;
      s.forwardBeginNs = t;
      s.forward = {{0, t + 50, t + 900}, {1, t + 110, t + 400}, {2, t + 450, t + 800}};
      // (unit, bytes, issue, ready, exposed, wire end)
      s.gathers = {{0, 1000, t, t + 50, 50, t + 40},
                   {1, 2000, t + 60, t + 110, 50, t + 100},
                   {2, 2000, t + 400, t + 450, 50, t + 440}};
      s.forwardEndNs = t + 900;
      s.backwardBeginNs = t + 1000;
      s.backward = {{0, t + 1000, t + 3000}, {2, t + 1050, t + 1500}, {1, t + 1610, t + 2500}};
      s.gathers.push_back({2, 2000, t + 1000, t + 1050, 50, t + 1040});
      s.gathers.push_back({1, 2000, t + 1500, t + 1610, 110, t + 1600, true});  // prefetched
      s.reductions = {{2, false, 2000, t + 1500, t + 1600, t + 1600},
                      {1, false, 2000, t + 2500, t + 2600, t + 2600},
                      {0, false, 1000, t + 3000, t + 3050, t + 3050}};
      s.backwardEndNs = t + 3100;
      s.optimizerNs = 6900;
      rr.steps.push_back(s);
    }
    rec.ranks.push_back(rr);
  }
  return rec;
}

int64_t recordedNs(const FsdpModel& m, PathSegment::Kind kind, size_t unit, size_t occurrence) {
  for (const FsdpModel::RecordedCollective& c : m.recordedCollectives) {
    if (c.kind == kind && c.unit == unit && c.sample == 1 && c.occurrence == occurrence) {
      return c.ns;
    }
  }
  return -1;
}

TEST(FitFsdp, AcrossHostsACollectiveBesideAnotherLanesIsTimedAlone) {
  using K = PathSegment::Kind;
  const FsdpFit linked = fitFsdpModel(besideAReduceScatter(2));
  EXPECT_TRUE(linked.model.sharedLink);
  EXPECT_EQ(recordedNs(linked.model, K::kReduceScatter, 2, 0), 50);
  EXPECT_EQ(recordedNs(linked.model, K::kAllGather, 1, 1), 50);
  EXPECT_EQ(recordedNs(linked.model, K::kReduceScatter, 1, 0), 100);  // alone as recorded
  const FsdpFit oneHost = fitFsdpModel(besideAReduceScatter(1));
  EXPECT_FALSE(oneHost.model.sharedLink);
  EXPECT_EQ(recordedNs(oneHost.model, K::kReduceScatter, 2, 0), 100);
  EXPECT_EQ(recordedNs(oneHost.model, K::kAllGather, 1, 1), 100);
  // The replay of the recorded schedule shares the link again: the two take their 100 each, as
  // the one host's replay of them (within the passes' 0.1% of the run), 50 more than alone.
  const int64_t shared = replayFsdp(linked.model).stepNs, kept = replayFsdp(oneHost.model).stepNs;
  EXPECT_NEAR(static_cast<double>(shared), static_cast<double>(kept), 10);
  FsdpModel alone = linked.model;
  alone.sharedLink = false;
  EXPECT_NEAR(static_cast<double>(replayFsdp(alone).stepNs), static_cast<double>(kept - 50), 10);
}

// The fit: one rank's step recorded with known waits and frees; the compute between hooks
// comes back without them.
TEST(FitFsdp, GapsLeaveOutWaitsAndFrees) {
  FsdpRecording rec;
  rec.units = {"(root)", "A"};
  rec.worldSize = 2;
  for (int32_t rank = 0; rank < 2; ++rank) {
    FsdpRankRecord rr;
    rr.rank = rank;
    for (int64_t step = 0; step < 3; ++step) {
      const int64_t t = 1000 + step * 10000;  // each step 10000 ns apart
      FsdpStepRecord s;
      s.step = step;
      s.forwardBeginNs = t;
      // The root's gather is waited for 100 ns, A's 50: compute is 10 before A.
      s.forward = {{0, t + 100, t + 900}, {1, t + 160, t + 800}};
      // (unit, bytes, issue, ready, exposed, wire end): on the wire 40 and 45 ns after issue.
      s.gathers = {{0, 1000, t, t + 100, 100, t + 40}, {1, 2000, t + 110, t + 160, 50, t + 155}};
      s.reshards = {{1, t + 800, t + 820}};  // A freed after forward: 20 ns
      s.forwardEndNs = t + 900;
      s.backwardBeginNs = t + 1000;
      s.backward = {{0, t + 1000, t + 3000}, {1, t + 1100, t + 2000}};
      s.gathers.push_back({1, 2000, t + 1040, t + 1100, 60, t + 1085});
      s.reshards.push_back({1, t + 2000, t + 2010});
      // A's reduce-scatter done at 2400 (the limiter does not wait for it: it is the only
      // one); the root's launched at 3000, done 3200: the end waits for both.
      s.reductions = {{1, false, 2000, t + 2000, t + 2400, t + 2090},
                      {0, false, 1000, t + 3000, t + 3200, t + 3050}};
      s.backwardEndNs = t + 3300;
      s.optimizerNs = 6700;
      rr.steps.push_back(s);
    }
    rec.ranks.push_back(rr);
  }
  const FsdpFit fit = fitFsdpModel(rec);
  const FsdpModel& m = fit.model;
  ASSERT_EQ(m.units.size(), 2u);
  EXPECT_EQ(m.units[1].paramBytes, 2000);
  EXPECT_EQ(m.units[0].gradBytes, 1000);
  const FsdpRankProfile& p = m.ranks[0];
  // Forward hooks: root opens 100 after forward begins (all of it the gather's wait), A 60
  // later (50 of it waiting), A closes 640 later, the root 100 later (20 of it A's free).
  EXPECT_EQ(p.forwardGapNs, (std::vector<int64_t>{0, 10, 640, 80}));
  EXPECT_EQ(p.toBackwardNs, 100);
  // Backward: root 0, A 100 later (60 waiting), A closes 900 later, root 1000 later (10 of
  // it A's free). After the root closes at 3000: the wait for its reduction (to 3200), 100.
  EXPECT_EQ(p.backwardGapNs, (std::vector<int64_t>{0, 40, 900, 990}));
  EXPECT_EQ(p.finalizeNs, 100);
  EXPECT_EQ(p.optimizerNs, 6700);
  EXPECT_EQ(p.reshardNs[1], 10);  // the (lower) median of three 20s and three 10s
  // A gather's copy out, from the later of its wire end and the wait's start until ready: the
  // root's 60 (40 to 100), A's 5 in forward and 15 in backward (the lower median, 5).
  EXPECT_EQ(p.copyOutNs, (std::vector<int64_t>{60, 5}));
  EXPECT_EQ(fit.recordedStepNs, 10000);
  EXPECT_EQ(fit.steps, 3u);
  ASSERT_EQ(m.samples.size(), 3u);  // every step, every rank, for the replay to run as recorded
  EXPECT_EQ(m.samples[1][1].backwardGapNs, p.backwardGapNs);
  EXPECT_EQ(m.samples[2][0].optimizerNs, 6700);
  // Per kind, from the shortest wire of each (unit, step): gathers of 1000 bytes (500 sent) in
  // 40 ns and 2000 (1000 sent) in 45: 35 ns a step and 0.01 ns a byte; reduce-scatters 50 and
  // 90: 10 ns and 0.08.
  EXPECT_NEAR(m.gather.stepNs, 35, 1e-6);
  EXPECT_NEAR(m.gather.nsPerByte, 0.01, 1e-9);
  EXPECT_NEAR(m.reduceScatter.stepNs, 10, 1e-6);
  EXPECT_NEAR(m.reduceScatter.nsPerByte, 0.08, 1e-9);
  EXPECT_FALSE(fit.allreduce.ok);  // none recorded: the fit of all kinds stands in
  // ... scaled, as every fitted cost, so that it prices the recorded collectives at what they
  // took: one factor on both constants.
  const double factor = m.allreduce.nsPerByte / fit.all.link.nsPerByte;
  EXPECT_GT(factor, 1);
  EXPECT_NEAR(m.allreduce.stepNs, fit.all.link.stepNs * factor, 1e-6);

  // The same steps with blocking collectives (FSDP2 on CPU): each holds its thread from issue to
  // wire end; the copies out are the same. A's reduce-scatter holds the thread 2000-2090,
  // inside the root's last gap (A's free, 2000-2010, within it): 1000 - 90.
  rec.runtime.blocking = true;
  const FsdpFit blocking = fitFsdpModel(rec);
  const FsdpRankProfile& b = blocking.model.ranks[0];
  EXPECT_EQ(b.copyOutNs, (std::vector<int64_t>{60, 5}));
  EXPECT_EQ(b.forwardGapNs, p.forwardGapNs);
  EXPECT_EQ(b.backwardGapNs, (std::vector<int64_t>{0, 40, 900, 910}));
  EXPECT_TRUE(b.forwardHookNs.empty());  // ringx.fsdp's hooks: nothing a merge drops

  // Recorded by FSDP2, the hooks' own work: every pre-hook here only waits, every post-hook
  // but A's after backward only frees; A's post-backward reduces (held 2000-2090) and is done
  // at 2400: 400 - 90 of its own.
  rec.runtime.fsdp2 = true;
  const FsdpFit fsdp2 = fitFsdpModel(rec);
  const FsdpRankProfile& f = fsdp2.model.ranks[0];
  EXPECT_EQ(f.forwardHookNs, (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(f.backwardHookNs, (std::vector<int64_t>{0, 0, 310, 0}));
}

}  // namespace
}  // namespace ringx::replay
