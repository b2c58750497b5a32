// The DDP engine's torch-free parts: bucket assignment (reverse order, 1 MiB first
// bucket, cap, one dtype/device per bucket, rebuild order) and its trace events.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>

#include "analysis/replay/bucket_plan.h"
#include "ddp/timing.h"
#include "tests/cpp/recorded_file.h"

namespace ringx::ddp {
namespace {

using namespace replay;

constexpr int64_t kMiB = 1 << 20;

std::vector<ParamLayout> floats(std::vector<int64_t> bytes) {
  std::vector<ParamLayout> out;
  for (int64_t b : bytes) out.push_back({b, "float32@cpu"});
  return out;
}

TEST(BucketPlan, ReverseOrderSmallFirstBucketThenCap) {
  // Six 600 KiB parameters: the first bucket closes at >= 1 MiB (2 params), the
  // next ones at >= 2 MiB (4 params), walking from the last parameter.
  auto params = floats({600 << 10, 600 << 10, 600 << 10, 600 << 10, 600 << 10, 600 << 10});
  auto buckets = assignBuckets(params, reverseOrder(params.size()), {1 * kMiB, 2 * kMiB});
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].params, (std::vector<size_t>{5, 4}));
  EXPECT_EQ(buckets[1].params, (std::vector<size_t>{3, 2, 1, 0}));
  EXPECT_EQ(buckets[0].bytes, 2 * (600 << 10));
}

TEST(BucketPlan, DtypesAndDevicesNeverShareABucket) {
  std::vector<ParamLayout> params = {
      {100, "float32@cpu"}, {100, "float64@cpu"}, {100, "float32@cpu"}, {100, "float32@cuda:0"}};
  auto buckets = assignBuckets(params, reverseOrder(4), {1 * kMiB, 2 * kMiB});
  ASSERT_EQ(buckets.size(), 3u);
  std::set<std::string> groups;
  for (const auto& b : buckets) {
    groups.insert(b.group);
    for (size_t p : b.params) EXPECT_EQ(params[p].group, b.group);
  }
  EXPECT_EQ(groups.size(), 3u);
  // Ordered by their first parameter in the walk: cuda (3), then float32 (2, 0), float64 (1).
  EXPECT_EQ(buckets[0].params, (std::vector<size_t>{3}));
  EXPECT_EQ(buckets[1].params, (std::vector<size_t>{2, 0}));
  EXPECT_EQ(buckets[2].params, (std::vector<size_t>{1}));
}

TEST(BucketPlan, EveryParameterLandsInExactlyOneBucket) {
  std::vector<int64_t> sizes;
  for (int i = 0; i < 50; ++i) sizes.push_back((i * 7919) % 300000 + 4);
  auto params = floats(sizes);
  auto buckets = assignBuckets(params, reverseOrder(params.size()), {256 << 10, 512 << 10});
  std::multiset<size_t> seen;
  for (const auto& b : buckets) {
    int64_t bytes = 0;
    for (size_t p : b.params) {
      seen.insert(p);
      bytes += params[p].bytes;
    }
    EXPECT_EQ(bytes, b.bytes);
  }
  EXPECT_EQ(seen.size(), params.size());
  EXPECT_EQ(std::set<size_t>(seen.begin(), seen.end()).size(), params.size());
}

TEST(BucketPlan, RebuildOrderPutsReadyParametersFirstAndKeepsTheRest) {
  EXPECT_EQ(completeOrder({2, 0, 2, 9}, 4), (std::vector<size_t>{2, 0, 3, 1}));
  auto params = floats({100, 100, 100, 100});
  auto buckets = assignBuckets(params, {1, 0, 3, 2}, {200, 200});
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].params, (std::vector<size_t>{1, 0}));
}

TEST(BucketPlan, AnOrderThatIsNotAPermutationIsRejected) {
  auto params = floats({100, 100, 100});
  EXPECT_THROW(assignBuckets(params, {0, 1}, {}), std::invalid_argument);
  EXPECT_THROW(assignBuckets(params, {0, 1, 1}, {}), std::invalid_argument);
  EXPECT_THROW(assignBuckets(params, {0, 1, 7}, {}), std::invalid_argument);
}

TEST(DdpTiming, AnIterationBecomesPhaseSpansOneSpanPerBucketAndGradientInstants) {
  testing::RecordedFile recorded;

  IterationTiming it;
  it.iteration = 3;
  it.previousFinalizeEndNs = 100;
  it.forwardBeginNs = 200;
  it.forwardEndNs = 300;
  it.backwardBeginNs = 350;
  it.backwardEndNs = 700;
  it.finalizeEndNs = 900;
  for (size_t b = 0; b < 2; ++b) {
    BucketTiming t;
    t.index = b;
    t.bytes = 4096 * (b + 1);
    t.params = 2;
    t.firstGradNs = 400 + 100 * b;
    t.readyNs = t.firstGradNs + 10;
    t.launchNs = t.readyNs + 5;
    t.wireStartNs = t.launchNs + 5;
    t.wireEndNs = t.wireStartNs + 300;
    t.doneNs = t.wireEndNs + 1;
    t.copyBackBeginNs = 850;
    t.copyBackEndNs = 860 + b;
    t.exposedNs = t.doneNs > 700 ? t.doneNs - 700 : 0;
    t.seq = 10 + b;
    it.buckets.push_back(t);
  }
  // Gradient readiness of a sampled step: parameter 2 (bucket 0) then 0 (bucket 1).
  it.grads = {{2, 0, 410}, {0, 1, 505}};
  const std::vector<ParamFacts> facts = {
      {64, "float32@cpu"}, {8, "float32@cpu"}, {128, "bfloat16@cpu"}};
  recordIteration(it, facts);
  PlanRecord plan;
  plan.step = 4;
  plan.bucketCapBytes = 4 << 20;
  plan.firstBucketBytes = 1 << 20;
  plan.gradientAsBucketView = true;
  plan.worldSize = 3;
  plan.buckets = 2;
  plan.reason = "chosen";
  recordBucketPlan(plan);
  const trace::RankTrace t = recorded.finish();
  std::map<std::string, const trace::Event*> byName;
  std::vector<const trace::Event*> buckets, grads;
  for (const trace::Event& e : t.events) {
    if (e.category != trace::Category::kDdp) continue;
    if (t.str(e.name) == "bucket") {
      buckets.push_back(&e);
    } else if (t.str(e.name) == "grad") {
      grads.push_back(&e);
    } else {
      byName[std::string(t.str(e.name))] = &e;
      EXPECT_EQ(t.str(e.track), "ddp");
    }
  }
  ASSERT_EQ(byName.count("optimizer"), 1u);
  EXPECT_EQ(byName["optimizer"]->beginNs, 100);
  EXPECT_EQ(byName["optimizer"]->endNs, 200);
  EXPECT_EQ(byName["forward"]->endNs, 300);
  EXPECT_EQ(byName["backward"]->beginNs, 350);
  EXPECT_EQ(byName["backward"]->endNs, 900);
  EXPECT_EQ(t.findArg(*byName["backward"], "compute_end_ns")->intValue, 700);
  ASSERT_EQ(grads.size(), 2u);
  EXPECT_EQ(grads[0]->kind, trace::EventKind::kInstant);
  EXPECT_EQ(grads[0]->beginNs, 410);
  EXPECT_EQ(t.str(grads[0]->track), "ddp:bucket0");
  EXPECT_EQ(t.findArg(*grads[0], "param")->intValue, 2);
  EXPECT_EQ(t.findArg(*grads[0], "bytes")->intValue, 128);
  EXPECT_EQ(t.str(t.findArg(*grads[0], "param_group")->stringId), "bfloat16@cpu");
  EXPECT_EQ(t.str(grads[1]->track), "ddp:bucket1");
  EXPECT_EQ(t.findArg(*grads[1], "bytes")->intValue, 64);
  ASSERT_EQ(byName.count("bucket_plan"), 1u);
  const trace::Event& planEvent = *byName["bucket_plan"];
  EXPECT_EQ(t.findArg(planEvent, "bucket_cap_bytes")->intValue, 4 << 20);
  EXPECT_EQ(t.findArg(planEvent, "first_bucket_bytes")->intValue, 1 << 20);
  EXPECT_EQ(t.findArg(planEvent, "gradient_as_bucket_view")->intValue, 1);
  EXPECT_EQ(t.findArg(planEvent, "group_size")->intValue, 3);
  EXPECT_EQ(t.str(t.findArg(planEvent, "reason")->stringId), "chosen");
  ASSERT_EQ(buckets.size(), 2u);
  for (size_t b = 0; b < 2; ++b) {
    const trace::Event& e = *buckets[b];
    EXPECT_EQ(t.str(e.track), "ddp:bucket" + std::to_string(b));
    EXPECT_EQ(e.beginNs, it.buckets[b].firstGradNs);
    EXPECT_EQ(e.endNs, it.buckets[b].copyBackEndNs);
    EXPECT_EQ(t.findArg(e, "bucket")->intValue, static_cast<int64_t>(b));
    EXPECT_EQ(t.findArg(e, "bytes")->intValue, it.buckets[b].bytes);
    EXPECT_EQ(t.findArg(e, "wire_start_ns")->intValue, it.buckets[b].wireStartNs);
    EXPECT_EQ(t.findArg(e, "wire_end_ns")->intValue, it.buckets[b].wireEndNs);
    EXPECT_EQ(t.findArg(e, "exposed_ns")->intValue, it.buckets[b].exposedNs);
    EXPECT_EQ(t.findArg(e, "seq")->intValue, it.buckets[b].seq);
    EXPECT_EQ(t.findArg(e, "step")->intValue, 3);
  }
}

}  // namespace
}  // namespace ringx::ddp
