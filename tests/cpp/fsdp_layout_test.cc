// The FSDP engine's torch-free parts: the flatten-concat-chunk layout of a unit
// and its trace events (gathers, reductions, memory counters).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <map>
#include <stdexcept>

#include "fsdp/flat_layout.h"
#include "fsdp/timing.h"
#include "tests/cpp/recorded_file.h"

namespace ringx::fsdp {
namespace {

TEST(FlatLayout, ConcatenatesInOrderAndPadsToTheShardingFactor) {
  // A 4x3 weight and a 3-element bias over 4 ranks: 15 elements padded to 16.
  FlatLayout l = planFlatLayout({12, 3}, 4);
  EXPECT_EQ(l.offsets, (std::vector<int64_t>{0, 12}));
  EXPECT_EQ(l.totalNumel, 15);
  EXPECT_EQ(l.paddedNumel, 16);
  EXPECT_EQ(l.shardNumel, 4);
  EXPECT_EQ(l.padding(), 1);
  EXPECT_EQ(l.shardBegin(3), 12);
  EXPECT_EQ(l.shardEnd(3), 16);
}

TEST(FlatLayout, PaddingIsBelowTheShardingFactorAndShardsAreEqual) {
  for (int s = 1; s <= 16; ++s) {
    for (int64_t n : {1, 2, 7, 15, 16, 17, 1000, 4097}) {
      FlatLayout l = planFlatLayout({n, 3, 0, 5}, s);
      EXPECT_EQ(l.totalNumel, n + 8);
      EXPECT_GE(l.padding(), 0);
      EXPECT_LT(l.padding(), s);
      EXPECT_EQ(l.shardNumel * s, l.paddedNumel);
      EXPECT_EQ(l.shardEnd(s - 1), l.paddedNumel);
    }
  }
  // The FSDP paper's example: a 4x3 Linear (12 + 3) on 16 ranks, one element each.
  FlatLayout paper = planFlatLayout({12, 3}, 16);
  EXPECT_EQ(paper.shardNumel, 1);
  EXPECT_EQ(paper.padding(), 1);
}

TEST(FlatLayout, AnEmptyUnitStillHasOneElementPerRankAndBadInputIsRefused) {
  FlatLayout l = planFlatLayout({}, 3);
  EXPECT_EQ(l.totalNumel, 0);
  EXPECT_EQ(l.shardNumel, 1);
  EXPECT_THROW(planFlatLayout({4}, 0), std::invalid_argument);
  EXPECT_THROW(planFlatLayout({-1}, 2), std::invalid_argument);
}

TEST(FsdpTiming, GathersReductionsAndMemoryBecomeEventsOnTheUnitsTrack) {
  testing::RecordedFile recorded;

  GatherTiming g;
  g.backward = true;
  g.prefetched = true;
  g.step = 4;
  g.bytes = 4096;
  g.issueNs = 1000;
  g.wireStartNs = 1010;
  g.wireEndNs = 1400;
  g.waitBeginNs = 1300;  // compute needed it 100 ns before it was there
  g.readyNs = 1410;
  recordGather("layers.2", g);
  ReduceTiming r;
  r.step = 4;
  r.bytes = 8192;
  r.launchNs = 2000;
  r.wireStartNs = 2100;
  r.wireEndNs = 2500;
  r.doneNs = 2600;
  recordReduce("", r);
  recordUnitSpan("layers.2", "backward", 1410, 1900, 4);
  recordPhase("forward", 500, 900, 4);
  MemoryCounters m{100, 200, 300, 600};
  recordMemory(m);
  const trace::RankTrace t = recorded.finish();
  std::map<std::string, const trace::Event*> spans;
  std::map<std::string, double> counters;
  for (const trace::Event& e : t.events) {
    if (e.category == trace::Category::kFsdp) {
      spans[std::string(t.str(e.track)) + "/" + std::string(t.str(e.name))] = &e;
    } else if (e.category == trace::Category::kMemory && e.kind == trace::EventKind::kCounter) {
      counters[std::string(t.str(e.name))] = e.value;
    }
  }
  ASSERT_EQ(spans.count("fsdp:layers.2/all_gather"), 1u);
  const trace::Event& gather = *spans["fsdp:layers.2/all_gather"];
  EXPECT_EQ(gather.beginNs, 1000);
  EXPECT_EQ(gather.endNs, 1410);
  EXPECT_EQ(t.str(t.findArg(gather, "phase")->stringId), "backward");
  EXPECT_EQ(t.findArg(gather, "prefetched")->intValue, 1);
  EXPECT_EQ(t.findArg(gather, "exposed_ns")->intValue, 110);
  EXPECT_EQ(t.findArg(gather, "wire_end_ns")->intValue, 1400);
  EXPECT_EQ(t.findArg(gather, "bytes")->intValue, 4096);
  ASSERT_EQ(spans.count("fsdp:(root)/reduce_scatter"), 1u);
  EXPECT_EQ(spans["fsdp:(root)/reduce_scatter"]->endNs, 2600);
  EXPECT_EQ(t.findArg(*spans["fsdp:(root)/reduce_scatter"], "wire_start_ns")->intValue, 2100);
  ASSERT_EQ(spans.count("fsdp:layers.2/backward"), 1u);
  ASSERT_EQ(spans.count("fsdp/forward"), 1u);
  EXPECT_EQ(t.findArg(*spans["fsdp/forward"], "step")->intValue, 4);
  EXPECT_EQ(counters["fsdp.sharded_bytes"], 100);
  EXPECT_EQ(counters["fsdp.unsharded_bytes"], 200);
  EXPECT_EQ(counters["fsdp.grad_bytes"], 300);
  EXPECT_EQ(counters["fsdp.peak_bytes"], 600);
}

}  // namespace
}  // namespace ringx::fsdp
