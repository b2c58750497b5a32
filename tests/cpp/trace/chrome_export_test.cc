// Chrome Trace Event export, read back with nlohmann::json: process and thread
// names, span times in microseconds from the job's first event, a rank whose
// clock is off by a known offset lining up with rank 0, counters, instants,
// args of every type (bucket and unit included), escaping, and metadata.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "tests/cpp/trace/trace_fixture.h"
#include "trace/export/chrome_export.h"

namespace ringx::trace {
namespace {

using fixture::RankStream;
using fixture::TempDir;
using nlohmann::json;

json exportJson(const TraceSet& set, ExportStats* stats = nullptr) {
  std::ostringstream out;
  const ExportStats s = writeChromeTrace(set, out);
  if (stats != nullptr) *stats = s;
  return json::parse(out.str());
}

// Events of phase `ph` (and name `name`, if given) for process `pid`.
std::vector<json> eventsOf(const json& doc, const std::string& ph, int pid,
                           const std::string& name = "") {
  std::vector<json> out;
  for (const json& e : doc.at("traceEvents")) {
    if (e.at("ph") == ph && e.at("pid") == pid && (name.empty() || e.at("name") == name)) {
      out.push_back(e);
    }
  }
  return out;
}

// The tid of thread `track` in process `pid`, or -1.
int tidOf(const json& doc, int pid, const std::string& track) {
  for (const json& e : eventsOf(doc, "M", pid, "thread_name")) {
    if (e.at("args").at("name") == track) return e.at("tid").get<int>();
  }
  return -1;
}

constexpr int64_t kMs = 1000000;

// Two ranks on two hosts. Rank 1's clock reads 5 ms ahead of rank 0's, so the
// same moment is 5 ms later in its local time; its clock sync says so.
TraceSet twoRanks(const TempDir& dir) {
  RankStream r0(0, 2, "node-a");
  r0.instant(Category::kStep, track::kSteps, "step", 1 * kMs, {{arg::kStep, 3}})
      .collective("allreduce", 0, 2 * kMs, 2 * kMs + 500000, 4096)
      .span(Category::kDdp, track::kDdp, "bucket_allreduce", 2 * kMs, 3 * kMs, {{arg::kBucket, 1}})
      .span(Category::kFsdp, track::kFsdp, "unshard", 3 * kMs, 4 * kMs, {{arg::kUnit, "layers.0"}})
      .counter(counters::kRss, 3 * kMs, 1.5e9)
      .dropped(4 * kMs, 17);
  r0.writeTo(dir.file("rank-0.ringx"));

  RankStream r1(1, 2, "node-b");
  r1.clockSync(6 * kMs, -5 * kMs, 2000)
      .collective("allreduce", 0, 7 * kMs, 7 * kMs + 400000, 4096)
      .span(Category::kUser, track::kUser, "user work", 7 * kMs + 500123, 7 * kMs + 501000,
            {{"ratio", 0.125}, {"big", -(int64_t{1} << 40)}, {"label", "x"}});
  r1.writeTo(dir.file("rank-1.ringx"));
  return readTrace(dir.path());
}

TEST(ChromeExport, NamesProcessesAfterRanksAndThreadsAfterTracks) {
  TempDir dir;
  const json doc = exportJson(twoRanks(dir));
  // pid = rank + 1 (Perfetto treats pid 0 specially).
  const auto p1 = eventsOf(doc, "M", 1, "process_name");
  const auto p2 = eventsOf(doc, "M", 2, "process_name");
  ASSERT_EQ(p1.size(), 1u);
  ASSERT_EQ(p2.size(), 1u);
  EXPECT_EQ(p1[0]["args"]["name"], "rank 0 (node-a)");
  EXPECT_EQ(p2[0]["args"]["name"], "rank 1 (node-b)");
  EXPECT_EQ(eventsOf(doc, "M", 2, "process_sort_index")[0]["args"]["sort_index"], 1);

  // Every track used on a rank is a named thread; shared tracks share a tid.
  for (const char* t : {track::kSteps, track::kDdp, track::kFsdp, track::kMemory, "comm:world"}) {
    EXPECT_GT(tidOf(doc, 1, t), 0) << t;
  }
  EXPECT_EQ(tidOf(doc, 1, "comm:world"), tidOf(doc, 2, "comm:world"));
  EXPECT_EQ(tidOf(doc, 2, track::kDdp), -1);  // rank 1 has no ddp events
  // Steps on top, then work, then communication, then memory.
  EXPECT_LT(tidOf(doc, 1, track::kSteps), tidOf(doc, 1, track::kDdp));
  EXPECT_LT(tidOf(doc, 1, track::kDdp), tidOf(doc, 1, "comm:world"));
  EXPECT_LT(tidOf(doc, 1, "comm:world"), tidOf(doc, 1, track::kMemory));
}

TEST(ChromeExport, SpansAreCompleteEventsInMicrosecondsFromTheFirstEvent) {
  TempDir dir;
  ExportStats stats;
  const json doc = exportJson(twoRanks(dir), &stats);
  EXPECT_EQ(stats.events, 7u);
  EXPECT_EQ(stats.originNs, 1 * kMs);  // rank 0's step marker is the first event
  const auto ar = eventsOf(doc, "X", 1, "allreduce");
  ASSERT_EQ(ar.size(), 1u);
  EXPECT_EQ(ar[0]["cat"], "collective");
  EXPECT_EQ(ar[0]["tid"], tidOf(doc, 1, "comm:world"));
  EXPECT_DOUBLE_EQ(ar[0]["ts"].get<double>(), 1000.0);
  EXPECT_DOUBLE_EQ(ar[0]["dur"].get<double>(), 500.0);
  // Nanoseconds survive as microsecond fractions.
  const auto user = eventsOf(doc, "X", 2, "user work");
  ASSERT_EQ(user.size(), 1u);
  EXPECT_DOUBLE_EQ(user[0]["ts"].get<double>(), 1500.123);
  EXPECT_DOUBLE_EQ(user[0]["dur"].get<double>(), 0.877);
}

TEST(ChromeExport, RankWithAnOffsetClockLinesUpWithRankZero) {
  TempDir dir;
  const json doc = exportJson(twoRanks(dir));
  const auto a0 = eventsOf(doc, "X", 1, "allreduce");
  const auto a1 = eventsOf(doc, "X", 2, "allreduce");
  ASSERT_EQ(a0.size(), 1u);
  ASSERT_EQ(a1.size(), 1u);
  // Local begins 2 ms and 7 ms; rank 1's offset of -5 ms puts both at 1 ms after the origin.
  EXPECT_DOUBLE_EQ(a1[0]["ts"].get<double>(), a0[0]["ts"].get<double>());
  EXPECT_DOUBLE_EQ(a1[0]["dur"].get<double>(), 400.0);
}

TEST(ChromeExport, DriftingClockIsInterpolated) {
  TempDir dir;
  RankStream(0, 2)
      .collective("broadcast", 0, 8900000, 9900000, 64, 2, "world", {{arg::kRoot, 0}})
      .writeTo(dir.file("rank-0.ringx"));
  // Offset -1 ms at local 0 and -1.2 ms at local 20 ms: -1.1 ms at the begin (local
  // 10 ms, aligned 8.9 ms) and -1.11 ms at the end (local 11 ms, aligned 9.89 ms).
  RankStream(1, 2)
      .clockSync(0, -1 * kMs, 500)
      .clockSync(20 * kMs, -1200000, 700)
      .collective("broadcast", 0, 10 * kMs, 11 * kMs, 64, 2, "world", {{arg::kRoot, 0}})
      .writeTo(dir.file("rank-1.ringx"));
  const json doc = exportJson(readTrace(dir.path()));
  const auto b0 = eventsOf(doc, "X", 1, "broadcast");
  const auto b1 = eventsOf(doc, "X", 2, "broadcast");
  ASSERT_EQ(b0.size(), 1u);
  ASSERT_EQ(b1.size(), 1u);
  EXPECT_DOUBLE_EQ(b0[0]["ts"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(b1[0]["ts"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(b1[0]["dur"].get<double>(), 990.0);  // the drift shortens it by 10 us
  EXPECT_EQ(b1[0]["args"]["root"], 0);
  const json clock = eventsOf(doc, "M", 2, "process_name")[0]["args"];
  EXPECT_EQ(clock["clock_samples"], 2);
  EXPECT_EQ(clock["clock_uncertainty_ns"], 700);
  EXPECT_EQ(clock["clock_offset_ns"], -1100000);  // at the rank's first event
  EXPECT_EQ(clock["clock_offset_end_ns"], -1110000);
}

TEST(ChromeExport, CountersAndInstants) {
  TempDir dir;
  const json doc = exportJson(twoRanks(dir));
  const auto counters = eventsOf(doc, "C", 1);
  ASSERT_EQ(counters.size(), 1u);
  EXPECT_EQ(counters[0]["name"], "rss_bytes");
  EXPECT_EQ(counters[0]["cat"], "memory");
  EXPECT_DOUBLE_EQ(counters[0]["ts"].get<double>(), 2000.0);
  EXPECT_DOUBLE_EQ(counters[0]["args"]["rss_bytes"].get<double>(), 1.5e9);
  EXPECT_EQ(counters[0]["args"].size(), 1u);

  const auto steps = eventsOf(doc, "i", 1, "step");
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0]["s"], "t");
  EXPECT_EQ(steps[0]["cat"], "step");
  EXPECT_DOUBLE_EQ(steps[0]["ts"].get<double>(), 0.0);
  EXPECT_EQ(steps[0]["args"]["step"], 3);
}

TEST(ChromeExport, ArgsKeepTheirTypes) {
  TempDir dir;
  const json doc = exportJson(twoRanks(dir));
  const json args = eventsOf(doc, "X", 1, "allreduce")[0]["args"];
  EXPECT_EQ(args["bytes"], 4096);
  EXPECT_EQ(args["seq"], 0);
  EXPECT_EQ(args["group"], "world");
  EXPECT_EQ(args["group_size"], 2);
  EXPECT_EQ(args["dtype"], "float32");
  EXPECT_EQ(args["enqueue_ns"], 2 * kMs - 100);
  EXPECT_EQ(eventsOf(doc, "X", 1, "bucket_allreduce")[0]["args"]["bucket"], 1);
  EXPECT_EQ(eventsOf(doc, "X", 1, "unshard")[0]["args"]["unit"], "layers.0");
  EXPECT_EQ(eventsOf(doc, "X", 1, "unshard")[0]["cat"], "fsdp");
  const json user = eventsOf(doc, "X", 2, "user work")[0]["args"];
  EXPECT_TRUE(user["ratio"].is_number_float());
  EXPECT_DOUBLE_EQ(user["ratio"].get<double>(), 0.125);
  EXPECT_EQ(user["big"].get<int64_t>(), -(int64_t{1} << 40));
  EXPECT_EQ(user["label"], "x");
}

TEST(ChromeExport, FailedCollectivesAreMarked) {
  TempDir dir;
  RankStream(0, 1)
      .collective("allreduce", 0, 0, 10, 8, 1, "world", {{arg::kError, "rank 1 died"}})
      .writeTo(dir.file("rank-0.ringx"));
  const json doc = exportJson(readTrace(dir.path()));
  const auto ar = eventsOf(doc, "X", 1, "allreduce");
  ASSERT_EQ(ar.size(), 1u);
  EXPECT_EQ(ar[0]["args"]["error"], "rank 1 died");
  EXPECT_EQ(ar[0]["cname"], "terrible");
}

TEST(ChromeExport, StringsAreEscapedAndMadeValidUtf8) {
  TempDir dir;
  const std::string name = "say \"hi\"\n\tback\\slash \x01 caf\xc3\xa9 \xff end";
  RankStream(0, 1)
      .span(Category::kUser, "user \"lane\"", name, 0, 10, {{"why", "a\rb"}})
      .writeTo(dir.file("rank-0.ringx"));
  const json doc = exportJson(readTrace(dir.path()));
  const auto spans = eventsOf(doc, "X", 1);
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0]["name"], "say \"hi\"\n\tback\\slash \x01 caf\xc3\xa9 \xef\xbf\xbd end");
  EXPECT_EQ(spans[0]["args"]["why"], "a\rb");
  EXPECT_GT(tidOf(doc, 1, "user \"lane\""), 0);

  std::string out;
  appendJsonString(out,
                   std::string("\xe0\x80\x80 \xed\xa0\x80 \xf4\x90\x80\x80 \xf0\x9f\x98\x80", 17));
  // Overlong, surrogate and beyond-U+10FFFF sequences are replaced byte by byte; the emoji stays.
  EXPECT_EQ(json::parse(out).get<std::string>(),
            "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd "
            "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd \xf0\x9f\x98\x80");
}

TEST(ChromeExport, MetadataCarriesClocksDropsAndTruncation) {
  TempDir dir;
  const TraceSet set = twoRanks(dir);
  const json doc = exportJson(set);
  const json r0 = eventsOf(doc, "M", 1, "process_name")[0]["args"];
  EXPECT_EQ(r0["clock_reference"], true);
  EXPECT_EQ(r0["clock_offset_ns"], 0);
  EXPECT_EQ(r0["dropped_events"], 17);
  EXPECT_EQ(r0["truncated"], false);
  EXPECT_EQ(r0["host"], "node-a");
  EXPECT_EQ(r0["os_pid"], 1000);
  const json r1 = eventsOf(doc, "M", 2, "process_name")[0]["args"];
  EXPECT_EQ(r1["clock_reference"], false);
  EXPECT_EQ(r1["clock_aligned"], true);
  EXPECT_EQ(r1["clock_offset_ns"], -5 * kMs);
  EXPECT_EQ(r1["clock_uncertainty_ns"], 2000);
  const std::string label = eventsOf(doc, "M", 1, "process_labels")[0]["args"]["labels"];
  EXPECT_NE(label.find("17 events dropped"), std::string::npos) << label;

  const json& other = doc.at("otherData");
  EXPECT_EQ(other["format"], "ringx-trace");
  EXPECT_EQ(other["world_size"], 2);
  EXPECT_EQ(other["time_origin_ns"], 1 * kMs);
  ASSERT_EQ(other["ranks"].size(), 2u);
  EXPECT_EQ(other["ranks"][1]["clock_offset_ns"], -5 * kMs);
  EXPECT_EQ(other["ranks"][0]["dropped_events"], 17);
}

TEST(ChromeExport, TruncatedRankIsExportedAndFlagged) {
  TempDir dir;
  RankStream(0, 2).collective("barrier", 0, 0, 10, 0).writeTo(dir.file("rank-0.ringx"));
  RankStream r1(1, 2);
  r1.collective("barrier", 0, 0, 10, 0).collective("barrier", 1, 20, 30, 0);
  fixture::writeFile(dir.file("rank-1.ringx"), r1.bytes().substr(0, r1.bytes().size() - 2));
  const json doc = exportJson(readTrace(dir.path()));
  EXPECT_EQ(eventsOf(doc, "X", 2).size(), 1u);
  EXPECT_EQ(eventsOf(doc, "M", 2, "process_name")[0]["args"]["truncated"], true);
  ASSERT_EQ(doc["otherData"]["warnings"].size(), 1u);
}

TEST(ChromeExport, RankWithoutEventsStillMakesValidJson) {
  TempDir dir;
  RankStream(0, 1, "node-a", 123).writeTo(dir.file("rank-0.ringx"));
  ExportStats stats;
  const json doc = exportJson(readTrace(dir.path()), &stats);
  EXPECT_EQ(stats.events, 0u);
  EXPECT_EQ(stats.originNs, 123);
  EXPECT_EQ(eventsOf(doc, "M", 1, "process_name").size(), 1u);
}

TEST(ChromeExport, WritesFilesAndReportsUnwritablePaths) {
  TempDir dir;
  const TraceSet set = twoRanks(dir);
  const std::string out = dir.file("out.json");
  EXPECT_EQ(writeChromeTraceFile(set, out).events, 7u);
  std::ifstream in(out);
  // Events, metadata, and the allreduce's flow from rank 0 to rank 1 ("s", "f").
  EXPECT_EQ(json::parse(in)["traceEvents"].size(), 7u + 3 * 2 + 2 * (5 + 2) + 2);
  EXPECT_THROW(writeChromeTraceFile(set, dir.file("no/such/dir/out.json")), IoError);
}

// Three ranks; rank 1's clock reads 5 ms ahead. World allreduce seq 0: rank 2
// begins first, then rank 0, rank 1 last (aligned). Seq 1: ranks 0 and 1 tie,
// then rank 2. A subgroup "pair" of ranks 0 and 1 also has a seq 0. A send with
// a seq, and a collective only one rank recorded, join nothing.
TraceSet threeRanks(const TempDir& dir) {
  RankStream r0(0, 3, "node-a");
  r0.collective("allreduce", 0, 2 * kMs, 3 * kMs, 64, 3)
      .collective("allreduce", 1, 4 * kMs, 5 * kMs, 64, 3)
      .collective("broadcast", 0, 6 * kMs, 7 * kMs, 64, 2, "pair")
      .collective("send", 7, 8 * kMs, 9 * kMs, 64, 3)
      .collective("allreduce", 9, 10 * kMs, 11 * kMs, 64, 3);
  r0.writeTo(dir.file("rank-0.ringx"));
  RankStream r1(1, 3, "node-b");
  r1.clockSync(1 * kMs, -5 * kMs, 100)
      .collective("allreduce", 0, 7 * kMs + 500, 8 * kMs, 64, 3)  // 2 ms + 500 ns aligned
      .collective("allreduce", 1, 9 * kMs, 10 * kMs, 64, 3)       // 4 ms aligned
      .collective("broadcast", 0, 11 * kMs + 1, 12 * kMs, 64, 2, "pair")
      .collective("send", 7, 13 * kMs, 14 * kMs, 64, 3);
  r1.writeTo(dir.file("rank-1.ringx"));
  RankStream r2(2, 3, "node-a");
  r2.collective("allreduce", 0, 1 * kMs, 3 * kMs, 64, 3)
      .collective("allreduce", 1, 4 * kMs + 3, 5 * kMs, 64, 3);
  r2.writeTo(dir.file("rank-2.ringx"));
  return readTrace(dir.path());
}

TEST(ChromeExport, CollectivesAreJoinedAcrossRanksByFlowsInArrivalOrder) {
  TempDir dir;
  ExportStats stats;
  const json doc = exportJson(threeRanks(dir), &stats);
  // Flow points by id, in file order.
  std::map<int64_t, std::vector<json>> chains;
  for (const json& e : doc.at("traceEvents")) {
    const std::string ph = e.at("ph");
    if (ph == "s" || ph == "t" || ph == "f") chains[e.at("id").get<int64_t>()].push_back(e);
  }
  ASSERT_EQ(chains.size(), 3u);  // world seq 0 and 1, pair seq 0: ids unique per (group, seq)
  EXPECT_EQ(stats.flows, 2u + 2u + 1u);
  const int tid = tidOf(doc, 1, "comm:world");
  auto expectPoint = [&](const json& e, const char* ph, int pid, double ts, const char* name) {
    SCOPED_TRACE(e.dump());
    EXPECT_EQ(e.at("ph"), ph);
    EXPECT_EQ(e.at("pid"), pid);
    EXPECT_EQ(e.at("ts").get<double>(), ts);
    EXPECT_EQ(e.at("name"), name);
    EXPECT_EQ(e.at("cat"), "collective.flow");  // not the spans' "collective"
    // "t" and "f" bind to the span that begins where they are, as "s" does.
    EXPECT_EQ(e.contains("bp"), std::string(ph) != "s");
    if (e.contains("bp")) {
      EXPECT_EQ(e.at("bp"), "e");
    }
  };
  // Times are microseconds from rank 2's first span (1 ms aligned).
  auto it = chains.begin();
  const std::vector<json>& seq0 = (it++)->second;  // ids follow the first arrival's time
  ASSERT_EQ(seq0.size(), 3u);
  expectPoint(seq0[0], "s", 3, 0.0, "allreduce");     // rank 2 first, at 1 ms
  expectPoint(seq0[1], "t", 1, 1000.0, "allreduce");  // rank 0 at 2 ms
  expectPoint(seq0[2], "f", 2, 1000.5, "allreduce");  // rank 1 last: the arrow head
  for (const json& e : seq0) EXPECT_EQ(e.at("tid"), tid);
  const std::vector<json>& seq1 = (it++)->second;
  ASSERT_EQ(seq1.size(), 3u);
  expectPoint(seq1[0], "s", 1, 3000.0, "allreduce");  // ranks 0 and 1 tie: by rank
  expectPoint(seq1[1], "t", 2, 3000.0, "allreduce");
  expectPoint(seq1[2], "f", 3, 3000.003, "allreduce");
  const std::vector<json>& pair = (it++)->second;
  ASSERT_EQ(pair.size(), 2u);
  expectPoint(pair[0], "s", 1, 5000.0, "broadcast");
  expectPoint(pair[1], "f", 2, 5000.001, "broadcast");
  EXPECT_EQ(pair[0].at("tid"), tidOf(doc, 1, "comm:pair"));
  // Flow points come after every span (readers replaying the file at equal
  // timestamps meet the slice first).
  size_t lastSpan = 0, firstFlow = SIZE_MAX;
  const json& events = doc.at("traceEvents");
  for (size_t i = 0; i < events.size(); ++i) {
    const std::string ph = events[i].at("ph");
    if (ph == "X") lastSpan = i;
    if (ph == "s" && firstFlow == SIZE_MAX) firstFlow = i;
  }
  EXPECT_LT(lastSpan, firstFlow);
}

TEST(ChromeExport, ManyEventsStream) {
  TempDir dir;
  constexpr int kEvents = 100000;
  for (int r = 0; r < 2; ++r) {
    RankStream s(r, 2);
    if (r == 1) s.clockSync(0, 1000, 10).clockSync(int64_t{kEvents} * 1000, 2000, 10);
    for (int i = 0; i < kEvents / 2; ++i) {
      s.collective("allreduce", i, int64_t{i} * 1000, int64_t{i} * 1000 + 700, 1 << 20);
    }
    s.writeTo(dir.file("rank-" + std::to_string(r) + ".ringx"));
  }
  const TraceSet set = readTrace(dir.path());
  std::ostringstream out;
  const ExportStats stats = writeChromeTrace(set, out);
  EXPECT_EQ(stats.events, static_cast<uint64_t>(kEvents));
  EXPECT_EQ(stats.flows, static_cast<uint64_t>(kEvents / 2));  // one arrow per collective
  const json doc = json::parse(out.str());
  // Events, metadata, and two flow points ("s", "f") per collective.
  EXPECT_EQ(doc["traceEvents"].size(), static_cast<size_t>(kEvents) * 2 + 2 * 3 + 2 * 2);
}

}  // namespace
}  // namespace ringx::trace
