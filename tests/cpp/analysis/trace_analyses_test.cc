// The viewer's analyses on small synthetic traces whose answers are known by
// hand: selection statistics, collectives matched across ranks (skew, the last
// rank, an op mismatch, a rank that never arrived), DDP iterations and buckets
// and FSDP units shaped like ddp/timing.cc and fsdp/timing.cc write them,
// memory peaks and what was alive at them, and a million events analyzed fast.
#include "analysis/trace_analyses.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <variant>

#include "tests/cpp/trace/trace_fixture.h"
#include "trace/format/schema.h"
#include "trace/model/loader.h"

namespace ringx::analysis {
namespace {

using namespace ringx::model;
using trace::Category;
namespace fx = trace::fixture;
namespace targ = trace::arg;

// An int or string argument for spans added straight to a store.
struct A {
  A(std::string k, int v) : key(std::move(k)), value(int64_t{v}) {}
  A(std::string k, int64_t v) : key(std::move(k)), value(v) {}
  A(std::string k, const char* v) : key(std::move(k)), value(std::string(v)) {}
  std::string key;
  std::variant<int64_t, std::string> value;
};

void addSpan(TraceStore& store, int32_t rankId, const std::string& track, const std::string& name,
             int64_t begin, int64_t end, const std::vector<A>& args = {},
             const std::string& category = "user") {
  RankData& rank = store.rank(rankId);
  std::vector<ArgValue> values;
  for (const A& a : args) {
    const uint32_t key = store.strings().intern(a.key);
    if (const int64_t* i = std::get_if<int64_t>(&a.value)) {
      values.push_back(ArgValue::ofInt(key, *i));
    } else {
      values.push_back(
          ArgValue::ofString(key, store.strings().intern(std::get<std::string>(a.value))));
    }
  }
  Span s;
  s.begin = begin;
  s.end = end;
  s.name = store.strings().intern(name);
  s.firstArg = store.addArgs(rank, values.data(), values.size());
  s.argCount = static_cast<uint16_t>(values.size());
  s.category = store.category(category);
  const uint32_t t = store.track(rank, track);
  store.addSpan(rank, t, s);
}

const EventStats* find(const std::vector<EventStats>& all, const std::string& name) {
  for (const auto& e : all)
    if (e.name == name) return &e;
  return nullptr;
}

// ---- selection statistics -------------------------------------------------------

TEST(AnalysisStats, ExactNumbersAndNearestRankPercentiles) {
  TraceStore store;
  // matmul: 10, 20, 30, 40 on rank 0 and 100 on rank 1.
  addSpan(store, 0, "compute", "matmul", 0, 10);
  addSpan(store, 0, "compute", "matmul", 100, 120);
  addSpan(store, 0, "compute", "matmul", 200, 230);
  addSpan(store, 0, "compute", "matmul", 300, 340);
  addSpan(store, 1, "compute", "matmul", 0, 100);
  addSpan(store, 1, "compute", "relu", 500, 505);
  store.finalize();

  const EventStats m = statsForName(store, store.strings().find("matmul"));
  EXPECT_EQ(m.name, "matmul");
  EXPECT_EQ(m.count, 5u);
  EXPECT_EQ(m.totalNs, 200);
  EXPECT_EQ(m.meanNs, 40);
  EXPECT_EQ(m.p50Ns, 30);   // ceil(0.5 x 5) = 3rd smallest
  EXPECT_EQ(m.p99Ns, 100);  // ceil(0.99 x 5) = 5th
  EXPECT_EQ(m.minNs, 10);
  EXPECT_EQ(m.maxNs, 100);
  EXPECT_EQ(m.bytes, 0);
  EXPECT_EQ(m.busbwGBps, 0);
  ASSERT_EQ(m.perRank.size(), 2u);
  EXPECT_EQ(m.perRank[0].rank, 0);
  EXPECT_EQ(m.perRank[0].count, 4u);
  EXPECT_EQ(m.perRank[0].totalNs, 100);
  EXPECT_EQ(m.perRank[0].meanNs, 25);
  EXPECT_EQ(m.perRank[1].rank, 1);
  EXPECT_EQ(m.perRank[1].totalNs, 100);

  // A range: spans overlapping [115, 205] count whole (20 and 30).
  const EventStats part = statsForName(store, store.strings().find("matmul"), 115, 205);
  EXPECT_EQ(part.count, 2u);
  EXPECT_EQ(part.totalNs, 50);
  EXPECT_EQ(part.minNs, 20);
  ASSERT_EQ(part.perRank.size(), 1u);

  // Every name, most total time first.
  const auto all = statsForRange(store);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name, "matmul");
  EXPECT_EQ(all[1].name, "relu");
  EXPECT_EQ(all[1].count, 1u);
  EXPECT_EQ(all[1].p50Ns, 5);
  const auto late = statsForRange(store, 400, 1000);
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0].name, "relu");
}

TEST(AnalysisStats, BusBandwidthAppliesTheOpsFactor) {
  TraceStore store;
  // allreduce of 1000 B in 100 ns on 4 ranks: 10 GB/s algbw x 2(n-1)/n = 15.
  addSpan(store, 0, "comm:world", "allreduce", 0, 100,
          {{targ::kBytes, 1000}, {targ::kGroupSize, 4}}, "collective");
  addSpan(store, 0, "comm:world", "allreduce", 200, 400,
          {{targ::kBytes, 1000}, {targ::kGroupSize, 4}}, "collective");  // 7.5
  addSpan(store, 1, "comm:world", "allreduce", 0, 50, {{targ::kBytes, 1000}, {targ::kGroupSize, 4}},
          "collective");  // 30
  // all_gather of 800 B in 100 ns on 4 ranks: 8 x (n-1)/n = 6.
  addSpan(store, 0, "comm:world", "all_gather", 500, 600,
          {{targ::kBytes, 800}, {targ::kGroupSize, 4}}, "collective");
  // broadcast: factor 1.
  addSpan(store, 1, "comm:world", "broadcast", 500, 600,
          {{targ::kBytes, 800}, {targ::kGroupSize, 4}}, "collective");
  store.finalize();

  const auto all = statsForRange(store);
  const EventStats* ar = find(all, "allreduce");
  ASSERT_NE(ar, nullptr);
  EXPECT_EQ(ar->bytes, 3000);
  EXPECT_DOUBLE_EQ(ar->busbwGBps, 15.0);  // median of 7.5, 15, 30
  ASSERT_EQ(ar->perRank.size(), 2u);
  EXPECT_DOUBLE_EQ(ar->perRank[0].busbwGBps, 7.5);  // nearest-rank median of 7.5, 15
  EXPECT_DOUBLE_EQ(ar->perRank[1].busbwGBps, 30.0);
  const EventStats* ag = find(all, "all_gather");
  ASSERT_NE(ag, nullptr);
  EXPECT_DOUBLE_EQ(ag->busbwGBps, 6.0);
  const EventStats* bc = find(all, "broadcast");
  ASSERT_NE(bc, nullptr);
  EXPECT_DOUBLE_EQ(bc->busbwGBps, 8.0);
}

// ---- collectives ------------------------------------------------------------------

// Three ranks on group "world": seq 0 matched with skew, seq 1 with an op
// mismatch, seq 2 that rank 2 never reached; a failed collective on group "1";
// a send with a seq that must not be matched.
void writeCollectives(const fx::TempDir& dir) {
  for (int r = 0; r < 3; ++r) {
    fx::RankStream s(r, 3);
    s.clockSync(0, 0, 0);
    const int64_t begin0[] = {1000, 1200, 1500};
    s.collective("allreduce", 0, begin0[r], 3000, 3000, 3);
    s.collective(r == 2 ? "broadcast" : "allreduce", 1, 4000 + r, 5000, 64, 3);
    if (r != 2) s.collective("allreduce", 2, 6000 + 10 * r, 7000, 64, 3);
    if (r != 2) {
      std::vector<fx::TestArg> extra;
      if (r == 1) extra.emplace_back(targ::kError, "timed out");
      s.collective("all_gather", 0, 8000, 9000, 128, 2, "1", extra);
    }
    s.collective("send", 5, 9500, 9600, 8, 3);
    s.writeTo(dir.file("rank-" + std::to_string(r) + ".ringx"));
  }
}

TEST(AnalysisCollective, MatchedAcrossRanksWithSkewLastAndSlowestRank) {
  fx::TempDir dir;
  writeCollectives(dir);
  TraceStore store;
  loadTraces(store, {dir.path()});
  const auto rows = matchCollectives(store);
  ASSERT_EQ(rows.size(), 4u);  // world 0, 1, 2 and group 1's 0; no send

  const CollectiveRow& r0 = rows[0];
  EXPECT_EQ(r0.group, "world");
  EXPECT_EQ(r0.seq, 0);
  EXPECT_EQ(r0.op, "allreduce");
  EXPECT_FALSE(r0.mismatch);
  EXPECT_EQ(r0.bytes, 3000);
  EXPECT_EQ(r0.groupSize, 3);
  ASSERT_EQ(r0.ranks.size(), 3u);
  EXPECT_EQ(r0.ranks[1].rank, 1);
  EXPECT_EQ(r0.ranks[1].groupRank, 1);
  EXPECT_EQ(r0.ranks[1].beginNs, 1200);
  EXPECT_EQ(r0.ranks[1].durationNs, 1800);
  EXPECT_TRUE(r0.missingRanks.empty());
  EXPECT_EQ(r0.missingCount, 0);
  EXPECT_EQ(r0.arrivalSkewNs, 500);
  EXPECT_EQ(r0.lastArrivalRank, 2);
  EXPECT_EQ(r0.slowestRank, 0);  // the first to arrive waits longest
  EXPECT_EQ(r0.firstBeginNs, 1000);
  EXPECT_EQ(r0.lastEndNs, 3000);
  // Per rank 3000 B / duration x 4/3: 2.0, 2.22, 2.67; the median is rank 1's.
  EXPECT_NEAR(r0.busbwGBps, 3000.0 / 1800 * 4 / 3, 1e-9);
  EXPECT_FALSE(r0.failed);
  // The span reference leads back to the span.
  const RankData* rank1 = store.findRank(1);
  const SpanRef& ref = r0.ranks[1].span;
  EXPECT_EQ(ref.rank, 1);
  EXPECT_EQ(rank1->tracks[ref.track].levels[ref.level][ref.index].begin, 1200);

  const CollectiveRow& g1 = rows[3];
  EXPECT_EQ(g1.group, "1");
  EXPECT_EQ(g1.groupSize, 2);
  EXPECT_TRUE(g1.failed);
  EXPECT_TRUE(g1.ranks[1].failed);
  EXPECT_EQ(g1.ranks[1].busbwGBps, 0);
  EXPECT_NEAR(g1.busbwGBps, 128.0 / 1000 * 0.5, 1e-12);  // rank 0's only
  EXPECT_EQ(g1.arrivalSkewNs, 0);
  EXPECT_EQ(g1.lastArrivalRank, -1);  // a tie: nobody was last
}

TEST(AnalysisCollective, OpMismatchIsFlagged) {
  fx::TempDir dir;
  writeCollectives(dir);
  TraceStore store;
  loadTraces(store, {dir.path()});
  const auto rows = matchCollectives(store);
  ASSERT_EQ(rows.size(), 4u);
  const CollectiveRow& r1 = rows[1];
  EXPECT_EQ(r1.seq, 1);
  EXPECT_TRUE(r1.mismatch);
  EXPECT_EQ(r1.op, "allreduce");  // what most ranks called
  EXPECT_EQ(r1.opsSeen, "allreduce (ranks 0, 1); broadcast (rank 2)");
  EXPECT_EQ(r1.ranks[2].op, "broadcast");
  EXPECT_EQ(overviewOf(rows).mismatched, 1u);
}

TEST(AnalysisCollective, RankThatNeverArrivedIsAHangSuspect) {
  fx::TempDir dir;
  writeCollectives(dir);
  TraceStore store;
  loadTraces(store, {dir.path()});
  const auto rows = matchCollectives(store);
  ASSERT_EQ(rows.size(), 4u);
  const CollectiveRow& r2 = rows[2];
  EXPECT_EQ(r2.seq, 2);
  EXPECT_EQ(r2.ranks.size(), 2u);
  EXPECT_EQ(r2.missingRanks, std::vector<int32_t>{2});
  EXPECT_EQ(r2.missingCount, 1);
  EXPECT_EQ(r2.lastArrivalRank, 1);
  EXPECT_EQ(r2.arrivalSkewNs, 10);

  const CollectiveOverview o = overviewOf(rows);
  EXPECT_EQ(o.total, 4u);
  EXPECT_EQ(o.incomplete, 1u);  // group 1 has two members: complete
  EXPECT_EQ(o.failed, 1u);
  EXPECT_EQ(o.maxSkewNs, 500);
  EXPECT_EQ(o.maxSkewRow, 0);
  ASSERT_EQ(o.hangSuspects.size(), 1u);
  const HangSuspect& h = o.hangSuspects[0];
  EXPECT_EQ(h.rank, 2);
  EXPECT_EQ(h.group, "world");
  EXPECT_EQ(h.lastSeq, 1);
  EXPECT_EQ(h.missingSeq, 2);
  EXPECT_EQ(h.op, "allreduce");
  EXPECT_EQ(h.othersBeganNs, 6000);
  EXPECT_EQ(h.row, 2);
  EXPECT_EQ(h.arrivedRanks, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(h.description,
            "rank 2 never arrived at allreduce seq 2 of group world (ranks 0, 1 did; its last "
            "was seq 1)");
}

TEST(AnalysisCollective, GroupSizeCountsRanksNeverSeen) {
  TraceStore store;
  // group_size 4, but only ranks 0 and 1 ever recorded the group.
  for (int r = 0; r < 2; ++r)
    addSpan(store, r, "comm:g", "allreduce", 0, 10,
            {{targ::kSeq, 0}, {targ::kGroup, "g"}, {targ::kGroupSize, 4}}, "collective");
  store.finalize();
  const auto rows = matchCollectives(store);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_TRUE(rows[0].missingRanks.empty());  // nobody to name
  EXPECT_EQ(rows[0].missingCount, 2);
  EXPECT_EQ(overviewOf(rows).incomplete, 1u);
  EXPECT_TRUE(overviewOf(rows).hangSuspects.empty());
}

// ---- DDP ----------------------------------------------------------------------------

// One rank's iteration as ddp::recordIteration writes it.
struct BucketTimes {
  int64_t index, bytes, params, firstGrad, ready, launch, wireStart, wireEnd, copyBack, copyBackEnd,
      exposed, seq;
};
void ddpIteration(fx::RankStream& s, int64_t step, int64_t optimizerBegin, int64_t fwdBegin,
                  int64_t fwdEnd, int64_t bwdEnd, const std::vector<BucketTimes>& buckets) {
  if (optimizerBegin > 0)
    s.span(Category::kDdp, "ddp", "optimizer", optimizerBegin, fwdBegin, {{targ::kStep, step - 1}});
  s.span(Category::kDdp, "ddp", "forward", fwdBegin, fwdEnd, {{targ::kStep, step}});
  s.span(Category::kDdp, "ddp", "backward", fwdEnd, bwdEnd, {{targ::kStep, step}});
  for (const BucketTimes& b : buckets) {
    s.span(Category::kDdp, "ddp:bucket" + std::to_string(b.index), "bucket", b.firstGrad,
           b.copyBackEnd,
           {{targ::kBucket, b.index},
            {targ::kStep, step},
            {targ::kBytes, b.bytes},
            {targ::kParams, b.params},
            {targ::kFirstGradNs, b.firstGrad},
            {targ::kReadyNs, b.ready},
            {targ::kLaunchNs, b.launch},
            {targ::kWireStartNs, b.wireStart},
            {targ::kWireEndNs, b.wireEnd},
            {targ::kCopyBackNs, b.copyBack},
            {targ::kExposedNs, b.exposed},
            {targ::kSeq, b.seq}});
  }
}

void writeDdp(const fx::TempDir& dir) {
  fx::RankStream s(0, 1);
  // Step 1: forward 1000..2000, backward 2000..5000; bucket 0 fully hidden,
  // bucket 1 exposed 300 of its 1000 ns on the wire.
  ddpIteration(s, 1, 0, 1000, 2000, 5000,
               {{0, 4096, 3, 2100, 2500, 2500, 2600, 3600, 3600, 3700, 0, 0},
                {1, 8192, 5, 3000, 4000, 4200, 4300, 5300, 5300, 5400, 300, 1}});
  s.span(Category::kDdp, "ddp", "bucket_rebuild", 5400, 5500, {{targ::kStep, 1}, {"buckets", 2}});
  // Step 2 after an optimizer 5500..6000: forward 6000..6500, backward 6500..9500.
  ddpIteration(s, 2, 5500, 6000, 6500, 9500,
               {{0, 4096, 3, 6600, 7100, 7100, 7200, 7800, 7800, 7900, 0, 2},
                {1, 8192, 5, 7500, 8500, 8500, 8600, 9600, 9600, 9700, 100, 3}});
  s.writeTo(dir.file("rank-0.ringx"));
}

TEST(AnalysisDdp, IterationsAndBucketsFromTheEnginesSpans) {
  fx::TempDir dir;
  writeDdp(dir);
  TraceStore store;
  loadTraces(store, {dir.path()});
  const DdpAnalysis d = analyzeDdp(store);
  ASSERT_EQ(d.iterations.size(), 2u);
  EXPECT_EQ(d.rebuilds, 1u);

  const DdpIteration& i1 = d.iterations[0];
  EXPECT_EQ(i1.rank, 0);
  EXPECT_EQ(i1.step, 1);
  EXPECT_EQ(i1.forwardBeginNs, 1000);
  EXPECT_EQ(i1.forwardNs, 1000);
  EXPECT_EQ(i1.backwardBeginNs, 2000);
  EXPECT_EQ(i1.backwardNs, 3000);
  EXPECT_EQ(i1.optimizerNs, 500);  // recorded before step 2's forward, with step 1
  EXPECT_EQ(i1.exposedNs, 300);
  EXPECT_EQ(i1.wireNs, 2000);
  ASSERT_EQ(i1.buckets.size(), 2u);
  const DdpBucketSample& b1 = i1.buckets[1];
  EXPECT_EQ(b1.bucket, 1);
  EXPECT_EQ(b1.bytes, 8192);
  EXPECT_EQ(b1.params, 5);
  EXPECT_EQ(b1.seq, 1);
  EXPECT_EQ(b1.readyNs, 4000);
  EXPECT_EQ(b1.readyOffsetNs, 2000);  // ready 4000 - backward begin 2000
  EXPECT_EQ(b1.launchDelayNs, 200);
  EXPECT_EQ(b1.wireStartNs, 4300);
  EXPECT_EQ(b1.wireEndNs, 5300);
  EXPECT_EQ(b1.wireNs, 1000);
  EXPECT_EQ(b1.exposedNs, 300);
  EXPECT_DOUBLE_EQ(b1.hiddenShare, 0.7);
  EXPECT_EQ(b1.beginNs, 3000);
  EXPECT_EQ(b1.endNs, 5400);
  EXPECT_DOUBLE_EQ(i1.buckets[0].hiddenShare, 1.0);

  const DdpIteration& i2 = d.iterations[1];
  EXPECT_EQ(i2.step, 2);
  EXPECT_EQ(i2.optimizerNs, 0);  // none recorded after step 2
  EXPECT_EQ(i2.exposedNs, 100);

  EXPECT_EQ(d.forwardMeanNs, 750);
  EXPECT_EQ(d.backwardMeanNs, 3000);
  EXPECT_EQ(d.optimizerMeanNs, 500);
  EXPECT_EQ(d.exposedMeanNs, 200);
  // Wire 1000 + 1000 + 600 + 1000, exposed 300 + 100.
  EXPECT_DOUBLE_EQ(d.hiddenShare, 1.0 - 400.0 / 3600);
  ASSERT_EQ(d.buckets.size(), 2u);
  const DdpBucketAverage& a0 = d.buckets[0];
  EXPECT_EQ(a0.bucket, 0);
  EXPECT_EQ(a0.samples, 2u);
  EXPECT_EQ(a0.bytes, 4096);
  EXPECT_EQ(a0.readyOffsetMeanNs, 550);  // 500 and 600
  EXPECT_EQ(a0.launchDelayMeanNs, 0);
  EXPECT_EQ(a0.wireMeanNs, 800);  // 1000 and 600
  EXPECT_EQ(a0.exposedMeanNs, 0);
  EXPECT_DOUBLE_EQ(a0.hiddenShare, 1.0);
  const DdpBucketAverage& a1 = d.buckets[1];
  EXPECT_EQ(a1.launchDelayMeanNs, 100);
  EXPECT_EQ(a1.exposedMeanNs, 200);
  EXPECT_DOUBLE_EQ(a1.hiddenShare, 0.8);
}

TEST(AnalysisMemory, AliveAtNamesDdpBucketsAndTheirState) {
  fx::TempDir dir;
  writeDdp(dir);
  TraceStore store;
  loadTraces(store, {dir.path()});
  // At 3000: bucket 0 on the wire (2600..3600), bucket 1 just began filling.
  EXPECT_EQ(aliveAt(store, 0, 3000),
            (std::vector<std::string>{"bucket 0 (on the wire)", "bucket 1 (filling)"}));
  EXPECT_EQ(aliveAt(store, 0, 4250), (std::vector<std::string>{"bucket 1 (waiting to launch)"}));
  EXPECT_EQ(aliveAt(store, 0, 5350), (std::vector<std::string>{"bucket 1 (copy back)"}));
  EXPECT_TRUE(aliveAt(store, 0, 500).empty());
  EXPECT_TRUE(aliveAt(store, 7, 3000).empty());  // no such rank
}

// ---- FSDP ---------------------------------------------------------------------------

void writeFsdp(const fx::TempDir& dir) {
  fx::RankStream s(0, 1);
  auto gather = [&](const std::string& unit, int64_t begin, int64_t end, const char* phase,
                    int prefetched, int64_t wireStart, int64_t wireEnd, int64_t exposed) {
    s.span(Category::kFsdp, "fsdp:" + unit, "all_gather", begin, end,
           {{targ::kStep, 0},
            {targ::kBytes, unit == "(root)" ? 400 : 1000},
            {targ::kPhase, phase},
            {targ::kPrefetched, prefetched},
            {targ::kIssueNs, begin},
            {targ::kWireStartNs, wireStart},
            {targ::kWireEndNs, wireEnd},
            {targ::kExposedNs, exposed}});
  };
  auto unitSpan = [&](const std::string& unit, const char* name, int64_t begin, int64_t end) {
    s.span(Category::kFsdp, "fsdp:" + unit, name, begin, end, {{targ::kStep, 0}});
  };
  auto reduce = [&](const std::string& unit, const char* op, int64_t begin, int64_t end,
                    int64_t wireStart, int64_t wireEnd) {
    s.span(Category::kFsdp, "fsdp:" + unit, op, begin, end,
           {{targ::kStep, 0},
            {targ::kBytes, 400},
            {targ::kLaunchNs, begin},
            {targ::kWireStartNs, wireStart},
            {targ::kWireEndNs, wireEnd}});
  };
  s.span(Category::kFsdp, "fsdp", "forward", 1000, 3000, {{targ::kStep, 0}});
  s.span(Category::kFsdp, "fsdp", "backward", 3000, 7000, {{targ::kStep, 0}});
  s.span(Category::kFsdp, "fsdp", "optimizer", 7200, 7500, {{targ::kStep, 0}});
  gather("(root)", 900, 1000, "forward", 0, 910, 990, 100);
  unitSpan("(root)", "forward", 1000, 3000);
  unitSpan("(root)", "backward", 6000, 7000);
  reduce("(root)", "reduce_scatter", 6900, 7100, 6950, 7050);
  gather("layers.0", 1000, 1200, "forward", 1, 1010, 1190, 0);
  unitSpan("layers.0", "forward", 1200, 2000);
  unitSpan("layers.0", "reshard", 2000, 2010);
  gather("layers.0", 3000, 3300, "backward", 1, 3050, 3250, 50);
  unitSpan("layers.0", "backward", 3300, 5000);
  unitSpan("layers.0", "reshard", 5000, 5010);
  reduce("layers.0", "reduce_scatter", 5000, 5400, 5100, 5300);
  // Memory: what the engine holds; the peak during layers.0's forward.
  s.counter(trace::counters::kFsdpUnshardedBytes, 900, 400);
  s.counter(trace::counters::kFsdpUnshardedBytes, 1100, 1400);
  s.counter(trace::counters::kFsdpUnshardedBytes, 1500, 2000);
  s.counter(trace::counters::kFsdpUnshardedBytes, 1600, 2000);
  s.counter(trace::counters::kFsdpUnshardedBytes, 2010, 400);
  s.counter(trace::counters::kRss, 500, 1e9);
  s.writeTo(dir.file("rank-0.ringx"));
}

TEST(AnalysisFsdp, UnitsAndIterationsFromTheEnginesSpans) {
  fx::TempDir dir;
  writeFsdp(dir);
  TraceStore store;
  loadTraces(store, {dir.path()});
  const FsdpAnalysis f = analyzeFsdp(store);
  ASSERT_EQ(f.units.size(), 2u);
  const FsdpUnitAnalysis& root = f.units[0];  // gathered first
  EXPECT_EQ(root.unit, "(root)");
  EXPECT_EQ(root.firstBeginNs, 900);
  EXPECT_EQ(root.gathers, 1u);
  EXPECT_EQ(root.exposedTotalNs, 100);
  EXPECT_EQ(root.prefetched, 0u);
  EXPECT_EQ(root.reshards, 0u);
  EXPECT_EQ(root.reduceScatters, 1u);
  EXPECT_EQ(root.reduceScatterMeanNs, 100);

  const FsdpUnitAnalysis& l0 = f.units[1];
  EXPECT_EQ(l0.unit, "layers.0");
  EXPECT_EQ(l0.gathers, 2u);
  EXPECT_EQ(l0.forwardGathers, 1u);
  EXPECT_EQ(l0.backwardGathers, 1u);
  EXPECT_EQ(l0.prefetched, 2u);
  EXPECT_EQ(l0.gatherBytes, 1000);
  EXPECT_EQ(l0.gatherBytesTotal, 2000);
  EXPECT_EQ(l0.gatherMeanNs, 250);      // 200 and 300
  EXPECT_EQ(l0.gatherWireMeanNs, 190);  // 180 and 200
  EXPECT_EQ(l0.exposedTotalNs, 50);
  EXPECT_EQ(l0.exposedMeanNs, 25);
  EXPECT_EQ(l0.forwards, 1u);
  EXPECT_EQ(l0.forwardMeanNs, 800);
  EXPECT_EQ(l0.backwards, 1u);
  EXPECT_EQ(l0.backwardMeanNs, 1700);
  EXPECT_EQ(l0.reshards, 2u);
  EXPECT_EQ(l0.reduceScatters, 1u);
  EXPECT_EQ(l0.reduceScatterBytes, 400);
  EXPECT_EQ(l0.reduceScatterMeanNs, 200);
  EXPECT_EQ(l0.allreduces, 0u);

  ASSERT_EQ(f.iterations.size(), 1u);
  const FsdpIteration& it = f.iterations[0];
  EXPECT_EQ(it.rank, 0);
  EXPECT_EQ(it.step, 0);
  EXPECT_EQ(it.forwardNs, 2000);
  EXPECT_EQ(it.backwardBeginNs, 3000);
  EXPECT_EQ(it.backwardNs, 4000);
  EXPECT_EQ(it.optimizerNs, 300);
  EXPECT_EQ(it.gathers, 3u);
  EXPECT_EQ(it.prefetched, 2u);
  EXPECT_EQ(it.gatherBytes, 2400);
  EXPECT_EQ(it.gatherWireNs, 80 + 180 + 200);
  EXPECT_EQ(it.exposedNs, 150);
  EXPECT_EQ(it.reductions, 2u);
  EXPECT_EQ(it.reduceBytes, 800);
  EXPECT_EQ(it.reduceWireNs, 300);
  EXPECT_EQ(f.forwardMeanNs, 2000);
  EXPECT_EQ(f.backwardMeanNs, 4000);
  EXPECT_EQ(f.optimizerMeanNs, 300);
  EXPECT_EQ(f.exposedMeanNs, 150);
}

TEST(AnalysisMemory, PeaksAndWhatWasAliveAtThem) {
  fx::TempDir dir;
  writeFsdp(dir);
  TraceStore store;
  loadTraces(store, {dir.path()});
  const auto peaks = memoryPeaks(store);
  ASSERT_EQ(peaks.size(), 2u);
  EXPECT_EQ(peaks[0].counter, "fsdp.unsharded_bytes");  // by name
  EXPECT_EQ(peaks[0].rank, 0);
  EXPECT_EQ(peaks[0].peakValue, 2000);
  EXPECT_EQ(peaks[0].peakTimeNs, 1500);  // the first time it was reached
  EXPECT_EQ(peaks[0].samples, 5u);
  EXPECT_EQ(peaks[1].counter, "rss_bytes");
  EXPECT_EQ(peaks[1].peakValue, 1e9);

  EXPECT_EQ(aliveAt(store, 0, peaks[0].peakTimeNs),
            (std::vector<std::string>{"(root) (forward)", "layers.0 (forward)"}));
  // After layers.0 resharded only the root is held; in backward the root stays
  // gathered (never resharded) while layers.0 gathers and computes again.
  EXPECT_EQ(aliveAt(store, 0, 2500), (std::vector<std::string>{"(root) (forward)"}));
  EXPECT_EQ(aliveAt(store, 0, 3100),
            (std::vector<std::string>{"(root) (gathered)", "layers.0 (all_gather)"}));
  EXPECT_EQ(aliveAt(store, 0, 5000),
            (std::vector<std::string>{"(root) (gathered)",
                                      "layers.0 (backward, reduce_scatter, reshard)"}));
  EXPECT_EQ(aliveAt(store, 0, 5800), (std::vector<std::string>{"(root) (gathered)"}));
}

// ---- scale --------------------------------------------------------------------------

// A million events, every analysis over them. It prints the time it took; it does not judge
// it (how fast the machine is that day is no test's business).
TEST(AnalysisScale, AMillionEventsAnalyzeWhole) {
  TraceStore store;
  const int kRanks = 8;
  // Per rank 50000 collectives and compute spans, and every 10th step a DDP and
  // an FSDP iteration (6 spans): ~1M events.
  const int kCollectives = 50000;
  auto& pool = store.strings();
  const uint32_t bytesKey = pool.intern(targ::kBytes), seqKey = pool.intern(targ::kSeq),
                 groupKey = pool.intern(targ::kGroup), sizeKey = pool.intern(targ::kGroupSize),
                 world = pool.intern("world"), allreduce = pool.intern("allreduce"),
                 matmul = pool.intern("matmul");
  const uint8_t collective = store.category("collective");
  for (int r = 0; r < kRanks; ++r) {
    RankData& rank = store.rank(r);
    const uint32_t comm = store.track(rank, "comm:world");
    const uint32_t compute = store.track(rank, "compute");
    for (int i = 0; i < kCollectives; ++i) {
      const ArgValue args[] = {ArgValue::ofInt(bytesKey, 1 << 20), ArgValue::ofInt(seqKey, i),
                               ArgValue::ofString(groupKey, world),
                               ArgValue::ofInt(sizeKey, kRanks)};
      Span s;
      s.begin = int64_t{i} * 10000 + r * 7;
      s.end = s.begin + 5000 + (i % 13) * 10;
      s.name = allreduce;
      s.firstArg = store.addArgs(rank, args, 4);
      s.argCount = 4;
      s.category = collective;
      store.addSpan(rank, comm, s);
      Span c;
      c.begin = int64_t{i} * 10000 + 5500;
      c.end = c.begin + 3000;
      c.name = matmul;
      store.addSpan(rank, compute, c);
      if (i % 10 != 0) continue;
      const int64_t t = int64_t{i} * 10000;
      addSpan(store, r, "ddp", "backward", t, t + 9000, {{targ::kStep, i}}, "ddp");
      for (int b = 0; b < 2; ++b)
        addSpan(store, r, "ddp:bucket" + std::to_string(b), "bucket", t + 1000, t + 8000,
                {{targ::kBucket, b},
                 {targ::kStep, i},
                 {targ::kBytes, 1 << 20},
                 {targ::kReadyNs, t + 2000},
                 {targ::kLaunchNs, t + 2100},
                 {targ::kWireStartNs, t + 2200},
                 {targ::kWireEndNs, t + 7000},
                 {targ::kExposedNs, 100}},
                "ddp");
      addSpan(store, r, "fsdp", "backward", t, t + 9000, {{targ::kStep, i}}, "fsdp");
      const std::string unit = "fsdp:layers." + std::to_string(i / 10 % 8);
      addSpan(store, r, unit, "all_gather", t, t + 500,
              {{targ::kStep, i}, {targ::kBytes, 4096}, {targ::kPhase, "backward"}}, "fsdp");
      addSpan(store, r, unit, "backward", t + 500, t + 1500, {{targ::kStep, i}}, "fsdp");
    }
    store.addCounter(rank, "rss_bytes", 0, 1);
  }
  store.finalize();
  ASSERT_GE(store.eventCount(), 1000000u);

  const auto start = std::chrono::steady_clock::now();
  const auto stats = statsForRange(store);
  const auto rows = matchCollectives(store);
  const auto overview = overviewOf(rows);
  const auto ddp = analyzeDdp(store);
  const auto fsdp = analyzeFsdp(store);
  const auto peaks = memoryPeaks(store);
  const auto alive = aliveAt(store, 3, 5000 * 10000 + 1200);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("analyzed %llu events in %.3f s\n",
              static_cast<unsigned long long>(store.eventCount()), seconds);
  ASSERT_EQ(stats.size(), 5u);  // allreduce, matmul, backward, bucket, all_gather
  EXPECT_EQ(stats[0].name, "allreduce");
  EXPECT_EQ(stats[0].count, static_cast<uint64_t>(kRanks) * kCollectives);
  EXPECT_EQ(rows.size(), static_cast<size_t>(kCollectives));
  EXPECT_EQ(rows.back().ranks.size(), static_cast<size_t>(kRanks));
  EXPECT_EQ(overview.incomplete, 0u);
  EXPECT_TRUE(overview.hangSuspects.empty());
  EXPECT_EQ(ddp.iterations.size(), static_cast<size_t>(kRanks) * kCollectives / 10);
  EXPECT_EQ(ddp.buckets.size(), 2u);
  EXPECT_EQ(fsdp.units.size(), 8u);
  EXPECT_EQ(fsdp.iterations.size(), static_cast<size_t>(kRanks) * kCollectives / 10);
  EXPECT_EQ(peaks.size(), static_cast<size_t>(kRanks));
  // Step 5000 computes layers.4; the other units were gathered and, never
  // resharded here, are still held.
  std::vector<std::string> expected = {"bucket 0 (filling)", "bucket 1 (filling)"};
  for (int u = 0; u < 8; ++u)
    expected.push_back("layers." + std::to_string(u) + (u == 4 ? " (backward)" : " (gathered)"));
  EXPECT_EQ(alive, expected);
}

}  // namespace
}  // namespace ringx::analysis
