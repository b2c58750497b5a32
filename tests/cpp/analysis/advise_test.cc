// The advisor (analysis/advise.h): traces built to have each finding say it, with its figures;
// traces built without one say nothing of it; the changes come ranked.
#include "analysis/advise.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/cpp/analysis/ddp_job.h"
#include "tests/cpp/trace/fsdp_job.h"
#include "trace/model/loader.h"

namespace ringx::analysis {
namespace {

namespace fx = ringx::trace::fixture;

Advice adviceOf(const fx::TempDir& dir) {
  model::TraceStore store;
  model::loadTraces(store, {dir.path()});
  return advise(store, summarize(store, dir.path()));
}

const Finding* find(const Advice& a, const std::string& kind) {
  for (const Finding& f : a.findings) {
    if (f.kind == kind) return &f;
  }
  return nullptr;
}

TEST(Advise, ADdpJobWithAStragglerALateBucketAndExposedCommunication) {
  fx::TempDir dir;
  fx::DdpJobOptions o;
  o.engineTimes = true;
  o.lateLaunch = 100;  // 12% of the 810 ns step
  o.rank1Late = 30;    // rank 1 begins every allreduce last
  fx::writeDdpJob(dir, o);
  const Advice a = adviceOf(dir);
  EXPECT_EQ(a.engine, "ddp");
  EXPECT_EQ(a.recordedStepNs, 810);
  ASSERT_TRUE(a.whatIfError.empty()) << a.whatIfError;

  const Finding* straggler = find(a, "straggler");
  ASSERT_NE(straggler, nullptr);
  EXPECT_NE(straggler->what.find("rank 1 arrives last"), std::string::npos) << straggler->what;
  EXPECT_NE(straggler->evidence.find("last at 28 of 28"), std::string::npos) << straggler->evidence;
  EXPECT_NE(straggler->evidence.find("30 ns after the first rank"), std::string::npos)
      << straggler->evidence;

  const Finding* exposed = find(a, "exposed-communication");
  ASSERT_NE(exposed, nullptr);
  EXPECT_NE(exposed->what.find("12.3%"), std::string::npos) << exposed->what;  // 100 of 810
  EXPECT_FALSE(exposed->change.empty());

  const Finding* late = find(a, "late-launch");
  ASSERT_NE(late, nullptr);
  EXPECT_NE(late->what.find("bucket 2"), std::string::npos) << late->what;
  EXPECT_NE(late->evidence.find("100 ns later"), std::string::npos) << late->evidence;
  EXPECT_EQ(find(a, "no-prefetch"), nullptr);  // not an FSDP job

  // Every bucket cap of the ladder and the view, once each, fastest first.
  ASSERT_GE(a.changes.size(), 10u);
  for (size_t i = 1; i < a.changes.size(); ++i) {
    EXPECT_LE(a.changes[i - 1].changeShare, a.changes[i].changeShare);
  }
  bool view = false, cap100 = false;
  for (const AdvisedChange& c : a.changes) {
    view |= c.label == "gradient_as_bucket_view=True";
    cap100 |= c.label == "bucket_cap_mb=100";
    EXPECT_LE(c.lowNs, c.predictedStepNs) << c.label;
    EXPECT_GE(c.highNs, c.predictedStepNs) << c.label;
  }
  EXPECT_TRUE(view && cap100);

  const std::string text = formatAdvice(a, "job");
  EXPECT_NE(text.find("rank 1 arrives last"), std::string::npos) << text;
  EXPECT_NE(text.find("changes, fastest predicted first"), std::string::npos) << text;
  const std::string json = adviceJson(a);
  EXPECT_NE(json.find("\"kind\":\"late-launch\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"within_noise\":"), std::string::npos) << json;
}

TEST(Advise, AJobWithoutThemSaysNoneOfThoseFindings) {
  fx::TempDir dir;
  fx::DdpJobOptions o;
  o.engineTimes = true;  // rank 0 and 1 begin together, buckets launch when ready
  fx::writeDdpJob(dir, o);
  const Advice a = adviceOf(dir);
  EXPECT_EQ(find(a, "straggler"), nullptr);
  EXPECT_EQ(find(a, "late-launch"), nullptr);
  EXPECT_NE(find(a, "exposed-communication"), nullptr);  // 100 of 810 is still exposed
}

TEST(Advise, AnFsdpUnitNeverPrefetchedWhileComputeWaitsForIt) {
  // fsdp_job.h: B's gathers (forward and backward) are never prefetched and make compute wait
  // 100 ns each, 200 of a 2405 ns step (8.3%); A's backward gather is prefetched.
  fx::TempDir dir;
  fx::writeFsdpJob(dir);
  const Advice a = adviceOf(dir);
  EXPECT_EQ(a.engine, "fsdp");
  const Finding* b = find(a, "no-prefetch");
  ASSERT_NE(b, nullptr);
  EXPECT_NE(b->what.find("unit B"), std::string::npos) << b->what;
  EXPECT_NE(b->evidence.find("200 ns a step"), std::string::npos) << b->evidence;
  EXPECT_NE(b->change.find("forward_prefetch=True"), std::string::npos) << b->change;
  for (const Finding& f : a.findings) {
    EXPECT_EQ(f.what.find("unit A"), std::string::npos) << f.what;  // it was prefetched once
  }
  // Forward waits of 50 + 100 + 100 and B's 100 in backward: 350 of 2405.
  const Finding* exposed = find(a, "exposed-communication");
  ASSERT_NE(exposed, nullptr);
  EXPECT_NE(exposed->what.find("14.6%"), std::string::npos) << exposed->what;
  EXPECT_FALSE(a.changes.empty());
  EXPECT_EQ(find(a, "straggler"), nullptr);  // no collective matched across ranks
}

}  // namespace
}  // namespace ringx::analysis
