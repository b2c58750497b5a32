// torch DDP recovered from CPU profiler traces (analysis/profiler_ddp.h): hand-made Kineto files
// of a two-rank gloo job whose buckets, gradients, wire and copies are known by construction,
// and the what-if report built from them (analysis/whatif.h). tests/python/
// test_profiler_whatif.py checks the same recovery on real torch DDP jobs against the Reducer's
// own buckets.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "analysis/advise.h"
#include "analysis/profiler_ddp.h"
#include "analysis/profiler_program.h"
#include "analysis/profiler_whatif.h"
#include "analysis/summary.h"
#include "analysis/trace_analyses.h"
#include "analysis/whatif.h"
#include "base/error.h"
#include "base/text.h"
#include "tests/cpp/profiled_ddp_trace.h"
#include "trace/model/chrome_ingest.h"

namespace ringx::analysis {
// Named, not anonymous: the tests are built as one unity source with the other analyses'.
namespace profiled_ddp_test {

using testing::CpuRank;
using testing::GpuRank;
using testing::kBias;
using testing::kBucket;
using testing::kWeight;
using testing::profiledDdpJob;
using testing::profiledGpuDdpJob;
using testing::storeOf;

int64_t us(int64_t n) { return n * 1000; }

TEST(ProfiledDdp, BucketsGradientsWireAndCopiesComeFromTheReducersOps) {
  const model::TraceStore store = storeOf(profiledDdpJob());
  EXPECT_FALSE(holdsProfilerTrace(store));  // no GPU: not a device program
  ASSERT_TRUE(holdsProfiledTorchDdp(store));
  EXPECT_EQ(whatIfEngine(store), "ddp");
  const ProfiledDdp p = profiledTorchDdp(store);
  const replay::DdpRecording& rec = p.recording;
  EXPECT_EQ(p.wire, "gloo");
  EXPECT_EQ(rec.worldSize, 2);
  EXPECT_EQ(p.firstStep, 1);
  EXPECT_EQ(p.bucketBytes, (std::vector<int64_t>{kBucket * 4, kBucket * 4}));
  // Parameters in reverse readiness order: w0, bias0, w1, bias1.
  ASSERT_EQ(rec.params.size(), 4u);
  EXPECT_EQ(rec.params[0].bytes, kWeight * 4);
  EXPECT_EQ(rec.params[3].bytes, kBias * 4);
  EXPECT_EQ(rec.params[0].group, "float");
  // The roundest cap whose plan is these buckets: a quarter MiB (a layer is 257 KiB).
  EXPECT_EQ(rec.limits.bucketBytes, 256 * 1024);
  EXPECT_FALSE(rec.gradientAsBucketView);
  ASSERT_EQ(rec.ranks.size(), 2u);
  ASSERT_EQ(rec.ranks[1].steps.size(), 3u);
  const replay::DdpStepRecord& s = rec.ranks[1].steps[1];  // step 2 of rank 1
  const int64_t t = 1'000'000 + 9000 + 5;
  EXPECT_EQ(s.step, 2);
  EXPECT_EQ(s.forwardBeginNs, us(t + 100));
  EXPECT_EQ(s.forwardEndNs, us(t + 2100));
  EXPECT_EQ(s.backwardBeginNs, us(t + 2200));
  EXPECT_EQ(s.computeEndNs, us(t + 4700));
  EXPECT_EQ(s.finalizeEndNs, us(t + 5900));
  EXPECT_EQ(s.optimizerNs, us(9000 + 100 - 5900));  // to the next step's forward
  ASSERT_EQ(s.grads.size(), 4u);
  EXPECT_EQ(s.grads[0], (std::pair<size_t, int64_t>{3, us(t + 2340)}));
  EXPECT_EQ(s.grads[3], (std::pair<size_t, int64_t>{0, us(t + 4600)}));
  ASSERT_EQ(s.buckets.size(), 2u);
  EXPECT_EQ(s.buckets[0].launchNs, us(t + 3400));
  EXPECT_EQ(s.buckets[0].wireNs, us(1000));
  EXPECT_EQ(s.buckets[1].wireEndNs, us(t + 5660));
  EXPECT_EQ(s.buckets[0].copyBackNs, us(100));
  EXPECT_EQ(s.buckets[1].copyBackNs, us(100));
}

TEST(ProfiledDdp, TheSummaryAndTheAdviceSeeTheBuckets) {
  const model::TraceStore store = storeOf(profiledDdpJob());
  const DdpAnalysis d = analyzeDdp(store);
  EXPECT_EQ(d.iterationCount, 6u);  // three steps of two ranks
  EXPECT_EQ(d.forwardMeanNs, us(2000));
  EXPECT_EQ(d.backwardMeanNs, us(4700 - 2200));
  // Bucket 1's wire ends at t+5660, 960 us past backward's last node: the step's exposed time.
  EXPECT_EQ(d.exposedMeanNs, us(960));
  ASSERT_EQ(d.buckets.size(), 2u);
  for (const DdpBucketAverage& b : d.buckets) {
    EXPECT_EQ(b.samples, 6u);
    EXPECT_EQ(b.bytes, kBucket * 4);
    EXPECT_EQ(b.params, 2);
    EXPECT_EQ(b.wireMeanNs, us(1000));
  }
  EXPECT_EQ(d.buckets[0].launchDelayMeanNs, us(3400 - 3340));  // its last gradient to its launch
  EXPECT_EQ(d.buckets[1].launchDelayMeanNs, us(4620 - 4600));
  EXPECT_EQ(d.buckets[0].exposedMeanNs, 0);  // done 240 us before backward's end
  EXPECT_EQ(d.buckets[1].exposedMeanNs, us(960));

  const Summary s = summarize(store, "job");
  EXPECT_EQ(s.ddp.iterationCount, 6u);
  const Advice a = advise(store, s);
  EXPECT_EQ(a.engine, "ddp");
  bool exposed = false;
  for (const Finding& finding : a.findings) exposed |= finding.kind == "exposed-communication";
  EXPECT_TRUE(exposed);
}

TEST(ProfiledDdp, TheBackendsScopesAreTheCollectivesMatchedAcrossRanks) {
  for (bool gloo : {true, false}) {
    const model::TraceStore store = storeOf(profiledDdpJob(true, gloo));
    const std::vector<CollectiveRow> rows = matchCollectives(store);
    ASSERT_EQ(rows.size(), 6u) << gloo;  // two buckets in each of three steps
    for (const CollectiveRow& row : rows) {
      EXPECT_EQ(row.op, "allreduce");
      EXPECT_EQ(row.group, gloo ? "gloo" : "ringx");
      EXPECT_EQ(row.ranks.size(), 2u);
      EXPECT_EQ(row.groupSize, 2);
      // gloo's scope has the dims; ringx's takes the issuing c10d op's.
      EXPECT_EQ(row.bytes, kBucket * 4);
    }
    // And DDP's wire is read from them.
    EXPECT_EQ(profiledTorchDdp(store).wire, gloo ? "gloo" : "ringx");
  }
}

// FSDP's collectives as a CPU job's profiler files hold them, counted as nccl-tests counts
// bytes (an all-gather's output, anything else's input): gloo's scope has its input's dims; a
// ringx scope has none, and the c10d op that issued it names its output first.
TEST(ProfiledDdp, ABackendScopesBytesAreTheCollectivesAsNcclTestsCountThem) {
  const int64_t shard = 32896, full = 2 * shard;
  std::vector<CpuRank> ranks;
  for (int r = 0; r < 2; ++r) {
    CpuRank& k = ranks.emplace_back(r);
    const int64_t t = 1'000'000;
    k.op("user_annotation", "ProfilerStep#1", 1, t, 9000);
    k.op("cpu_op", "c10d::_allgather_base_", 1, t + 100, 50,
         strCat("[[", full, "], [", shard, "], []]"));
    k.op("user_annotation", "gloo:all_gather", 2, t + 120, 400, strCat("[[", shard, "]]"));
    k.op("cpu_op", "c10d::_allgather_base_", 1, t + 1000, 50,
         strCat("[[", full, "], [", shard, "], []]"));
    k.op("user_annotation", "ringx:_all_gather_base", 1, t + 1010, 30);
    k.op("cpu_op", "c10d::_reduce_scatter_base_", 1, t + 2000, 50,
         strCat("[[", shard, "], [", full, "], []]"));
    k.op("user_annotation", "ringx:_reduce_scatter_base", 1, t + 2010, 30);
  }
  const model::TraceStore store = storeOf(ranks);
  std::map<std::string, int64_t> bytes;  // group/op -> bytes
  for (const CollectiveRow& row : matchCollectives(store)) {
    EXPECT_EQ(row.ranks.size(), 2u);
    bytes[row.group + "/" + row.op] = row.bytes;
  }
  EXPECT_EQ(bytes, (std::map<std::string, int64_t>{{"gloo/allgather", full * 4},
                                                   {"ringx/allgather", full * 4},
                                                   {"ringx/reduce_scatter", full * 4}}));
}

TEST(ProfiledDdp, TheWhatIfReplaysTheRecordedStepAndAsksTorchsCaps) {
  const model::TraceStore store = storeOf(profiledDdpJob());
  WhatIfQuestions q;
  q.bucketCapMb = {25};
  q.bounds = false;
  const WhatIfReport r = whatIf(store, q);
  EXPECT_EQ(r.source.profiledWire, "gloo");
  EXPECT_EQ(r.source.recordedStepNs, us(9000));
  EXPECT_LT(std::abs(r.baselineErrorShare), 0.05) << r.baselineErrorShare;
  ASSERT_EQ(r.rows.size(), 1u);
  // torch's DDP given bucket_cap_mb=25 makes one bucket of both layers (its first bucket is
  // the cap too), launched at the last gradient: its wire after backward, longer than the
  // second bucket's was.
  EXPECT_EQ(r.rows[0].replay.buckets.size(), 1u);
  EXPECT_GT(r.rows[0].predictedStepNs, r.source.recordedStepNs);
  const std::string text = formatWhatIf(r, "job");
  EXPECT_NE(text.find("torch DDP recovered from torch.profiler traces"), std::string::npos);
  EXPECT_NE(whatIfJson(r).find("\"source\":\"profiler\""), std::string::npos);
}

TEST(ProfiledDdp, ALateWireMakesTheSlowRanksBucketTheLongOne) {
  // Rank 0's first bucket took 3 ms on its wire, rank 1's 1 ms: the fit takes the shortest
  // (the last to arrive waited least), so the wire is 1 ms whichever rank ran long.
  std::vector<CpuRank> ranks;
  for (int r = 0; r < 2; ++r) {
    CpuRank& k = ranks.emplace_back(r);
    for (int n = 1; n <= 3; ++n) k.step(n, 1'000'000 + (n - 1) * 9000, r == 0 ? 3000 : 1000);
  }
  const model::TraceStore store = storeOf(ranks);
  const ProfiledDdp p = profiledTorchDdp(store);
  EXPECT_EQ(p.recording.ranks[0].steps[0].buckets[0].wireNs, us(3000));
  EXPECT_EQ(p.recording.ranks[1].steps[0].buckets[0].wireNs, us(1000));
}

TEST(ProfiledDdp, WithoutRecordShapesSaysWhatToTurnOn) {
  const model::TraceStore store = storeOf(profiledDdpJob(/*shapes=*/false));
  try {
    profiledTorchDdp(store);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("record_shapes=True"), std::string::npos) << e.what();
  }
  // The summary has no DDP section and says why.
  const Summary s = summarize(store, "job");
  EXPECT_EQ(s.ddp.iterationCount, 0u);
  bool said = false;
  for (const std::string& w : s.warnings) {
    said |= w.find("torch DDP's buckets not recovered") != std::string::npos &&
            w.find("record_shapes=True") != std::string::npos;
  }
  EXPECT_TRUE(said);
}

// ---- a GPU job: the same step on the device (profiled_ddp_trace.h's GpuRank) ----

TEST(ProfiledGpuDdp, TheRecordingIsTheComputeStreamsAndTheNcclKernels) {
  const model::TraceStore store = storeOf(profiledGpuDdpJob());
  ASSERT_TRUE(holdsProfilerTrace(store));
  EXPECT_EQ(whatIfEngine(store), "profiler");  // the program, with DDP's buckets in it
  const ProfiledDdp p = profiledTorchDdp(store);
  EXPECT_TRUE(p.device);
  EXPECT_EQ(p.wire, "nccl");
  EXPECT_EQ(p.bucketBytes, (std::vector<int64_t>{kBucket * 4, kBucket * 4}));
  EXPECT_EQ(p.recording.limits.bucketBytes, 256 * 1024);
  EXPECT_FALSE(p.recording.gradientAsBucketView);
  ASSERT_EQ(p.recording.ranks.size(), 2u);
  ASSERT_EQ(p.recording.ranks[1].steps.size(), 3u);
  const replay::DdpStepRecord& s = p.recording.ranks[1].steps[1];  // step 2 of rank 1
  const int64_t d = 1'000'000 + 9000 + 5 + 400;                    // its device's step begin
  EXPECT_EQ(s.forwardBeginNs, us(d + 200));  // forward's first kernel, not its host scope
  EXPECT_EQ(s.forwardEndNs, us(d + 2200));
  EXPECT_EQ(s.backwardBeginNs, us(d + 2200));
  EXPECT_EQ(s.computeEndNs, us(d + 4600));
  ASSERT_EQ(s.grads.size(), 4u);
  // Each gradient when its node's kernels, the Reducer's copy into the bucket included, ended.
  EXPECT_EQ(s.grads[0], (std::pair<size_t, int64_t>{3, us(d + 2340)}));
  EXPECT_EQ(s.grads[1], (std::pair<size_t, int64_t>{2, us(d + 3340)}));
  EXPECT_EQ(s.grads[3], (std::pair<size_t, int64_t>{0, us(d + 4600)}));
  ASSERT_EQ(s.buckets.size(), 2u);
  // A bucket is launched where the compute stream stood at its c10d call.
  EXPECT_EQ(s.buckets[0].launchNs, us(d + 3340));
  EXPECT_EQ(s.buckets[1].launchNs, us(d + 4600));
  EXPECT_EQ(s.buckets[0].wireNs, us(1000));  // rank 1 arrived last: its kernel is the wire
  EXPECT_EQ(s.buckets[1].wireEndNs, us(d + 5600));
  EXPECT_EQ(s.buckets[0].copyBackNs, us(100));
  EXPECT_EQ(s.buckets[1].copyBackNs, us(100));
  EXPECT_EQ(s.finalizeEndNs, us(d + 5700));
  EXPECT_EQ(s.optimizerNs, us(9000 + 200 - 5700));  // to the next step's first kernel
  // Rank 0 arrived first: its kernels waited 5 us for rank 1's.
  EXPECT_EQ(p.recording.ranks[0].steps[1].buckets[0].wireNs, us(1005));
}

// The caps asked of a GPU profile, the report checked for what every such replay must give:
// the recorded step (`recordedUs`) replayed, and the recorded plan rewritten with the fitted
// wire replaying it too (the reference the plans are scaled by).
ProfilerWhatIfReport replanned(const model::TraceStore& store, std::vector<double> caps,
                               int64_t recordedUs) {
  WhatIfQuestions q;
  q.bucketCapMb = std::move(caps);
  q.bounds = false;
  ProfilerWhatIfReport r = profilerWhatIf(store, q);
  EXPECT_TRUE(r.ddp.has_value());
  EXPECT_EQ(r.source.recordedStepNs, us(recordedUs));
  EXPECT_LT(std::abs(r.baselineErrorShare), 0.01) << r.baselineErrorShare;
  EXPECT_NEAR(static_cast<double>(r.ddpReferenceNs), static_cast<double>(r.baseline.stepNs),
              static_cast<double>(us(20)));
  return r;
}

TEST(ProfiledGpuDdp, TheBucketCapsAreReplannedInTheProgramWhereTheHostSetsTheStep) {
  // The host's loop takes 9 ms a step; the device's work ends at d+6700: a bucket plan that
  // moves the allreduces out from under backward lengthens the device's work, not the step.
  const model::TraceStore store = storeOf(profiledGpuDdpJob());
  const ProfilerWhatIfReport r = replanned(store, {25}, 9000);
  ASSERT_TRUE(r.ddp.has_value());
  ASSERT_GE(r.rows.size(), 1u);
  const ProfilerWhatIfRow& cap = r.rows[0];
  ASSERT_TRUE(cap.error.empty()) << cap.error;
  EXPECT_EQ(cap.replay.buckets, 1u);
  EXPECT_EQ(cap.predictedStepNs, r.source.recordedStepNs);
  // The one bucket's allreduce (2 ms) runs after the last gradient, on the device.
  const std::string text = formatProfilerWhatIf(r, "job");
  EXPECT_NE(text.find("torch DDP recovered from the trace: 2 buckets of 4 gradients"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("bucket_cap_mb=25 (1 bucket)"), std::string::npos) << text;
  EXPECT_NE(profilerWhatIfJson(r).find("\"buckets\":1"), std::string::npos);

  // advise: the caps among the changes, the program's findings beside them.
  const Advice a = advise(store, summarize(store, "job"));
  EXPECT_EQ(a.engine, "profiler");
  EXPECT_TRUE(a.whatIfError.empty()) << a.whatIfError;
  bool caps = false;
  for (const AdvisedChange& c : a.changes) caps |= c.label.find("bucket_cap_mb") == 0;
  EXPECT_TRUE(caps);
  // The summary's DDP section, on the device's times.
  const DdpAnalysis ddp = analyzeDdp(store);
  EXPECT_EQ(ddp.iterationCount, 6u);
  EXPECT_EQ(ddp.forwardMeanNs, us(2000));
}

TEST(ProfiledGpuDdp, WhereTheDeviceSetsTheStepOneBucketAfterBackwardLengthensIt) {
  // Each step's host waits for the device: one bucket's 2 ms allreduce after the last gradient
  // (d+4600 -> 6600, its copies to 6800) puts the optimizer's kernels 1.1 ms later than the
  // recorded plan's (bucket 1 ended at 5600, its copies at 5700).
  const model::TraceStore store = storeOf(profiledGpuDdpJob(true, /*sync=*/true));
  const ProfilerWhatIfReport r = replanned(store, {25, 0.125}, 7110);
  ASSERT_EQ(r.rows.size(), 2u);
  const ProfilerWhatIfRow& small = r.rows[0];  // 0.125: the recorded two buckets again
  const ProfilerWhatIfRow& one = r.rows[1];
  ASSERT_TRUE(one.error.empty()) << one.error;
  EXPECT_EQ(one.replay.buckets, 1u);
  EXPECT_NEAR(static_cast<double>(one.predictedStepNs), static_cast<double>(us(7110 + 1100)),
              static_cast<double>(us(60)))
      << formatProfilerWhatIf(r, "job");
  EXPECT_EQ(small.replay.buckets, 2u);
  EXPECT_NEAR(static_cast<double>(small.predictedStepNs), static_cast<double>(us(7110)),
              static_cast<double>(us(20)));
}

TEST(ProfiledGpuDdp, WithoutShapesTheProgramReplaysAndSaysWhyNoBuckets) {
  const model::TraceStore store = storeOf(profiledGpuDdpJob(/*shapes=*/false));
  EXPECT_EQ(whatIfEngine(store), "profiler");
  const ProfilerWhatIfReport r = profilerWhatIf(store, {});
  const std::string text = formatProfilerWhatIf(r, "job");
  EXPECT_NE(text.find("note: torch DDP's buckets not recovered"), std::string::npos) << text;
  EXPECT_NE(text.find("record_shapes=True"), std::string::npos) << text;
  EXPECT_NE(profilerWhatIfJson(r).find("\"notes\":[\"torch DDP"), std::string::npos);
  WhatIfQuestions q;
  q.bucketCapMb = {25};
  try {
    profilerWhatIf(store, q);
    FAIL() << "expected a refusal";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("record_shapes=True"), std::string::npos) << e.what();
  }
}

}  // namespace profiled_ddp_test
}  // namespace ringx::analysis
