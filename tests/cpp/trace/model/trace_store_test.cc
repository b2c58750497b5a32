// The trace model's store: level assignment, the level-of-detail walk that keeps a
// million events cheap to draw, the busy time of folded blocks, counter
// decimation, and ringx ingest with clock alignment.
#include "trace/model/trace_store.h"

#include <gtest/gtest.h>

#include "tests/cpp/trace/trace_fixture.h"
#include "trace/model/loader.h"
#include "trace/model/ringx_ingest.h"
#include "trace/read/trace_dir.h"

namespace ringx::model {
namespace {

using trace::Category;
namespace fx = trace::fixture;

Span span(int64_t begin, int64_t end) {
  Span s;
  s.begin = begin;
  s.end = end;
  return s;
}

TEST(TraceStore, NestedSpansStackOnLevelsAndLevelsAreDisjoint) {
  TraceStore store;
  RankData& r = store.rank(0);
  const uint32_t t = store.track(r, "ddp");
  store.addSpan(r, t, span(100, 200));  // child, added first on purpose
  store.addSpan(r, t, span(0, 1000));   // parent
  store.addSpan(r, t, span(300, 400));  // second child
  store.addSpan(r, t, span(350, 360));  // grandchild
  store.addSpan(r, t, span(2000, 3000));
  store.finalize();
  const Track& track = store.ranks()[0].tracks[0];
  ASSERT_EQ(track.levels.size(), 3u);
  EXPECT_EQ(track.levels[0].size(), 2u);  // parent and the later span
  EXPECT_EQ(track.levels[1].size(), 2u);  // the two children
  EXPECT_EQ(track.levels[2].size(), 1u);
  for (const auto& level : track.levels)
    for (size_t i = 1; i < level.size(); ++i) EXPECT_LE(level[i - 1].end, level[i].begin);
  EXPECT_EQ(store.beginNs(), 0);
  EXPECT_EQ(store.endNs(), 3000);
  EXPECT_EQ(store.eventCount(), 5u);
}

TEST(TraceStore, SpansAddedInBatchesGetTheLevelsOfOneBatch) {
  // Nested and disjoint spans, handed over in batches as a live stream does:
  // mostly later than what is there (the appending path), sometimes earlier
  // (parents arrive after their children: the path that lays out anew).
  std::vector<Span> spans;
  uint64_t x = 12345;
  auto next = [&] { return (x = x * 6364136223846793005ull + 1442695040888963407ull) >> 33; };
  int64_t t = 0;
  for (int i = 0; i < 3000; ++i) {
    t += int64_t(next() % 50);
    const int64_t w = int64_t(next() % 200) + 1;
    spans.push_back(span(t, t + w));
    if (next() % 4 == 0) spans.push_back(span(t + 1, t + 1 + w / 2));  // a child
  }
  TraceStore once, batched;
  RankData& a = once.rank(0);
  RankData& b = batched.rank(0);
  const uint32_t ta = once.track(a, "comm:world"), tb = batched.track(b, "comm:world");
  for (const Span& s : spans) once.addSpan(a, ta, s);
  once.finalize();
  for (size_t i = 0; i < spans.size(); i += 97) {
    const size_t end = std::min(spans.size(), i + 97);
    // Within a batch, the last spans first: arrival order is not begin order.
    for (size_t j = end; j-- > i;) batched.addSpan(b, tb, spans[j]);
    batched.finalize();
  }
  auto expectSameLevels = [&] {
    const Track& x1 = once.ranks()[0].tracks[0];
    const Track& x2 = batched.ranks()[0].tracks[0];
    EXPECT_EQ(x1.spanCount, x2.spanCount);
    ASSERT_EQ(x1.levels.size(), x2.levels.size());
    for (size_t l = 0; l < x1.levels.size(); ++l) {
      ASSERT_EQ(x1.levels[l].size(), x2.levels[l].size()) << "level " << l;
      for (size_t i = 0; i < x1.levels[l].size(); ++i) {
        EXPECT_EQ(x1.levels[l][i].begin, x2.levels[l][i].begin);
        EXPECT_EQ(x1.levels[l][i].end, x2.levels[l][i].end);
      }
    }
  };
  EXPECT_EQ(batched.ranks()[0].tracks[0].spanCount, spans.size());
  expectSameLevels();
  // A late parent of everything: laid out anew on both.
  once.addSpan(once.rank(0), ta, span(-1, t + 1000));
  batched.addSpan(batched.rank(0), tb, span(-1, t + 1000));
  once.finalize();
  batched.finalize();
  EXPECT_EQ(batched.ranks()[0].tracks[0].levels[0].size(), 1u);
  expectSameLevels();
}

TEST(TraceStore, TracksAreOrderedByKindThenNaturally) {
  TraceStore store;
  RankData& r = store.rank(3);
  for (const char* name : {"ddp:bucket10", "comm:world", "ddp:bucket2", "compute", "steps", "ddp"})
    store.addSpan(r, store.track(r, name), span(0, 1));
  store.finalize();
  std::vector<std::string> names;
  for (const auto& t : store.ranks()[0].tracks) names.emplace_back(store.str(t.name));
  EXPECT_EQ(names, (std::vector<std::string>{"steps", "compute", "comm:world", "ddp", "ddp:bucket2",
                                             "ddp:bucket10"}));
}

TEST(VisitLevel, WideSpansComeOneByOneAndNarrowRunsFold) {
  std::vector<Span> level;
  // 1000 spans of 10 ns every 20 ns, then one wide span.
  for (int i = 0; i < 1000; ++i) level.push_back(span(i * 20, i * 20 + 10));
  level.push_back(span(30000, 40000));
  // Zoomed in (minNs 1): every span in [0, 100] is its own item.
  std::vector<LevelItem> items;
  visitLevel(level, 0, 100, 1, [&](const LevelItem& it) { items.push_back(it); });
  ASSERT_EQ(items.size(), 6u);  // begins 0, 20, 40, 60, 80, 100
  EXPECT_EQ(items[5].first, 5u);
  for (const auto& it : items) EXPECT_EQ(it.count, 1u);

  // Zoomed out (one pixel = 1000 ns): the 1000 narrow spans fold into one block,
  // the wide one stays itself; far fewer items than spans.
  items.clear();
  visitLevel(level, 0, 50000, 1000, [&](const LevelItem& it) { items.push_back(it); });
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].count, 1000u);
  EXPECT_EQ(items[0].begin, 0);
  EXPECT_EQ(items[0].end, 999 * 20 + 10);
  EXPECT_EQ(items[1].count, 1u);
  EXPECT_EQ(items[1].begin, 30000);
}

TEST(VisitLevel, CoversEverySpanExactlyOnceAtAnyZoom) {
  std::vector<Span> level;
  int64_t t = 0;
  for (int i = 0; i < 5000; ++i) {  // irregular widths and gaps
    const int64_t w = (i * 7919) % 97 + 1, gap = (i * 104729) % 53;
    level.push_back(span(t, t + w));
    t += w + gap;
  }
  for (int64_t minNs : {1, 10, 100, 1000, 100000}) {
    uint64_t covered = 0;
    uint32_t next = 0;
    visitLevel(level, 0, t, minNs, [&](const LevelItem& it) {
      EXPECT_EQ(it.first, next) << "minNs " << minNs;
      next = it.first + it.count;
      covered += it.count;
    });
    EXPECT_EQ(covered, level.size()) << "minNs " << minNs;
  }
}

TEST(VisitLevel, OnlyTheVisibleRangeIsVisited) {
  std::vector<Span> level;
  for (int i = 0; i < 100; ++i) level.push_back(span(i * 100, i * 100 + 50));
  std::vector<uint32_t> firsts;
  visitLevel(level, 1020, 1260, 1, [&](const LevelItem& it) { firsts.push_back(it.first); });
  EXPECT_EQ(firsts, (std::vector<uint32_t>{10, 11, 12}));  // 10 ends at 1050 >= 1020
}

// Folded blocks are shaded by the time their spans cover: the prefix sums must
// match a plain sum for every block, after appends (a live stream) and after a
// batch that lands before existing spans (a re-layout) alike.
TEST(VisitLevel, BusyTimeOfEveryFoldedBlockIsTheSumOfItsSpans) {
  TraceStore store;
  RankData& r = store.rank(0);
  const uint32_t t = store.track(r, "compute");
  auto addBurst = [&](int64_t from, int count, int64_t length, int64_t gap) {
    for (int i = 0; i < count; ++i)
      store.addSpan(r, t, span(from + i * (length + gap), from + i * (length + gap) + length));
  };
  addBurst(0, 100, 9, 1);      // dense: 90% busy
  addBurst(10000, 50, 1, 99);  // sparse: 1% busy
  store.finalize();
  addBurst(20000, 40, 5, 5);  // appended after everything: the live path
  store.finalize();
  addBurst(-5000, 10, 50, 50);  // before everything: laid out anew
  store.finalize();
  const Track& track = store.ranks()[0].tracks[0];
  ASSERT_EQ(track.busy.size(), track.levels.size());
  ASSERT_EQ(track.busy[0].size(), track.levels[0].size() / kBusyStride + 1);
  for (int64_t minNs : {1, 20, 150, 1000, 100000}) {
    visitLevel(track.levels[0], -10000, 40000, minNs, [&](const LevelItem& item) {
      int64_t sum = 0;
      for (uint32_t i = item.first; i < item.first + item.count; ++i)
        sum += track.levels[0][i].duration();
      EXPECT_EQ(busyNs(track, 0, item), sum) << "minNs " << minNs << " first " << item.first;
    });
  }
  // At a zoom that folds each burst into a block, the dense one is busier.
  std::vector<double> shares;
  visitLevel(track.levels[0], 0, 15000, 200, [&](const LevelItem& item) {
    shares.push_back(double(busyNs(track, 0, item)) / double(item.end - item.begin));
  });
  ASSERT_EQ(shares.size(), 2u);
  EXPECT_NEAR(shares[0], 0.9, 0.01);
  EXPECT_NEAR(shares[1], 0.01, 0.002);
}

TEST(DecimateCounter, ColumnsHoldMinMaxAndRepeatTheValueInForce) {
  CounterSeries c;
  c.times = {0, 10, 20, 25, 90};
  c.values = {1, 5, 2, 8, 3};
  auto cols = decimateCounter(c, 0, 100, 10);  // 10 ns per column
  ASSERT_EQ(cols.size(), 10u);
  EXPECT_TRUE(cols[0].valid);
  EXPECT_EQ(cols[0].min, 1);
  EXPECT_EQ(cols[0].max, 5);  // 0 and 10 (column end inclusive)
  EXPECT_EQ(cols[2].max, 8);  // 25
  EXPECT_EQ(cols[5].min, 8);  // nothing new: the value in force
  EXPECT_EQ(cols[5].max, 8);
  EXPECT_EQ(cols[8].max, 8);
  EXPECT_EQ(cols[9].min, 3);
}

TEST(TraceStore, ACountersPeakIsItsEarliestMaximumWhateverTheArrivalOrder) {
  TraceStore store;
  RankData& r = store.rank(0);
  store.addCounter(r, "bytes", 50, 7);
  store.addCounter(r, "bytes", 30, 9);  // out of order, and the maximum
  store.addCounter(r, "bytes", 40, 2);
  store.addCounter(r, "bytes", 10, 9);  // the same maximum, earlier
  store.finalize();
  const CounterSeries* c = store.ranks()[0].findCounter(store.strings().find("bytes"));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->times, (std::vector<int64_t>{10, 30, 40, 50}));
  EXPECT_EQ(c->maxValue, 9);
  EXPECT_EQ(c->maxTime, 10);
  store.addCounter(store.rank(0), "bytes", 60, -1);  // a later, lower sample changes nothing
  store.finalize();
  EXPECT_EQ(store.ranks()[0].findCounter(store.strings().find("bytes"))->maxTime, 10);
}

TEST(RingxIngest, EventsAreAlignedToRankZerosClockWithTheirTimeArgs) {
  fx::TempDir dir;
  fx::RankStream r0(0);
  r0.collective("allreduce", 0, 1000, 2000, 4096);
  r0.counter("rss_bytes", 1500, 1e6);
  r0.writeTo(dir.file("rank-0.ringx"));
  fx::RankStream r1(1);
  r1.clockSync(0, 500, 10);  // rank 0's clock = rank 1's + 500
  r1.collective("allreduce", 0, 700, 1900, 4096);
  r1.instant(Category::kStep, "steps", "step", 800);
  r1.writeTo(dir.file("rank-1.ringx"));

  TraceStore store;
  loadTraces(store, {dir.path()});
  ASSERT_EQ(store.ranks().size(), 2u);
  const RankData& one = store.ranks()[1];
  EXPECT_EQ(one.rank, 1);
  EXPECT_TRUE(one.clockAligned);
  const int comm = one.findTrack(store.strings().find("comm:world"));
  ASSERT_GE(comm, 0);
  const Span& s = one.tracks[comm].levels[0][0];
  EXPECT_EQ(s.begin, 1200);
  EXPECT_EQ(s.end, 2400);
  EXPECT_EQ(store.str(s.name), "allreduce");
  EXPECT_EQ(store.intArg(one, s, "bytes"), 4096);
  EXPECT_EQ(store.intArg(one, s, "enqueue_ns"), 700 - 100 + 500);  // a time: aligned too
  EXPECT_EQ(store.stringArg(one, s, "group"), "world");
  EXPECT_EQ(store.categories()[s.category], "collective");
  const int steps = one.findTrack(store.strings().find("steps"));
  ASSERT_GE(steps, 0);
  EXPECT_EQ(one.tracks[steps].instants[0].time, 1300);
  const CounterSeries* rss = store.ranks()[0].findCounter(store.strings().find("rss_bytes"));
  ASSERT_NE(rss, nullptr);
  EXPECT_EQ(rss->maxValue, 1e6);
  EXPECT_EQ(store.beginNs(), 1000);
  EXPECT_EQ(store.endNs(), 2400);
}

TEST(RingxIngest, IncrementalIngestContinuesWhereItStopped) {
  fx::RankStream r0(0);
  r0.collective("allreduce", 0, 1000, 2000, 4096);
  trace::RankTrace rank;
  trace::Decoder dec(&rank);
  dec.feed(r0.bytes().data(), r0.bytes().size());
  TraceStore store;
  size_t next = ingestRankTrace(store, rank, trace::ClockModel::reference());
  store.finalize();
  EXPECT_EQ(store.eventCount(), 1u);
  fx::RankStream more(0);
  more.collective("allreduce", 1, 500, 600, 8);  // earlier than what is there: re-sorted
  const std::string& bytes = more.bytes();
  trace::RankTrace second;
  trace::Decoder dec2(&second);
  dec2.feed(bytes.data(), bytes.size());
  rank.events.push_back(second.events[0]);
  // The second stream's ids differ; copy its strings over for this test.
  rank.strings = second.strings;
  rank.args = second.args;
  rank.events[0].firstArg = 0;
  next = ingestRankTrace(store, rank, trace::ClockModel::reference(), next);
  EXPECT_EQ(next, 2u);
  store.finalize();
  EXPECT_EQ(store.eventCount(), 2u);
  const auto& level = store.ranks()[0].tracks[0].levels[0];
  ASSERT_EQ(level.size(), 2u);
  EXPECT_EQ(level[0].begin, 500);
  EXPECT_EQ(store.beginNs(), 500);
  // The rank's own extent is kept up to date with the store's.
  EXPECT_EQ(store.ranks()[0].beginNs, 500);
  EXPECT_EQ(store.ranks()[0].endNs, 2000);
}

TEST(Loader, UnreadableInputIsAClearError) {
  fx::TempDir dir;
  TraceStore store;
  EXPECT_THROW(loadTraces(store, {dir.file("nope")}), IoError);
  fx::writeFile(dir.file("junk.bin"), "hello, not a trace");
  try {
    loadTraces(store, {dir.file("junk.bin")});
    FAIL() << "no error";
  } catch (const trace::FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("neither a ringx trace"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ringx::model
