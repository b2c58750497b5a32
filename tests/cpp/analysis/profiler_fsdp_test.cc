// torch FSDP2 recovered from CPU profiler traces (analysis/profiler_fsdp.h): hand-made Kineto
// files of a two-rank gloo job whose units, gathers, waits, prefetch, compute, frees and
// reductions are known by construction, and the what-if report built from them.
// tests/python/test_profiler_whatif.py checks the same recovery on real FSDP2 jobs against
// FSDP2's own units and a ringx trace of the same run.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "analysis/advise.h"
#include "analysis/profiler_fsdp.h"
#include "analysis/profiler_program.h"
#include "analysis/summary.h"
#include "analysis/trace_analyses.h"
#include "analysis/whatif.h"
#include "base/error.h"
#include "tests/cpp/profiled_fsdp_trace.h"

namespace ringx::analysis {
// Named, not anonymous: the tests are built as one unity source with the other analyses'.
namespace profiled_fsdp_test {

using testing::CpuRank;
using testing::fsdpStep;
using testing::kLayerShard;
using testing::kRootShard;
using testing::kStepUs;
using testing::profiledFsdpJob;
using testing::scope;
using testing::storeOf;

int64_t us(int64_t n) { return n * 1000; }

TEST(ProfiledFsdp, UnitsGathersWaitsAndReductionsComeFromFsdp2sScopes) {
  const model::TraceStore store = storeOf(profiledFsdpJob());
  EXPECT_FALSE(holdsProfilerTrace(store));  // no GPU: not a device program
  ASSERT_TRUE(holdsProfiledTorchFsdp2(store));
  EXPECT_EQ(whatIfEngine(store), "fsdp");
  const ProfiledFsdp p = profiledTorchFsdp2(store);
  const replay::FsdpRecording& rec = p.recording;
  EXPECT_EQ(p.wire, "gloo");
  EXPECT_EQ(p.firstStep, 1);
  EXPECT_EQ(rec.worldSize, 2);
  EXPECT_EQ(rec.units, (std::vector<std::string>{"(root)", "layers.0", "layers.1"}));
  // The layers are gathered again in backward: they free after forward.
  EXPECT_EQ(rec.runtime.sharding, replay::FsdpSharding::kFullShard);
  EXPECT_FALSE(rec.runtime.forwardPrefetch);  // the only prefetch is backward's
  EXPECT_TRUE(rec.runtime.fsdp2);
  EXPECT_TRUE(rec.runtime.blocking);
  ASSERT_EQ(rec.ranks.size(), 2u);
  ASSERT_EQ(rec.ranks[1].steps.size(), 3u);
  const replay::FsdpStepRecord& s = rec.ranks[1].steps[1];  // step 2 of rank 1
  const int64_t t = 1'000'000 + kStepUs + 5;
  EXPECT_EQ(s.step, 2);
  EXPECT_EQ(s.forwardBeginNs, us(t + 100));
  EXPECT_EQ(s.forwardEndNs, us(t + 4720));
  EXPECT_EQ(s.backwardBeginNs, us(t + 5000));
  EXPECT_EQ(s.backwardEndNs, us(t + 11200));
  EXPECT_EQ(s.optimizerNs, us(kStepUs + 100 - 11200));  // to the next root pre-forward
  EXPECT_EQ(rec.ranks[1].steps[2].optimizerNs, -1);     // no next step profiled

  // Gathers: root, layers.0 and layers.1 in forward; layers.1 and (prefetched) layers.0 in
  // backward, in the order they became ready.
  ASSERT_EQ(s.gathers.size(), 5u);
  const int64_t layerBytes = 2 * kLayerShard * 4, rootBytes = 2 * kRootShard * 4;
  auto expectGather = [&](size_t i, size_t unit, int64_t bytes, int64_t issue, int64_t ready,
                          int64_t exposed, int64_t wireEnd, bool prefetched) {
    const replay::FsdpStepRecord::Gather& g = s.gathers[i];
    EXPECT_EQ(g.unit, unit) << i;
    EXPECT_EQ(g.bytes, bytes) << i;  // the unsharded parameters
    EXPECT_EQ(g.issueNs, us(t + issue)) << i;
    EXPECT_EQ(g.readyNs, us(t + ready)) << i;
    EXPECT_EQ(g.exposedNs, us(exposed)) << i;
    EXPECT_EQ(g.wireEndNs, us(t + wireEnd)) << i;
    EXPECT_EQ(g.prefetched, prefetched) << i;
  };
  expectGather(0, 0, rootBytes, 130, 340, 340 - 120, 300, false);
  expectGather(1, 1, layerBytes, 510, 1400, 900, 1300, false);
  expectGather(2, 2, layerBytes, 2610, 3500, 900, 3400, false);
  expectGather(3, 2, layerBytes, 5110, 6000, 900, 5900, false);
  // Prefetched in layers.1's pre-backward; waited for from layers.0's own to its copy-out.
  expectGather(4, 1, layerBytes, 6020, 8480, 80, 6170, true);

  ASSERT_EQ(s.forward.size(), 3u);
  EXPECT_EQ(s.forward[0].unit, 1u);  // layers.0's ends first
  EXPECT_EQ(s.forward[0].beginNs, us(t + 1500));
  EXPECT_EQ(s.forward[0].endNs, us(t + 2500));
  EXPECT_EQ(s.forward[2].unit, 0u);  // the root's spans the layers'
  EXPECT_EQ(s.forward[2].beginNs, us(t + 400));
  EXPECT_EQ(s.forward[2].endNs, us(t + 4700));
  ASSERT_EQ(s.backward.size(), 3u);
  EXPECT_EQ(s.backward[0].unit, 2u);
  EXPECT_EQ(s.backward[0].beginNs, us(t + 6200));
  EXPECT_EQ(s.backward[0].endNs, us(t + 7200));
  EXPECT_EQ(s.backward[2].unit, 0u);
  EXPECT_EQ(s.backward[2].beginNs, us(t + 5010));
  EXPECT_EQ(s.backward[2].endNs, us(t + 10700));
  // Frees: every post_backward_reshard, and the layers' post_forward (not the root's).
  size_t afterForward = 0;
  for (const replay::FsdpStepRecord::Span& r : s.reshards) {
    if (r.beginNs < us(t + 5000)) {
      ++afterForward;
      EXPECT_NE(r.unit, 0u);
      EXPECT_EQ(r.endNs - r.beginNs, us(50));
    }
  }
  EXPECT_EQ(afterForward, 2u);
  EXPECT_EQ(s.reshards.size(), 5u);

  ASSERT_EQ(s.reductions.size(), 3u);
  const replay::FsdpStepRecord::Reduction& red = s.reductions[0];
  EXPECT_EQ(red.unit, 2u);
  EXPECT_FALSE(red.allreduce);       // FSDP2's reduce-scatter, which gloo runs as an allreduce
  EXPECT_EQ(red.bytes, layerBytes);  // the whole gradient
  EXPECT_EQ(red.launchNs, us(t + 7260));
  EXPECT_EQ(red.doneNs, us(t + 8280));
  EXPECT_EQ(red.wireEndNs, us(t + 8280));
  EXPECT_EQ(s.reductions[2].unit, 0u);
  EXPECT_EQ(s.reductions[2].bytes, rootBytes);
}

TEST(ProfiledFsdp, TheWhatIfReplaysTheRecordedStepAndAsksFsdp2sOptions) {
  const model::TraceStore store = storeOf(profiledFsdpJob());
  WhatIfQuestions q;
  q.hostCores = 4;
  const FsdpWhatIfReport r = fsdpWhatIf(store, q);
  EXPECT_EQ(r.source.profiledWire, "gloo");
  EXPECT_EQ(r.source.model.units.size(), 3u);
  EXPECT_EQ(r.source.model.host.cores, 4);
  EXPECT_LT(std::abs(r.baselineErrorShare), 0.05) << r.baselineErrorShare;
  EXPECT_EQ(r.baseline.gathers, 5);
  bool asked = false;
  for (const FsdpWhatIfRow& row : r.rows) {
    if (row.change.label != "reshard_after_forward=False") continue;
    asked = true;
    // The layers stay gathered from forward to backward: two gathers fewer, a shorter step.
    EXPECT_EQ(row.replay.gathers, 3);
    EXPECT_LT(row.predictedStepNs, r.source.recordedStepNs);
  }
  EXPECT_TRUE(asked);
  const std::string text = formatFsdpWhatIf(r, "job");
  EXPECT_NE(text.find("torch FSDP2 recovered from torch.profiler traces"), std::string::npos)
      << text;
  EXPECT_NE(fsdpWhatIfJson(r).find("\"source\":\"profiler\""), std::string::npos);
}

// The FSDP section of the summary, the viewer's FSDP panel and the advice read the recovered
// units as they read a ringx trace's.
TEST(ProfiledFsdp, TheSummaryAndTheAdviceSeeTheUnits) {
  const model::TraceStore store = storeOf(profiledFsdpJob());
  const FsdpAnalysis f = analyzeFsdp(store);
  EXPECT_EQ(f.iterationCount, 6u);  // three steps of two ranks
  ASSERT_EQ(f.units.size(), 3u);
  EXPECT_EQ(f.units[0].unit, "(root)");  // in the order they ran
  const FsdpUnitAnalysis& first = f.units[1];
  EXPECT_EQ(first.unit, "layers.0");
  EXPECT_EQ(first.gathers, 12u);
  EXPECT_EQ(first.forwardGathers, 6u);
  EXPECT_EQ(first.backwardGathers, 6u);
  EXPECT_EQ(first.prefetched, 6u);  // backward's
  EXPECT_EQ(first.gatherBytes, 2 * kLayerShard * 4);
  EXPECT_EQ(first.exposedTotalNs, 6 * us(900 + 80));
  EXPECT_EQ(first.reduceScatters, 6u);
  EXPECT_EQ(first.forwardMeanNs, us(1000));
  EXPECT_EQ(f.units[2].prefetched, 0u);
  EXPECT_EQ(f.exposedMeanNs, us(220 + 900 + 900 + 900 + 80));
  EXPECT_EQ(f.forwardMeanNs, us(4720 - 100));
  EXPECT_EQ(f.backwardMeanNs, us(11200 - 5000));

  const Summary s = summarize(store, "job");
  EXPECT_EQ(s.fsdp.iterationCount, 6u);
  const Advice a = advise(store, s);
  EXPECT_EQ(a.engine, "fsdp2");
  std::vector<std::string> kinds;
  for (const Finding& finding : a.findings) {
    kinds.push_back(finding.kind);
    if (finding.kind == "no-prefetch") {
      EXPECT_NE(finding.what.find("layers.1"), std::string::npos) << finding.what;
    }
  }
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "exposed-communication"), kinds.end());
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), "no-prefetch"), 1);
}

TEST(ProfiledFsdp, CollectivesWithoutTheBackendsScopesAreRefusedSayingSo) {
  // A job whose profile lost the backend's scopes (the c10d ops alone): the wire is unknown.
  std::vector<CpuRank> ranks;
  for (int r = 0; r < 2; ++r) {
    CpuRank& k = ranks.emplace_back(r);
    const int64_t t = 1'000'000;
    k.op("user_annotation", "ProfilerStep#1", 1, t, kStepUs);
    k.op("user_annotation", "FSDP::root_pre_forward", 1, t + 100, 10);
    k.op("user_annotation", "FSDP::pre_forward", 1, t + 120, 280);
    k.op("user_annotation", "FSDP::all_gather", 1, t + 130, 220);
    k.op("cpu_op", "c10d::_allgather_base_", 1, t + 140, 10, "[[512], [256], []]");
    k.op("user_annotation", "FSDP::root_post_backward_callback", 1, t + 1100, 100);
  }
  const model::TraceStore store = storeOf(ranks);
  try {
    profiledTorchFsdp2(store);
    FAIL() << "a gather without its wire was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("without the backend's scope"), std::string::npos)
        << e.what();
  }
}

}  // namespace profiled_fsdp_test
}  // namespace ringx::analysis
