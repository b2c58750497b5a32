// FSDP what-if from a trace (analysis/whatif.h): a two-rank ringx.fsdp job written event by
// event as the engine records it, on the schedule the replay test works out by hand
// (tests/cpp/fsdp_replay_test.cc, rootAndTwoBlocks: 2405 ns a step), so the model read back
// must be that one and its answers are known.
#include <gtest/gtest.h>

#include <string>

#include "analysis/whatif.h"
#include "tests/cpp/trace/fsdp_job.h"
#include "tests/cpp/trace/trace_fixture.h"
#include "trace/format/schema.h"
#include "trace/model/loader.h"

namespace ringx::analysis {
namespace {

namespace fx = ringx::trace::fixture;
namespace targ = trace::arg;
using trace::Category;

TEST(FsdpWhatIf, TheModelReadBackIsTheOneThatMadeTheTrace) {
  fx::TempDir dir;
  trace::fixture::writeFsdpJob(dir);
  model::TraceStore store;
  model::loadTraces(store, {dir.path()});
  EXPECT_EQ(whatIfEngine(store), "fsdp");
  const FsdpModelSource src = fsdpModelOf(store);
  const replay::FsdpModel& m = src.model;
  EXPECT_EQ(src.recordedStepNs, 2405);
  EXPECT_EQ(src.steps, 6u);
  ASSERT_EQ(m.units.size(), 3u);
  EXPECT_EQ(m.units[0].name, "(root)");
  EXPECT_EQ(m.units[0].paramBytes, 1000);
  EXPECT_EQ(m.units[1].gradBytes, 2000);
  EXPECT_EQ(m.runtime.sharding, replay::FsdpSharding::kFullShard);
  EXPECT_TRUE(m.runtime.gatherLane);
  EXPECT_EQ(m.worldSize, 2);
  ASSERT_EQ(m.ranks.size(), 2u);
  for (const replay::FsdpRankProfile& p : m.ranks) {
    EXPECT_EQ(p.forwardGapNs, (std::vector<int64_t>{0, 10, 300, 0, 300, 10}));
    EXPECT_EQ(p.toBackwardNs, 20);
    EXPECT_EQ(p.backwardGapNs, (std::vector<int64_t>{0, 10, 600, 0, 600, 10}));
    EXPECT_EQ(p.finalizeNs, 5);
    EXPECT_EQ(p.optimizerNs, 50);
  }
  EXPECT_EQ(m.samples.size(), 6u);
  // The last arrival's wire times: 50 ns for 1000 bytes, 100 for 2000.
  EXPECT_NEAR(m.gather.nsPerByte, 0.1, 1e-9);
  EXPECT_NEAR(m.gather.stepNs, 0, 1e-6);
  EXPECT_NEAR(m.reduceScatter.nsPerByte, 0.1, 1e-9);
}

TEST(FsdpWhatIf, ReplaysTheRecordedStepAndAnswersWithTheWorkedOutNumbers) {
  fx::TempDir dir;
  trace::fixture::writeFsdpJob(dir);
  model::TraceStore store;
  model::loadTraces(store, {dir.path()});
  const FsdpWhatIfReport r = fsdpWhatIf(store);
  EXPECT_EQ(r.baseline.stepNs, 2405);
  EXPECT_DOUBLE_EQ(r.baselineErrorShare, 0);
  std::map<std::string, int64_t> predicted;
  for (const FsdpWhatIfRow& row : r.rows) {
    EXPECT_TRUE(row.error.empty()) << row.change.label << ": " << row.error;
    predicted[row.change.label] = row.predictedStepNs;
  }
  EXPECT_EQ(predicted["sharding_strategy=SHARD_GRAD_OP"], 2305);
  EXPECT_EQ(predicted["sharding_strategy=NO_SHARD"], 2255);  // fsdp_replay_test.cc
  EXPECT_EQ(predicted["backward_prefetch=BACKWARD_POST"], 2505);
  EXPECT_EQ(predicted["backward_prefetch=NONE"], 2505);
  EXPECT_EQ(predicted["forward_prefetch=True"], 2295);
  EXPECT_EQ(predicted["limit_all_gathers=False"], 2405);
  EXPECT_EQ(predicted["units merged by 2"], 2605);
  EXPECT_EQ(predicted["communication free"], 1915);
  ASSERT_GE(r.bestRow, 0);
  EXPECT_EQ(r.rows[static_cast<size_t>(r.bestRow)].change.label, "sharding_strategy=NO_SHARD");
  const std::string text = formatFsdpWhatIf(r, "job");
  EXPECT_NE(text.find("fastest schedule: sharding_strategy=NO_SHARD"), std::string::npos) << text;
  const std::string json = fsdpWhatIfJson(r);
  EXPECT_NE(json.find("\"engine\":\"fsdp\""), std::string::npos);
  EXPECT_NE(json.find("\"recorded_step_ns\":2405"), std::string::npos);

  WhatIfQuestions q;
  q.shardingStrategies = {"HYBRID_SHARD"};
  EXPECT_THROW(fsdpWhatIf(store, q), std::invalid_argument);
}

TEST(FsdpWhatIf, ATraceWithoutTheScheduleSaysWhat) {
  fx::TempDir dir;
  trace::fixture::writeFsdpJob(dir, /*withConfig=*/false);
  model::TraceStore store;
  model::loadTraces(store, {dir.path()});
  try {
    fsdpModelOf(store);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("fsdp_config"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ringx::analysis
