// Statistics of an area of the timeline (analysis/area_stats.h) on a store whose every figure
// is worked out in the comments.
#include "analysis/area_stats.h"

#include <gtest/gtest.h>

#include <sstream>

#include "tests/cpp/trace/model/sample_store.h"

namespace ringx::analysis {
namespace {

using model::testing::addSpan;

// Rank 0: "step" [0, 100) holding "fwd" [10, 40) and "bwd" [50, 90) one level down; rank 1:
// "step" [0, 120) holding "fwd" [10, 50). Both ranks: an allreduce of 1000 bytes, bucket 0,
// group "world" of 2 ranks, at [100, 110) and [105, 125) on comm:world.
model::TraceStore areaStore() {
  model::TraceStore store;
  addSpan(store, 0, "compute", "user", "step", 0, 100);
  addSpan(store, 0, "compute", "user", "fwd", 10, 40);
  addSpan(store, 0, "compute", "user", "bwd", 50, 90);
  addSpan(store, 1, "compute", "user", "step", 0, 120);
  addSpan(store, 1, "compute", "user", "fwd", 10, 50);
  for (int32_t r : {0, 1}) {
    addSpan(store, r, "comm:world", "collective", "allreduce", r == 0 ? 100 : 105,
            r == 0 ? 110 : 125, {{"bytes", 1000}, {"bucket", 0}, {"group_size", 2}},
            {{"group", "world"}});
  }
  store.finalize();
  return store;
}

TEST(AreaStats, TheWholeTraceByNameWithSelfTime) {
  const model::TraceStore store = areaStore();
  const std::vector<AreaRow> rows = areaStats(store, Area{}, AreaGroupBy::kName);
  ASSERT_EQ(rows.size(), 4u);
  // step: 100 + 120 = 220, self 220 - (30 + 40) - 40 = 110; p50 of {100, 120} (nearest rank) 100.
  EXPECT_EQ(rows[0].key, "step");
  EXPECT_EQ(rows[0].count, 2u);
  EXPECT_EQ(rows[0].totalNs, 220);
  EXPECT_EQ(rows[0].selfNs, 110);
  EXPECT_EQ(rows[0].p50Ns, 100);
  EXPECT_EQ(rows[0].maxNs, 120);
  EXPECT_EQ(rows[1].key, "fwd");  // 30 + 40
  EXPECT_EQ(rows[1].totalNs, 70);
  // bwd 40 and allreduce 10 + 20 = 30: 40 first.
  EXPECT_EQ(rows[2].key, "bwd");
  EXPECT_EQ(rows[3].key, "allreduce");
  EXPECT_EQ(rows[3].bytes, 2000);
  // busbw at 2 ranks: factor 1; 1000 B over 10 and 20 ns: 100 and 50 GB/s, median (lower) 50.
  EXPECT_DOUBLE_EQ(rows[3].busbwGBps, 50);
}

TEST(AreaStats, SomeTracksOverARangeGroupedEveryWay) {
  const model::TraceStore store = areaStore();
  Area area;
  const model::RankData& r0 = *store.findRank(0);
  const model::RankData& r1 = *store.findRank(1);
  for (uint32_t t = 0; t < r0.tracks.size(); ++t)
    if (store.str(r0.tracks[t].name) == "compute") area.tracks.emplace_back(0, t);
  for (uint32_t t = 0; t < r1.tracks.size(); ++t)
    if (store.str(r1.tracks[t].name) == "comm:world") area.tracks.emplace_back(1, t);
  area.t0 = 45;
  area.t1 = 104;  // rank 0's step and bwd overlap it, its fwd does not; rank 1's allreduce not
  std::vector<AreaRow> rows = areaStats(store, area, AreaGroupBy::kName);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].key, "step");
  EXPECT_EQ(rows[0].totalNs, 100);  // whole spans count
  EXPECT_EQ(rows[1].key, "bwd");
  area.t1 = 130;  // now rank 1's allreduce too
  rows = areaStats(store, area, AreaGroupBy::kRank);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].key, "rank 0");
  EXPECT_EQ(rows[0].count, 2u);
  EXPECT_EQ(rows[1].key, "rank 1");
  EXPECT_EQ(rows[1].totalNs, 20);
  rows = areaStats(store, area, AreaGroupBy::kBucketOrUnit);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].key, "(none)");
  EXPECT_EQ(rows[1].key, "bucket 0");
  rows = areaStats(store, area, AreaGroupBy::kGroup);
  EXPECT_EQ(rows.back().key, "world");
  rows = areaStats(store, area, AreaGroupBy::kSizeClass);
  EXPECT_EQ(rows.back().key, "256 B-1 KiB");
  rows = areaStats(store, area, AreaGroupBy::kTrack);
  EXPECT_EQ(rows[0].key, "compute");
  std::ostringstream tsv;
  writeAreaTable(rows, AreaGroupBy::kTrack, tsv, Delimiter::kTsv);
  EXPECT_EQ(tsv.str(),
            "track\tcount\tfailed\ttotal_ns\tself_ns\tmean_ns\tp50_ns\tp99_ns\tmax_ns\tbytes\t"
            "busbw_gbps\n"
            "compute\t2\t0\t140\t70\t70\t40\t100\t100\t0\t\n"
            "comm:world\t1\t0\t20\t20\t20\t20\t20\t20\t1000\t50\n");
}

// Durations 1, 5, 9, 10, 11, 100 and 1000 ns of "op", one decade per bin: [1, 10) holds 3,
// [10, 100) 2, [100, 1000) 1, [1000, 10000) 1; bin [10, 100)'s events longest first are 11, 10.
TEST(DurationHistogram, LogBinsCountEachSpanOnceAndListABinsLongestFirst) {
  model::TraceStore store;
  int64_t at = 0;
  for (int64_t d : {5, 1000, 9, 10, 1, 100, 11}) {
    addSpan(store, 0, "t", "user", "op", at, at + d);
    at += 2000;
  }
  addSpan(store, 0, "t", "user", "other", at, at + 50);
  store.finalize();
  const uint32_t op = store.strings().find("op");
  const DurationHistogram h = durationHistogram(store, Area{}, op, 1);
  ASSERT_EQ(h.bins.size(), 4u);
  EXPECT_EQ(h.spans, 7u);
  EXPECT_EQ(h.minNs, 1);
  EXPECT_EQ(h.maxNs, 1000);
  const uint64_t counts[] = {3, 2, 1, 1};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(h.bins[i].count, counts[i]) << i;
    EXPECT_EQ(h.bins[i].highNs, h.bins[i].lowNs * 10) << i;
  }
  const std::vector<SpanRef> tens = spansWithDuration(store, Area{}, op, 10, 100, 10);
  ASSERT_EQ(tens.size(), 2u);
  const model::RankData& r = *store.findRank(0);
  EXPECT_EQ(r.tracks[tens[0].track].levels[tens[0].level][tens[0].index].duration(), 11);
  EXPECT_EQ(r.tracks[tens[1].track].levels[tens[1].level][tens[1].index].duration(), 10);
  // Every span when no name is given: "other" (50 ns) lands in [10, 100).
  EXPECT_EQ(durationHistogram(store, Area{}, 0, 1).bins[1].count, 3u);
}

}  // namespace
}  // namespace ringx::analysis
