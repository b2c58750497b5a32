// Summaries on inputs with known answers: size classes, percentiles, bus
// bandwidth, per-rank communication time, arrival skew on aligned clocks, the
// engines' sections, and the caveats (dropped events, truncated files,
// unaligned clocks). The inputs are real .ringx files read back as
// `ringx-trace summary` reads them.
#include <gtest/gtest.h>

#include "analysis/summary.h"
#include "tools/ringx_trace/summary_text.h"

#include <map>

#include "tests/cpp/trace/trace_fixture.h"
#include "trace/model/ringx_ingest.h"

namespace ringx::analysis {
namespace {

using namespace ringx::trace;

using fixture::RankStream;
using fixture::TempDir;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

bool anyContains(const std::vector<std::string>& lines, const std::string& part) {
  for (const std::string& line : lines) {
    if (contains(line, part)) return true;
  }
  return false;
}

const CollectiveStats* find(const Summary& s, const std::string& op, int cls) {
  for (const CollectiveStats& c : s.collectives) {
    if (c.op == op && c.sizeClass == cls) return &c;
  }
  return nullptr;
}

TEST(Summary, SizeClassesArePowersOfFour) {
  EXPECT_EQ(sizeClass(1), 0);
  EXPECT_EQ(sizeClass(3), 0);
  EXPECT_EQ(sizeClass(4), 1);
  EXPECT_EQ(sizeClass(65536), 8);
  EXPECT_EQ(sizeClass(262143), 8);
  EXPECT_EQ(sizeClass(262144), 9);
  EXPECT_EQ(sizeClass(0), kZeroBytesClass);
  EXPECT_EQ(sizeClass(-1), kUnknownSizeClass);
  EXPECT_EQ(sizeClassLabel(0), "1 B-4 B");
  EXPECT_EQ(sizeClassLabel(4), "256 B-1 KiB");
  EXPECT_EQ(sizeClassLabel(8), "64 KiB-256 KiB");
  EXPECT_EQ(sizeClassLabel(9), "256 KiB-1 MiB");
  EXPECT_EQ(sizeClassLabel(15), "1 GiB-4 GiB");
  EXPECT_EQ(sizeClassLabel(31), "4 EiB-16 EiB");
  EXPECT_EQ(sizeClassLabel(kZeroBytesClass), "0 B");
  EXPECT_EQ(sizeClassLabel(kUnknownSizeClass), "unknown size");
}

TEST(Summary, PercentilesAreNearestRank) {
  std::vector<int64_t> hundred;
  for (int i = 1; i <= 100; ++i) hundred.push_back(i);
  EXPECT_EQ(percentile(hundred, 50), 50);
  EXPECT_EQ(percentile(hundred, 99), 99);
  EXPECT_EQ(percentile(hundred, 100), 100);
  EXPECT_EQ(percentile({1, 2, 3, 4}, 50), 2);
  EXPECT_EQ(percentile({1, 2, 3, 4}, 99), 4);
  EXPECT_EQ(percentile({7}, 50), 7);
  EXPECT_EQ(percentile({}, 50), 0);
}

TEST(Summary, BusBandwidthFactorsFollowNcclTests) {
  EXPECT_DOUBLE_EQ(busBandwidthFactor("allreduce", 4), 1.5);
  EXPECT_DOUBLE_EQ(busBandwidthFactor("allreduce_coalesced", 2), 1.0);
  EXPECT_DOUBLE_EQ(busBandwidthFactor("all_gather", 4), 0.75);
  EXPECT_DOUBLE_EQ(busBandwidthFactor("reduce_scatter", 2), 0.5);
  EXPECT_DOUBLE_EQ(busBandwidthFactor("broadcast", 8), 1.0);
  EXPECT_DOUBLE_EQ(busBandwidthFactor("all_to_all", 8), 1.0);
  EXPECT_DOUBLE_EQ(busBandwidthFactor("allreduce", 1), 0.0);
}

TEST(Summary, FormatsDurations) {
  EXPECT_EQ(formatDuration(850), "850 ns");
  EXPECT_EQ(formatDuration(12345), "12.3 us");
  EXPECT_EQ(formatDuration(4560000), "4.56 ms");
  EXPECT_EQ(formatDuration(1230000000), "1.23 s");
  EXPECT_EQ(formatDuration(999999), "1.00 ms");  // not "1000.0 us"
  EXPECT_EQ(formatDuration(999999999), "1.00 s");
  EXPECT_EQ(formatDuration(-2500), "-2.5 us");
}

// Two ranks: ten 64 KiB allreduces lasting 1..10 us on rank 0 and 11..20 us on
// rank 1, one that failed, a 1 MiB broadcast of 100 us per rank, a barrier.
TraceSet collectivesTrace(const TempDir& dir) {
  for (int r = 0; r < 2; ++r) {
    RankStream s(r, 2);
    int64_t t = 0;
    for (int i = 0; i < 10; ++i) {
      const int64_t duration = (r * 10 + i + 1) * 1000;
      s.collective("allreduce", i, t, t + duration, 65536);
      t += 100000;
    }
    if (r == 0) {
      s.collective("allreduce", 10, t, t + 5000000, 65536, 2, "world",
                   {{arg::kError, "timed out waiting for rank 1"}});
    }
    t += 10000000;
    s.collective("broadcast", 11, t, t + 100000, 1 << 20, 2, "world", {{arg::kRoot, 0}});
    s.collective("barrier", 12, t + 200000, t + 201000, 0);
    s.writeTo(dir.file("rank-" + std::to_string(r) + ".ringx"));
  }
  return readTrace(dir.path());
}

TEST(Summary, CountsAndPercentilesPerOpAndSize) {
  TempDir dir;
  const Summary s = summarize(collectivesTrace(dir));
  ASSERT_EQ(s.collectives.size(), 3u);
  // Most total time first.
  EXPECT_EQ(s.collectives[0].op, "allreduce");
  EXPECT_EQ(s.collectives[1].op, "broadcast");
  EXPECT_EQ(s.collectives[2].op, "barrier");

  const CollectiveStats* ar = find(s, "allreduce", 8);
  ASSERT_NE(ar, nullptr);
  EXPECT_EQ(ar->sizeLabel, "64 KiB-256 KiB");
  EXPECT_EQ(ar->calls, 11u);  // seq 0..10, the failed one included
  EXPECT_EQ(ar->spans, 20u);
  EXPECT_EQ(ar->failed, 1u);
  EXPECT_EQ(ar->bytes, 20u * 65536);
  EXPECT_EQ(ar->totalNs, 210000);  // 1 + 2 + ... + 20 us
  EXPECT_EQ(ar->meanNs, 10500);
  EXPECT_EQ(ar->p50Ns, 10000);
  EXPECT_EQ(ar->p99Ns, 20000);
  EXPECT_EQ(ar->maxNs, 20000);
  // busbw = bytes / time x 2(n-1)/n = bytes / time for n = 2; the median of
  // twenty is the tenth smallest, from the 11 us span.
  EXPECT_NEAR(ar->busbwGBps, 65536.0 / 11000.0, 1e-9);

  const CollectiveStats* bc = find(s, "broadcast", 10);
  ASSERT_NE(bc, nullptr);
  EXPECT_EQ(bc->sizeLabel, "1 MiB-4 MiB");
  EXPECT_EQ(bc->calls, 1u);
  EXPECT_EQ(bc->spans, 2u);
  EXPECT_EQ(bc->p50Ns, 100000);
  EXPECT_NEAR(bc->busbwGBps, 1048576.0 / 100000.0, 1e-9);

  const CollectiveStats* barrier = find(s, "barrier", kZeroBytesClass);
  ASSERT_NE(barrier, nullptr);
  EXPECT_EQ(barrier->sizeLabel, "0 B");
  EXPECT_EQ(barrier->busbwGBps, 0);

  const std::string text = formatSummary(s);
  EXPECT_TRUE(contains(text, "64 KiB-256 KiB")) << text;
  EXPECT_TRUE(contains(text, "5.96")) << text;  // allreduce busbw, GB/s
  EXPECT_TRUE(contains(text, "1 MiB-4 MiB")) << text;
}

TEST(Summary, PerRankCommunicationTimeCountsOverlapsOnce) {
  TempDir dir;
  RankStream(0, 1)
      .instant(Category::kStep, track::kSteps, "step", 0, {{arg::kStep, 1}})
      .span(Category::kUser, track::kCompute, "forward", 0, 1000)
      .collective("allreduce", 0, 100, 200, 8, 1)
      .collective("all_gather", 0, 150, 300, 8, 1, "sub")
      .counter(counters::kRss, 500, 1e6)
      .writeTo(dir.file("rank-0.ringx"));
  const Summary s = summarize(readTrace(dir.path()));
  ASSERT_EQ(s.ranks.size(), 1u);
  const RankStats& r = s.ranks[0];
  EXPECT_EQ(r.events, 5u);
  EXPECT_EQ(r.collectives, 2u);
  EXPECT_EQ(r.tracedNs, 1000);
  EXPECT_EQ(r.commNs, 200);  // [100, 300)
  EXPECT_DOUBLE_EQ(r.commShare, 0.2);
  EXPECT_TRUE(r.clockReference);
  EXPECT_EQ(s.tracedNs, 1000);
  EXPECT_EQ(s.skew.matched, 0u);  // one rank: nothing to match
  const std::string text = formatSummary(s);
  EXPECT_TRUE(contains(text, " 20.0%")) << text;
  EXPECT_TRUE(contains(text, "no collective was recorded on two or more ranks")) << text;
}

// Three ranks on one host; rank 1's clock reads 1 ms ahead (its clock sync says
// so), rank 2 has no samples but shares rank 0's host and so its clock.
TraceSet skewTrace(const TempDir& dir) {
  constexpr int64_t kAhead = 1000000;
  struct Begin {
    int64_t seq;
    int64_t r0, r1, r2;  // aligned begins; -1: not recorded
  };
  const Begin begins[] = {
      {0, 1000, 1500, 1200},  // skew 500, rank 1 last
      {1, 5000, 5100, 5400},  // skew 400, rank 2 last
      {2, 9000, 9800, 9000},  // skew 800, rank 1 last
      {3, 12000, -1, 12000},  // skew 0, no single last rank; incomplete
  };
  RankStream r0(0, 3), r1(1, 3), r2(2, 3);
  r1.clockSync(0, -kAhead, 3000);
  for (const Begin& b : begins) {
    r0.collective("allreduce", b.seq, b.r0, b.r0 + 50, 1024, 3);
    if (b.r1 >= 0) r1.collective("allreduce", b.seq, b.r1 + kAhead, b.r1 + kAhead + 50, 1024, 3);
    r2.collective("allreduce", b.seq, b.r2, b.r2 + 50, 1024, 3);
  }
  // Another group reuses seq 0: matched apart from the world's seq 0.
  r0.collective("broadcast", 0, 20000, 20100, 64, 2, "sub");
  r1.collective("broadcast", 0, 20050 + kAhead, 20100 + kAhead, 64, 2, "sub");
  // Point-to-point carries seqs too, but is not matched across ranks.
  r0.collective("send", 4, 30000, 30100, 64, 3);
  r1.collective("recv", 4, 39000 + kAhead, 39100 + kAhead, 64, 3);
  r0.writeTo(dir.file("rank-0.ringx"));
  r1.writeTo(dir.file("rank-1.ringx"));
  r2.writeTo(dir.file("rank-2.ringx"));
  return readTrace(dir.path());
}

TEST(Summary, ArrivalSkewMatchesByGroupAndSeqOnAlignedClocks) {
  TempDir dir;
  const Summary s = summarize(skewTrace(dir));
  const SkewStats& k = s.skew;
  EXPECT_EQ(k.matched, 5u);
  EXPECT_EQ(k.incomplete, 1u);
  // Skews 0, 50, 400, 500, 800.
  EXPECT_EQ(k.p50Ns, 400);
  EXPECT_EQ(k.p99Ns, 800);
  EXPECT_EQ(k.maxNs, 800);
  EXPECT_EQ(k.maxOp, "allreduce");
  EXPECT_EQ(k.maxGroup, "world");
  EXPECT_EQ(k.maxSeq, 2);
  EXPECT_EQ(k.maxLastRank, 1);
  EXPECT_EQ(k.mostOftenLast, 1);
  EXPECT_EQ(k.mostOftenLastCount, 3u);
  EXPECT_EQ(k.lastArrivals.at(2), 1u);
  EXPECT_EQ(k.lastArrivals.count(0), 0u);
  EXPECT_EQ(k.clockUncertaintyNs, 3000);
  // Rank 2 is unaligned but on rank 0's host: listed, not warned about.
  EXPECT_EQ(s.unalignedRanks, std::vector<int32_t>{2});
  EXPECT_FALSE(anyContains(s.warnings, "clock-sync")) << s.warnings[0];
  // Send and recv are counted as collectives' spans but never matched.
  ASSERT_NE(find(s, "send", 3), nullptr);
  EXPECT_EQ(find(s, "send", 3)->calls, 1u);

  const std::string text = formatSummary(s);
  EXPECT_TRUE(contains(text, "5 collectives matched (1 seen on fewer ranks than their group)"))
      << text;
  EXPECT_TRUE(contains(text, "max 800 ns (allreduce seq 2 in group world, rank 1 last)")) << text;
  EXPECT_TRUE(contains(text, "last to arrive most often: rank 1 (3 of 5); then rank 2: 1")) << text;
  EXPECT_TRUE(contains(text, "clock uncertainty up to 3.0 us")) << text;
}

// Lateness: per rank, its begin minus each matched collective's earliest
// begin, averaged; rank 1 is 500, 100, 800 ns late in the world group and 50 ns
// in "sub", rank 2 200, 400, 0, 0 ns.
TEST(Summary, LatenessAndTimesLastPerRankAndHost) {
  TempDir dir;
  const Summary s = summarize(skewTrace(dir));
  ASSERT_EQ(s.ranks.size(), 3u);
  EXPECT_EQ(s.ranks[0].matchedCollectives, 5u);
  EXPECT_EQ(s.ranks[0].latenessMeanNs, 0);
  EXPECT_EQ(s.ranks[1].matchedCollectives, 4u);
  EXPECT_EQ(s.ranks[1].latenessMeanNs, 1450 / 4);
  EXPECT_EQ(s.ranks[1].timesLast, 3u);  // world seqs 0 and 2, sub seq 0
  EXPECT_EQ(s.ranks[2].matchedCollectives, 4u);
  EXPECT_EQ(s.ranks[2].latenessMeanNs, 150);
  EXPECT_EQ(s.ranks[2].timesLast, 1u);
  ASSERT_EQ(s.hosts.size(), 1u);
  EXPECT_EQ(s.hosts[0].ranks, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(s.hosts[0].latenessMeanNs, (1450 + 600) / 13);
  EXPECT_EQ(s.hosts[0].timesLast, 4u);
  const std::string text = formatSummary(s);
  EXPECT_TRUE(contains(text, "latest ranks: rank 1 (")) << text;
}

// The figures the summary computes rank by rank agree with the viewer's
// matching of whole collectives (matchCollectives over the whole store).
TEST(Summary, ArrivalFiguresAgreeWithTheViewersMatching) {
  TempDir dir;
  const TraceSet set = skewTrace(dir);
  model::TraceStore store;
  model::ingestTraceSet(store, set);
  uint64_t matched = 0, incomplete = 0;
  int64_t maxSkew = 0;
  std::map<int32_t, uint64_t> last;
  for (const CollectiveRow& row : matchCollectives(store)) {
    if (row.ranks.size() < 2) continue;
    ++matched;
    incomplete += row.missingCount > 0;
    maxSkew = std::max(maxSkew, row.arrivalSkewNs);
    if (row.lastArrivalRank >= 0) ++last[row.lastArrivalRank];
  }
  const Summary s = summarize(set);
  EXPECT_EQ(s.skew.matched, matched);
  EXPECT_EQ(s.skew.incomplete, incomplete);
  EXPECT_EQ(s.skew.maxNs, maxSkew);
  EXPECT_EQ(s.skew.lastArrivals, last);
}

// `ringx-trace summary DIR` streams the directory a rank file at a time on
// several threads: the same summary as the trace set read whole.
TEST(Summary, StreamingADirectoryGivesTheSameSummary) {
  TempDir dir;
  const Summary whole = summarize(skewTrace(dir));
  for (unsigned threads : {1u, 3u}) {
    const Summary streamed = summarizeTrace(dir.path(), threads);
    EXPECT_EQ(formatSummary(streamed), formatSummary(whole)) << threads << " threads";
    EXPECT_EQ(formatSummary(streamed, SummaryFormat{0, true}), formatSummary(whole));
  }
}

// Above the rank table's limit the per-rank rows give way to one line; --ranks
// brings them back.
TEST(Summary, LargeJobsPrintHostsNotEveryRank) {
  TempDir dir;
  const Summary s = summarize(skewTrace(dir));
  SummaryFormat small;
  small.rankTableLimit = 2;
  const std::string text = formatSummary(s, small);
  EXPECT_FALSE(contains(text, "Communication time per rank (")) << text;
  EXPECT_TRUE(contains(text, "Communication time per rank: 3 ranks")) << text;
  small.allRanks = true;
  EXPECT_TRUE(contains(formatSummary(s, small), "Communication time per rank (")) << text;
}

TEST(Summary, DroppedTruncatedAndUnalignedAreCalledOut) {
  TempDir dir;
  RankStream(0, 3, "node-a")
      .collective("allreduce", 0, 0, 10, 8, 3)
      .dropped(20, 5)
      .writeTo(dir.file("rank-0.ringx"));
  RankStream r1(1, 3, "node-a");
  r1.collective("allreduce", 0, 0, 10, 8, 3).collective("allreduce", 1, 20, 30, 8, 3);
  fixture::writeFile(dir.file("rank-1.ringx"), r1.bytes().substr(0, r1.bytes().size() - 1));
  RankStream(2, 3, "node-b")
      .collective("allreduce", 0, 0, 10, 8, 3)
      .writeTo(dir.file("rank-2.ringx"));

  const Summary s = summarize(readTrace(dir.path()));
  EXPECT_EQ(s.droppedEvents, 5u);
  EXPECT_EQ(s.truncatedRanks, std::vector<int32_t>{1});
  EXPECT_EQ(s.unalignedRanks, (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(anyContains(s.warnings, "5 events were dropped while recording (rank 0: 5)"));
  EXPECT_TRUE(anyContains(s.warnings, "rank-1.ringx is cut off"));
  EXPECT_TRUE(anyContains(s.warnings, "rank 2 (host node-b) has no clock-sync samples"));
  EXPECT_FALSE(anyContains(s.warnings, "rank 1 (host"));  // same host as rank 0

  const std::string text = formatSummary(s);
  EXPECT_TRUE(contains(text, "Warnings")) << text;
  EXPECT_TRUE(contains(text, "5 events were dropped")) << text;
  EXPECT_TRUE(contains(text, "cut off")) << text;
  EXPECT_TRUE(contains(text, "not aligned (no clock-sync samples)")) << text;
  EXPECT_TRUE(contains(text, "5 dropped")) << text;
}

TEST(Summary, TraceWithoutCollectives) {
  TempDir dir;
  RankStream(0, 1).counter(counters::kRss, 10, 1).writeTo(dir.file("rank-0.ringx"));
  const Summary s = summarize(readTrace(dir.path()));
  EXPECT_TRUE(s.collectives.empty());
  EXPECT_EQ(s.ranks[0].commShare, 0);
  const std::string text = formatSummary(s);
  EXPECT_TRUE(contains(text, "none recorded")) << text;
  EXPECT_FALSE(contains(text, "Warnings")) << text;
}

// Two ranks, three DDP iterations each with two buckets: bucket 0 fully hidden,
// bucket 1 with 40 of its 100 us wire time after backward's compute.
TEST(Summary, DdpPhasesAndBucketsAreSummarised) {
  TempDir dir;
  for (int r = 0; r < 2; ++r) {
    RankStream s(r, 2);
    for (int step = 0; step < 3; ++step) {
      const int64_t t = step * 1000000;
      if (step > 0)
        s.span(Category::kDdp, track::kDdp, "optimizer", t - 30000, t, {{"step", step - 1}});
      s.span(Category::kDdp, track::kDdp, "forward", t, t + 100000, {{"step", step}});
      s.span(Category::kDdp, track::kDdp, "backward", t + 100000, t + 400000, {{"step", step}});
      for (int b = 0; b < 2; ++b) {
        const int64_t ready = t + 150000 + b * 100000;
        s.span(Category::kDdp, std::string(track::kDdpBucketPrefix) + std::to_string(b), "bucket",
               ready - 10000, ready + 200000,
               {{arg::kBucket, b},
                {arg::kStep, step},
                {arg::kBytes, int64_t{4096} << b},
                {arg::kParams, 2 + b},
                {arg::kReadyNs, ready},
                {arg::kLaunchNs, ready + 1000},
                {arg::kWireStartNs, ready + 2000},
                {arg::kWireEndNs, ready + 102000},
                {arg::kExposedNs, b == 0 ? 0 : 40000}});
      }
    }
    s.writeTo(dir.file("rank-" + std::to_string(r) + ".ringx"));
  }
  const Summary summary = summarize(readTrace(dir.path()));
  const DdpAnalysis& d = summary.ddp;
  EXPECT_EQ(d.iterationCount, 6u);
  EXPECT_EQ(d.forwardMeanNs, 100000);
  EXPECT_EQ(d.backwardMeanNs, 300000);
  EXPECT_EQ(d.optimizerMeanNs, 30000);
  EXPECT_EQ(d.exposedMeanNs, 40000);
  EXPECT_NEAR(d.hiddenShare, 1.0 - 40.0 / 200.0, 1e-9);
  ASSERT_EQ(d.buckets.size(), 2u);
  EXPECT_EQ(d.buckets[0].samples, 6u);
  EXPECT_EQ(d.buckets[1].bytes, 8192);
  EXPECT_EQ(d.buckets[1].params, 3);
  EXPECT_EQ(d.buckets[0].launchDelayMeanNs, 1000);
  EXPECT_EQ(d.buckets[1].wireMeanNs, 100000);
  EXPECT_EQ(d.buckets[1].wireP50Ns, 100000);
  EXPECT_NEAR(d.buckets[0].hiddenShare, 1.0, 1e-9);
  EXPECT_NEAR(d.buckets[1].hiddenShare, 0.6, 1e-9);
  const std::string text = formatSummary(summary);
  EXPECT_TRUE(contains(text, "DDP engine (6 iterations")) << text;
  EXPECT_TRUE(contains(text, "communication hidden behind backward: 80%")) << text;
}

// Two ranks, two FSDP iterations: a block gathered in forward (waited 30 us) and
// prefetched in backward (no wait), reduce-scattered once; memory counters.
TEST(Summary, FsdpUnitsAndMemoryAreSummarised) {
  TempDir dir;
  const std::string block = std::string(track::kFsdpUnitPrefix) + "blocks.0";
  for (int r = 0; r < 2; ++r) {
    RankStream s(r, 2);
    for (int step = 0; step < 2; ++step) {
      const int64_t t = step * 1000000;
      s.span(Category::kFsdp, track::kFsdp, "forward", t, t + 200000, {{"step", step}});
      s.span(Category::kFsdp, track::kFsdp, "backward", t + 200000, t + 600000, {{"step", step}});
      s.span(Category::kFsdp, block, "all_gather", t + 1000, t + 51000,
             {{arg::kStep, step},
              {arg::kBytes, 8192},
              {arg::kPrefetched, 0},
              {arg::kWireStartNs, t + 2000},
              {arg::kWireEndNs, t + 42000},
              {arg::kExposedNs, 30000}});
      s.span(Category::kFsdp, block, "forward", t + 51000, t + 151000, {{"step", step}});
      s.span(Category::kFsdp, block, "all_gather", t + 300000, t + 340000,
             {{arg::kStep, step},
              {arg::kBytes, 8192},
              {arg::kPrefetched, 1},
              {arg::kWireStartNs, t + 301000},
              {arg::kWireEndNs, t + 321000},
              {arg::kExposedNs, 0}});
      s.span(Category::kFsdp, block, "backward", t + 340000, t + 540000, {{"step", step}});
      s.span(Category::kFsdp, block, "reduce_scatter", t + 540000, t + 600000,
             {{arg::kStep, step},
              {arg::kBytes, 8192},
              {arg::kWireStartNs, t + 541000},
              {arg::kWireEndNs, t + 591000}});
      s.counter(counters::kFsdpShardedBytes, t, 4096);
      s.counter(counters::kFsdpPeakBytes, t + 500000, 20000 + r * 1000);
    }
    s.writeTo(dir.file("rank-" + std::to_string(r) + ".ringx"));
  }
  const Summary summary = summarize(readTrace(dir.path()));
  const FsdpAnalysis& f = summary.fsdp;
  EXPECT_EQ(f.iterationCount, 4u);
  EXPECT_EQ(f.forwardMeanNs, 200000);
  EXPECT_EQ(f.backwardMeanNs, 400000);
  EXPECT_EQ(f.exposedMeanNs, 30000);
  EXPECT_EQ(summary.fsdpPeakBytes, 21000);
  EXPECT_EQ(summary.fsdpShardedBytes, 4096);
  ASSERT_EQ(f.units.size(), 1u);
  const FsdpUnitAnalysis& u = f.units[0];
  EXPECT_EQ(u.unit, "blocks.0");
  EXPECT_EQ(u.gathers, 8u);
  EXPECT_EQ(u.gatherBytes, 8192);
  EXPECT_EQ(u.gatherWireMeanNs, 30000);
  EXPECT_EQ(u.exposedMeanNs, 15000);
  EXPECT_NEAR(u.prefetchedShare, 0.5, 1e-9);
  EXPECT_EQ(u.reduceScatters, 4u);
  EXPECT_EQ(u.reduceScatterMeanNs, 50000);
  EXPECT_EQ(u.forwardMeanNs, 100000);
  EXPECT_EQ(u.backwardMeanNs, 200000);
  const std::string text = formatSummary(summary);
  EXPECT_TRUE(contains(text, "FSDP engine (4 iterations")) << text;
  EXPECT_TRUE(contains(text, "peak held 20.5 KiB")) << text;
  EXPECT_TRUE(contains(text, "blocks.0")) << text;
}

}  // namespace
}  // namespace ringx::analysis
