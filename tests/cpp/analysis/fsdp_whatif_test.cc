// FSDP what-if from a trace (analysis/whatif.h): a two-rank ringx.fsdp job written event by
// event as the engine records it, on the schedule the replay test works out by hand
// (tests/cpp/fsdp_replay_test.cc, rootAndTwoBlocks: 2405 ns a step), so the model read back
// must be that one and its answers are known.
#include <gtest/gtest.h>

#include <string>

#include "analysis/whatif.h"
#include "tests/cpp/trace/trace_fixture.h"
#include "trace/format/schema.h"
#include "trace/model/loader.h"

namespace ringx::analysis {
namespace {

namespace fx = ringx::trace::fixture;
namespace targ = trace::arg;
using trace::Category;

// Per step from S: the root's gather 0-50, A's 60-160, A's forward 160-460, B's gather
// 460-560, B's forward 560-860, the root's forward 50-870; backward from 890: B gathered
// 900-1000, A prefetched 1000-1100 (used at 1600), B's backward 1000-1600, A's 1600-2200, the
// root's 890-2210; reduce-scatters on the wire B 1600-1700, A 2200-2300, root 2300-2350
// (done when the engine retired them: 2200, 2300, 2350); backward ends 2355, the optimizer
// takes 50. Rank 1 issues every collective 30 ns earlier and waits for rank 0: its times from
// issue to wire end are 30 ns longer than the last arrival's.
void writeJob(const fx::TempDir& dir, bool withConfig = true) {
  for (int rank = 0; rank < 2; ++rank) {
    fx::RankStream s(rank, 2);
    const int64_t late = rank == 1 ? 30 : 0;
    for (int64_t step = 0; step < 6; ++step) {
      const int64_t S = 10000 + step * 2405;
      if (withConfig) {
        s.instant(Category::kFsdp, "fsdp", "fsdp_config", S,
                  {{targ::kStep, step},
                   {targ::kShardingStrategy, "FULL_SHARD"},
                   {targ::kBackwardPrefetch, "BACKWARD_PRE"},
                   {targ::kForwardPrefetch, 0},
                   {targ::kLimitAllGathers, 1},
                   {targ::kGatherLane, 1},
                   {targ::kGroupSize, 2}});
      }
      if (step > 0)
        s.span(Category::kFsdp, "fsdp", "optimizer", S - 50, S, {{targ::kStep, step - 1}});
      s.span(Category::kFsdp, "fsdp", "forward", S, S + 870, {{targ::kStep, step}});
      s.span(Category::kFsdp, "fsdp", "backward", S + 890, S + 2355, {{targ::kStep, step}});
      auto gather = [&](const char* unit, int64_t bytes, const char* phase, int64_t issue,
                        int64_t wireEnd, int64_t ready, int64_t exposed, int64_t prefetched) {
        const int64_t wire = wireEnd - issue;
        s.span(Category::kFsdp, std::string("fsdp:") + unit, "all_gather", S + issue, S + ready,
               {{targ::kStep, step},
                {targ::kBytes, bytes},
                {targ::kPhase, phase},
                {targ::kPrefetched, prefetched},
                {targ::kIssueNs, S + issue - late},
                {targ::kWireStartNs, S + wireEnd - wire - late},
                {targ::kWireEndNs, S + wireEnd},
                {targ::kExposedNs, exposed}});
      };
      gather("(root)", 1000, "forward", 0, 50, 50, 50, 0);
      gather("A", 2000, "forward", 60, 160, 160, 100, 0);
      gather("B", 2000, "forward", 460, 560, 560, 100, 0);
      gather("B", 2000, "backward", 900, 1000, 1000, 100, 0);
      gather("A", 2000, "backward", 1000, 1100, 1600, 0, 1);
      auto compute = [&](const char* unit, const char* name, int64_t b, int64_t e) {
        s.span(Category::kFsdp, std::string("fsdp:") + unit, name, S + b, S + e,
               {{targ::kStep, step}});
      };
      compute("(root)", "forward", 50, 870);
      compute("A", "forward", 160, 460);
      compute("B", "forward", 560, 860);
      compute("(root)", "backward", 890, 2210);
      compute("B", "backward", 1000, 1600);
      compute("A", "backward", 1600, 2200);
      auto reduce = [&](const char* unit, int64_t bytes, int64_t launch, int64_t wireStart,
                        int64_t wireEnd, int64_t done) {
        s.span(Category::kFsdp, std::string("fsdp:") + unit, "reduce_scatter", S + launch, S + done,
               {{targ::kStep, step},
                {targ::kBytes, bytes},
                {targ::kLaunchNs, S + launch - late},
                {targ::kWireStartNs, S + wireStart - late},
                {targ::kWireEndNs, S + wireEnd}});
      };
      reduce("B", 2000, 1600, 1600, 1700, 2200);
      reduce("A", 2000, 2200, 2200, 2300, 2300);
      reduce("(root)", 1000, 2210, 2300, 2350, 2350);
    }
    s.writeTo(dir.file("rank-" + std::to_string(rank) + ".ringx"));
  }
}

TEST(FsdpWhatIf, TheModelReadBackIsTheOneThatMadeTheTrace) {
  fx::TempDir dir;
  writeJob(dir);
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
  writeJob(dir);
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
  EXPECT_EQ(predicted["sharding_strategy=NO_SHARD"], 2205);
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
  writeJob(dir, /*withConfig=*/false);
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
