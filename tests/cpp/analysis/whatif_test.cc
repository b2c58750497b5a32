// What-if from a trace (analysis/whatif.h): a two-rank DDP job written event by event as the
// engine records it, with timings that follow the replay's own model, so the model read back
// must be exactly the one that made them and its answers are known.
#include "analysis/whatif.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/cpp/analysis/ddp_job.h"
#include "tests/cpp/trace/trace_fixture.h"
#include "trace/format/schema.h"
#include "trace/model/loader.h"

namespace ringx::analysis {
namespace {

namespace fx = ringx::trace::fixture;
namespace targ = trace::arg;
using trace::Category;

void writeJob(const fx::TempDir& dir, bool withGrads = true, bool withPlan = true) {
  fx::DdpJobOptions o;
  o.grads = withGrads;
  o.plan = withPlan;
  fx::writeDdpJob(dir, o);
}

TEST(WhatIf, TheModelReadBackIsTheOneThatMadeTheTrace) {
  fx::TempDir dir;
  writeJob(dir);
  model::TraceStore store;
  model::loadTraces(store, {dir.path()});
  const DdpModelSource src = ddpModelOf(store);
  const replay::DdpModel& m = src.model;
  EXPECT_EQ(src.recordedStepNs, 810);
  EXPECT_EQ(src.planStep, 1);
  EXPECT_EQ(src.steps, 6u);  // steps 1..6: step 0 ran under the plan before the rebuild
  EXPECT_EQ(m.worldSize, 2);
  EXPECT_EQ(m.limits.bucketBytes, 1000);
  ASSERT_EQ(m.params.size(), 4u);
  EXPECT_EQ(m.params[0].bytes, 1000);
  EXPECT_EQ(m.params[0].group, "float32@cpu");
  EXPECT_EQ(m.order, (std::vector<size_t>{3, 2, 1, 0}));
  ASSERT_EQ(m.ranks.size(), 2u);
  const replay::DdpRankProfile& r = m.ranks[1];
  EXPECT_EQ(r.forwardNs, 100);
  EXPECT_EQ(r.toBackwardNs, 10);
  EXPECT_EQ(r.backwardComputeNs, 450);
  EXPECT_EQ(r.optimizerNs, 50);
  EXPECT_EQ(r.gradReadyNs, (std::vector<int64_t>{400, 300, 200, 100}));
  // The last arrival's wire time: 100 ns for 1000 bytes at 2 ranks is 0.1 ns per byte sent.
  EXPECT_NEAR(m.link.nsPerByte, 0.1, 1e-9);
  EXPECT_NEAR(m.copyNsPerByte, 0.05, 1e-9);
}

TEST(WhatIf, ReplaysTheRecordedStepAndAnswersWithTheWorkedOutNumbers) {
  fx::TempDir dir;
  writeJob(dir);
  model::TraceStore store;
  model::loadTraces(store, {dir.path()});
  WhatIfQuestions q;
  q.bucketCapMb = {4000.0 / (1024 * 1024)};  // one bucket of all four: 1210 (replay_test)
  q.gradientAsBucketView = true;             // no copy back: 710
  const WhatIfReport report = whatIf(store, q);
  EXPECT_EQ(report.baseline.stepNs, 810);
  EXPECT_NEAR(report.baselineErrorShare, 0, 1e-9);
  ASSERT_EQ(report.rows.size(), 4u);  // the cap, the view, the two bounds
  EXPECT_EQ(report.rows[0].predictedStepNs, 1210);
  EXPECT_EQ(report.rows[1].change.label, "gradient_as_bucket_view=True");
  EXPECT_EQ(report.rows[1].predictedStepNs, 710);
  EXPECT_EQ(report.bestPlanRow, 1);
  EXPECT_EQ(report.rows[2].change.label, "communication free");
  EXPECT_EQ(report.rows[3].predictedStepNs, 400);  // compute free: the four allreduces

  const std::string text = formatWhatIf(report, dir.path());
  EXPECT_NE(text.find("fastest plan: gradient_as_bucket_view=True"), std::string::npos) << text;
  const std::string json = whatIfJson(report);
  EXPECT_NE(json.find("\"recorded_step_ns\":810"), std::string::npos) << json;
  EXPECT_NE(json.find("\"best_plan\":\"gradient_as_bucket_view=True\""), std::string::npos);
}

// A cap asked of torch's DDP makes its first bucket that size too (torch's _BucketConfig: 1 MB
// only for the default cap), where ringx.ddp keeps the first at most 1 MB (limitsForCap): a
// ringx trace of torch's DDP names its engine on the plan, and the change asked follows it.
// (Read as ringx.ddp's, a 100 MB cap on a 16 MB model had been predicted as two buckets where
// torch ran one, on hosts joined by a 1 Gbit/s link.)
TEST(WhatIf, ACapAskedOfTorchsDdpMakesItsFirstBucketThatSize) {
  for (const char* engine : {"torch.ddp", ""}) {
    SCOPED_TRACE(engine);
    fx::TempDir dir;
    fx::DdpJobOptions o;
    o.engine = engine;
    fx::writeDdpJob(dir, o);
    model::TraceStore store;
    model::loadTraces(store, {dir.path()});
    WhatIfQuestions q;
    q.bucketCapMb = {100};
    q.bounds = false;
    const WhatIfReport report = whatIf(store, q);
    const bool torch = std::string(engine) == "torch.ddp";
    EXPECT_EQ(report.source.torchDdp, torch);
    ASSERT_EQ(report.rows.size(), 1u);
    const replay::DdpWhatIf& c = report.rows[0].change;
    EXPECT_EQ(c.bucketCapBytes, int64_t{100} << 20);
    if (torch) {
      EXPECT_EQ(c.firstBucketBytes, int64_t{100} << 20);
    } else {
      EXPECT_FALSE(c.firstBucketBytes.has_value());  // limitsForCap's 1 MB
    }
  }
}

TEST(WhatIf, ATraceWithoutWhatTheModelNeedsSaysWhat) {
  for (int variant = 0; variant < 2; ++variant) {
    fx::TempDir dir;
    writeJob(dir, /*withGrads=*/variant == 1, /*withPlan=*/variant == 0);
    model::TraceStore store;
    model::loadTraces(store, {dir.path()});
    try {
      ddpModelOf(store);
      FAIL() << "a model was built without " << (variant ? "a plan" : "gradient readiness");
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(variant ? "bucket_plan" : "gradient readiness"),
                std::string::npos)
          << e.what();
    }
  }
  model::TraceStore empty;
  EXPECT_THROW(ddpModelOf(empty), std::runtime_error);
}

TEST(WhatIf, AHostsCpuQuotaIsTheCoresItsThreadsShare) {
  // What ringx.trace records of a host: the cores its affinity allows, and, in a cgroup with
  // a CFS quota (a container's --cpus), the quota in cores, which its threads split.
  const auto hostOf = [](double rank0Quota, double rank1Quota) {
    fx::TempDir dir;
    const double quotas[2] = {rank0Quota, rank1Quota};
    for (int rank = 0; rank < 2; ++rank) {
      fx::RankStream s(rank, 2);
      std::vector<fx::TestArg> args = {{"cores", 2}, {"compute_threads", rank + 1}};
      if (quotas[rank] > 0) args.emplace_back("cpu_quota", quotas[rank]);
      s.instant(Category::kUser, "host", "host", 100, args);
      s.writeTo(dir.file("rank-" + std::to_string(rank) + ".ringx"));
    }
    model::TraceStore store;
    model::loadTraces(store, {dir.path()});
    return hostCoresOf(store);
  };
  const replay::HostCores unlimited = hostOf(0, 0);
  EXPECT_EQ(unlimited.cores, 2);
  EXPECT_EQ(unlimited.threadsPerRank, 2);
  // The fewest any rank may use: rank 1's 0.4 of a core.
  EXPECT_DOUBLE_EQ(hostOf(0, 0.4).cores, 0.4);
  EXPECT_DOUBLE_EQ(hostOf(1.5, 0.75).cores, 0.75);
  // A quota above the affinity's cores changes nothing.
  EXPECT_EQ(hostOf(3, 0).cores, 2);
}

}  // namespace
}  // namespace ringx::analysis
