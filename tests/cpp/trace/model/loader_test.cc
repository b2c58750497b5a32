// Loading at scale: packed arguments read back as they went in; a trace loaded
// on several threads is the same store as one loaded on one (spans, args,
// counters, flows); collective arrows stop above kMaxRanksWithCollectiveArrows;
// a background load reports its progress, can be held at a file, and hands its
// error to take().
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include "base/text.h"
#include "tests/cpp/trace/trace_fixture.h"
#include "trace/model/aggregate_lanes.h"
#include "trace/model/loader.h"
#include "trace/model/trace_index.h"

namespace ringx::model {
namespace {

using trace::Category;
namespace fx = trace::fixture;
using fx::kMs;

TEST(ArgList, PackedArgumentsReadBackAsTheyWentIn) {
  TraceStore store;
  RankData& rank = store.rank(0);
  std::vector<ArgValue> in = {
      ArgValue::ofInt(1, 0),
      ArgValue::ofInt(2, -1),
      ArgValue::ofInt(3, std::numeric_limits<int64_t>::min()),
      ArgValue::ofInt(4, std::numeric_limits<int64_t>::max()),
      ArgValue::ofDouble(5, -0.25),
      ArgValue::ofDouble(6, std::numeric_limits<double>::infinity()),
      ArgValue::ofString(7, 123456),
      ArgValue::ofInt(std::numeric_limits<uint32_t>::max(), 1700000000123456789),
  };
  // Past ArgList::kInline the list spills to the heap.
  for (uint32_t k = 0; k < ArgList::kInline + 6; ++k) in.push_back(ArgValue::ofInt(100 + k, k));
  const uint32_t first = store.addArgs(rank, in.data(), 3);
  const uint32_t second = store.addArgs(rank, in.data(), in.size());
  EXPECT_EQ(first, 0u);
  EXPECT_GT(second, first);
  const ArgList short_(rank, first, 3);
  ASSERT_EQ(short_.size(), 3u);
  EXPECT_EQ(short_[1].intValue, -1);
  const ArgList list(rank, second, uint16_t(in.size()));
  ASSERT_EQ(list.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(list[i].key, in[i].key) << i;
    ASSERT_EQ(list[i].kind, in[i].kind) << i;
    if (in[i].kind == ArgKind::kInt) {
      EXPECT_EQ(list[i].intValue, in[i].intValue) << i;
    } else if (in[i].kind == ArgKind::kDouble) {
      EXPECT_EQ(list[i].doubleValue, in[i].doubleValue) << i;
    } else {
      EXPECT_EQ(list[i].stringId, in[i].stringId) << i;
    }
  }
  EXPECT_EQ(list.find(6)->doubleValue, std::numeric_limits<double>::infinity());
  EXPECT_EQ(list.find(0), nullptr);
  EXPECT_EQ(list.find(99), nullptr);
  // Small values take a byte or two each: the point of packing.
  EXPECT_LT(rank.argBytes.size(), in.size() * 4 + 40);
}

// `ranks` ranks on hosts of 4, each with compute spans, collectives (with
// steady-time args), nested DDP spans and a counter; rank r's clock is r ms ahead.
void writeJob(const fx::TempDir& dir, int ranks) {
  for (int r = 0; r < ranks; ++r) {
    fx::RankStream s(r, ranks, "node" + std::to_string(r / 4));
    if (r > 0) s.clockSync(0, -r * kMs, 100);
    for (int i = 0; i < 20; ++i) {
      const int64_t t = r * kMs + i * 10 * kMs;
      s.span(Category::kUser, "compute", "aten::mm", t, t + 3 * kMs);
      s.span(Category::kDdp, "ddp", "backward", t + 3 * kMs, t + 8 * kMs, {{"step", i}});
      s.span(Category::kDdp, "ddp:bucket0", "bucket", t + 4 * kMs, t + 7 * kMs,
             {{"bucket", 0}, {"ready_ns", t + 4 * kMs}, {"ratio", 0.5}});
      s.collective("allreduce", i, t + 5 * kMs + r * 1000, t + 7 * kMs, 1 << 20, ranks);
      s.counter("rss_bytes", t, 1e9 + i);
    }
    s.writeTo(dir.file("rank-" + std::to_string(r) + ".ringx"));
  }
  fx::writeFile(dir.file("manifest.json"), fx::manifestJson(ranks));
}

// Every event of a store as text, in a canonical order.
std::vector<std::string> describe(const TraceStore& store) {
  std::vector<std::string> out;
  for (const RankData& rank : store.ranks()) {
    for (const Track& track : rank.tracks)
      for (size_t l = 0; l < track.levels.size(); ++l)
        for (const Span& s : track.levels[l]) {
          std::string line = strCat(rank.rank, " ", rank.host, " ", store.str(track.name), " L", l,
                                    " ", store.str(s.name), " ", s.begin, "-", s.end);
          for (const ArgValue& a : ArgList(rank, s))
            line += strCat(" ", store.str(a.key), "=", store.argText(a));
          out.push_back(line);
        }
    for (const CounterSeries& c : rank.counters)
      for (size_t i = 0; i < c.times.size(); ++i)
        out.push_back(strCat(rank.rank, " ", store.str(c.name), "@", c.times[i], "=", c.values[i]));
  }
  for (const Flow& f : store.flows())
    out.push_back(strCat("flow ", f.from.rank, "@", f.from.time, ">", f.to.rank, "@", f.to.time));
  return out;
}

TEST(ParallelLoad, SeveralThreadsBuildTheStoreOneThreadBuilds) {
  fx::TempDir dir;
  writeJob(dir, 12);
  TraceStore one, four;
  loadTraces(one, {dir.path()}, nullptr, 1);
  LoadProgress progress;
  loadTraces(four, {dir.path()}, &progress, 4);
  EXPECT_EQ(describe(one), describe(four));
  EXPECT_EQ(four.ranks().size(), 12u);
  EXPECT_EQ(four.eventCount(), 12u * 20 * 5);
  EXPECT_EQ(progress.filesDone.load(), 12u);
  EXPECT_EQ(progress.filesTotal.load(), 12u);
  EXPECT_EQ(progress.events.load(), four.eventCount());
  EXPECT_EQ(progress.bytesDone.load(), progress.bytesTotal.load());
  EXPECT_GT(progress.bytesTotal.load(), 0u);
  // Rank 11's clock is 11 ms ahead: aligned, its first collective begins at
  // 11 ms + 5 ms + 11 us on its own clock, 5 ms + 11 us on rank 0's.
  const RankData* r11 = four.findRank(11);
  ASSERT_NE(r11, nullptr);
  const Track& comm = r11->tracks[size_t(r11->findTrack(four.strings().find("comm:world")))];
  EXPECT_EQ(comm.levels[0][0].begin, 5 * kMs + 11000);
  // Twelve ranks are under the arrows' limit: 11 arrows per collective.
  EXPECT_EQ(four.flows().size(), 20u * 11);
}

TEST(ParallelLoad, NoCollectiveArrowsAboveTheLimit) {
  fx::TempDir dir;
  writeJob(dir, int(kMaxRanksWithCollectiveArrows) + 1);
  TraceStore store;
  loadTraces(store, {dir.path()});
  EXPECT_EQ(store.ranks().size(), kMaxRanksWithCollectiveArrows + 1);
  EXPECT_TRUE(store.flows().empty());
}

TEST(ParallelLoad, ARankInTwoInputsKeepsBothSetsOfEvents) {
  fx::TempDir dir;
  writeJob(dir, 2);
  TraceStore store;
  loadTraces(store, {dir.path(), dir.file("rank-1.ringx")}, nullptr, 2);
  ASSERT_EQ(store.ranks().size(), 2u);
  EXPECT_EQ(store.findRank(1)->events, 2u * 20 * 5);
  // The second copy's args were moved behind the first's: still readable.
  for (const Track& track : store.findRank(1)->tracks)
    for (const auto& level : track.levels)
      for (const Span& s : level) {
        if (track.kind != TrackKind::kComm) continue;
        EXPECT_EQ(ArgList(*store.findRank(1), s).find(store.strings().find("bytes"))->intValue,
                  1 << 20);
      }
}

// A trace opened as an index holds placeholders and the lanes; the lanes are
// the ones a full load builds, and a rank loaded later is the full load's rank.
// The index files of these tests go to a directory of their own.
class CacheDir {
 public:
  CacheDir() { ::setenv("RINGX_VIEWER_CACHE_DIR", dir_.path().c_str(), 1); }
  ~CacheDir() { ::unsetenv("RINGX_VIEWER_CACHE_DIR"); }
  const fx::TempDir& dir() const { return dir_; }

 private:
  fx::TempDir dir_;
};

TEST(IndexedLoad, KeepsPlaceholdersAndLanesAndLoadsRanksOnDemand) {
  CacheDir cache;
  fx::TempDir dir;
  writeJob(dir, 40);
  TraceStore full, indexed;
  loadTraces(full, {dir.path()}, nullptr, 2);
  const AggregateLanes fullLanes(full);
  LoadProgress progress;
  indexTrace(indexed, dir.path(), &progress, 2);
  EXPECT_EQ(progress.filesDone.load(), 40u);
  ASSERT_EQ(indexed.ranks().size(), 40u);
  EXPECT_EQ(indexed.eventCount(), full.eventCount());
  EXPECT_EQ(indexed.beginNs(), full.beginNs());
  EXPECT_EQ(indexed.endNs(), full.endNs());
  for (const RankData& r : indexed.ranks()) {
    EXPECT_FALSE(r.eventsLoaded);
    EXPECT_TRUE(r.tracks.empty());
    EXPECT_EQ(r.host, full.findRank(r.rank)->host);
  }
  const AggregateLanes* lanes = indexed.aggregates();
  ASSERT_NE(lanes, nullptr);
  EXPECT_TRUE(lanes->fromFiles());
  ASSERT_EQ(lanes->groups().size(), fullLanes.groups().size());
  for (size_t g = 0; g < lanes->groups().size(); ++g) {
    EXPECT_EQ(lanes->groups()[g].label, fullLanes.groups()[g].label);
    EXPECT_EQ(lanes->groups()[g].marks.size(), fullLanes.groups()[g].marks.size());
    for (auto kind : {AggregateLanes::kCompute, AggregateLanes::kComm}) {
      float a[16], b[16];
      lanes->busyShares(g, kind, full.beginNs(), full.endNs(), 16, a);
      fullLanes.busyShares(g, kind, full.beginNs(), full.endNs(), 16, b);
      for (int c = 0; c < 16; ++c) EXPECT_NEAR(a[c], b[c], 1e-6) << g << " " << c;
    }
  }
  std::vector<RankData> loaded = loadRankEvents(indexed, {4, 5, 6, 7}, 2);
  ASSERT_EQ(loaded.size(), 4u);
  for (RankData& r : loaded) indexed.adoptRank(std::move(r));
  indexed.finalize();
  EXPECT_TRUE(indexed.findRank(5)->eventsLoaded);
  EXPECT_FALSE(indexed.findRank(8)->eventsLoaded);
  EXPECT_EQ(indexed.eventCount(), full.eventCount());
  // Rank 5 as the full load has it (its own lines of describe()).
  auto linesOf = [](const TraceStore& store, int32_t rank) {
    std::vector<std::string> out;
    for (const std::string& line : describe(store))
      if (line.rfind(std::to_string(rank) + " ", 0) == 0) out.push_back(line);
    return out;
  };
  EXPECT_EQ(linesOf(indexed, 5), linesOf(full, 5));
  EXPECT_FALSE(linesOf(indexed, 5).empty());
  EXPECT_NE(indexed.aggregates(), nullptr);  // still the lanes from the files
}

TEST(IndexedLoad, ASecondOpenReadsTheIndexFileUntilARankFileChanges) {
  CacheDir cache;
  fx::TempDir dir;
  writeJob(dir, 40);
  TraceStore first, second, third, fourth;
  LoadProgress p1, p2, p3, p4;
  indexTrace(first, dir.path(), &p1, 2);
  EXPECT_FALSE(p1.fromIndexFile.load());
  ASSERT_TRUE(std::filesystem::exists(traceIndexPath(dir.path())));
  indexTrace(second, dir.path(), &p2, 2);
  EXPECT_TRUE(p2.fromIndexFile.load());
  EXPECT_EQ(p2.filesDone.load(), 40u);
  EXPECT_EQ(second.eventCount(), first.eventCount());
  EXPECT_EQ(second.beginNs(), first.beginNs());
  EXPECT_EQ(second.endNs(), first.endNs());
  ASSERT_EQ(second.ranks().size(), 40u);
  for (size_t i = 0; i < 40; ++i) {
    const RankData &a = first.ranks()[i], &b = second.ranks()[i];
    EXPECT_EQ(b.rank, a.rank);
    EXPECT_EQ(b.host, a.host);
    EXPECT_EQ(b.source, a.source);
    EXPECT_EQ(b.events, a.events);
    EXPECT_EQ(b.clockOffsetNs, a.clockOffsetNs);
    EXPECT_FALSE(b.eventsLoaded);
  }
  const AggregateLanes *la = first.aggregates(), *lb = second.aggregates();
  ASSERT_NE(lb, nullptr);
  EXPECT_TRUE(lb->fromFiles());
  ASSERT_EQ(lb->groups().size(), la->groups().size());
  for (size_t g = 0; g < la->groups().size(); ++g) {
    EXPECT_EQ(lb->groups()[g].label, la->groups()[g].label);
    EXPECT_EQ(lb->groups()[g].ranks, la->groups()[g].ranks);
    ASSERT_EQ(lb->groups()[g].marks.size(), la->groups()[g].marks.size());
    for (size_t m = 0; m < la->groups()[g].marks.size(); ++m) {
      EXPECT_EQ(lb->groups()[g].marks[m].timeNs, la->groups()[g].marks[m].timeNs);
      EXPECT_EQ(second.str(lb->groups()[g].marks[m].name),
                first.str(la->groups()[g].marks[m].name));
    }
    float a[8], b[8];
    la->busyShares(g, AggregateLanes::kComm, first.beginNs(), first.endNs(), 8, a);
    lb->busyShares(g, AggregateLanes::kComm, first.beginNs(), first.endNs(), 8, b);
    for (int c = 0; c < 8; ++c) EXPECT_EQ(a[c], b[c]);
  }
  // A rank loaded from an index-opened store is the same rank.
  std::vector<RankData> loaded = loadRankEvents(second, {3}, 1);
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].events, first.findRank(3)->events);
  // A rank file that changed: the pass runs again (and writes a fresh index).
  fx::RankStream extra(7, 40, "node1");
  extra.span(Category::kUser, "compute", "late", 500 * kMs, 501 * kMs);
  extra.writeTo(dir.file("rank-7.ringx"));
  indexTrace(third, dir.path(), &p3, 2);
  EXPECT_FALSE(p3.fromIndexFile.load());
  EXPECT_EQ(third.findRank(7)->events, 1u);
  // A damaged index is read as none.
  {
    std::ofstream out(traceIndexPath(dir.path()), std::ios::binary | std::ios::trunc);
    out << "RXVINDEX garbage";
  }
  indexTrace(fourth, dir.path(), &p4, 2);
  EXPECT_FALSE(p4.fromIndexFile.load());
  EXPECT_EQ(fourth.eventCount(), third.eventCount());
}

TEST(BackgroundLoad, HeldAtAFileShowsThatFarThenFinishes) {
  fx::TempDir dir;
  writeJob(dir, 4);
  BackgroundLoad load({dir.path()}, LoadOptions{1, /*holdAtFile=*/2});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (load.progress().filesDone.load() < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(load.progress().filesDone.load(), 2u);
  EXPECT_EQ(load.progress().filesTotal.load(), 4u);
  EXPECT_EQ(load.progress().events.load(), 2u * 20 * 5);
  EXPECT_FALSE(load.done());
  load.release();
  while (!load.done() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(load.done());
  const std::unique_ptr<TraceStore> store = load.take();
  EXPECT_EQ(store->ranks().size(), 4u);
  EXPECT_EQ(store->eventCount(), 4u * 20 * 5);
}

TEST(BackgroundLoad, AFailedLoadRethrowsFromTake) {
  fx::TempDir dir;
  writeJob(dir, 2);
  fx::writeFile(dir.file("rank-1.ringx"), std::string(trace::kMagic, 8) + "garbage!");
  BackgroundLoad load({dir.path()}, LoadOptions{2});
  try {
    load.take();
    FAIL() << "a corrupt rank file loaded";
  } catch (const trace::FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("rank-1.ringx"), std::string::npos) << e.what();
  }
}

TEST(BackgroundLoad, DestroyingAHeldLoadCancelsIt) {
  fx::TempDir dir;
  writeJob(dir, 3);
  const auto begin = std::chrono::steady_clock::now();
  { BackgroundLoad load({dir.path()}, LoadOptions{1, /*holdAtFile=*/0}); }
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(5));
}

}  // namespace
}  // namespace ringx::model
