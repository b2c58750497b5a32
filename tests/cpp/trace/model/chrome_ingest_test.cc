// Chrome Trace Event JSON ingest: a ringx export reads back as the ringx trace
// itself does (tracks, names, times to the nanosecond, args, rank facts);
// B/E pairs nest; counters; a Kineto-style file lands on its rank, and its GPUs'
// pids become lanes of the process that launched on them (generated files and
// real ones, the shared traces' hta/); processes without names are numbered; string pids and tids,
// async events, flows and gzip-compressed files read as Perfetto reads them; bad input is a
// FormatError naming the file and the byte, and no truncation or flipped byte crashes it; files
// large enough to be read in many chunks, including chunks whose guessed ends are wrong.
#include "trace/model/chrome_ingest.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "tests/cpp/shared_traces.h"
#include "tests/cpp/trace/trace_fixture.h"
#include "trace/export/chrome_export.h"
#include "trace/model/loader.h"
#include "trace/model/ringx_ingest.h"
#include "trace/read/trace_dir.h"

namespace ringx::model {
namespace {

using trace::Category;
namespace fx = trace::fixture;
namespace arg = trace::arg;

using fx::kMs;

TraceStore ingestText(const std::string& text, const std::string& source = "test.json") {
  TraceStore store;
  ingestChromeTraceText(store, text, source);
  return store;
}

const Track* findTrack(const TraceStore& store, const RankData& rank, std::string_view name) {
  const int i = rank.findTrack(store.strings().find(name));
  return i < 0 ? nullptr : &rank.tracks[static_cast<size_t>(i)];
}

// Every span of a track, level by level.
std::vector<Span> spansOf(const Track& track) {
  std::vector<Span> out;
  for (const auto& level : track.levels) out.insert(out.end(), level.begin(), level.end());
  return out;
}

// A readable form of an event's args: "key=value" with the kind, so that a
// difference shows in the failure message.
std::string argsText(const TraceStore& store, const RankData& rank, uint32_t first,
                     uint16_t count) {
  std::string out;
  for (const ArgValue& a : ArgList(rank, first, count)) {
    const char* kind = a.kind == ArgKind::kInt ? "i" : a.kind == ArgKind::kDouble ? "d" : "s";
    out += strCat(store.str(a.key), "=", kind, ":", store.argText(a), " ");
  }
  return out;
}

// A ringx job of two ranks on two hosts, rank 1's clock 5 ms ahead of rank 0's:
// spans on every kind of track, nested spans, instants, counters, a failed
// collective, args of every type, names that need escaping.
trace::TraceSet ringxJob(const fx::TempDir& dir) {
  fx::RankStream r0(0, 2, "node-a");
  r0.instant(Category::kStep, trace::track::kSteps, "step", 1 * kMs, {{arg::kStep, 3}})
      .collective("allreduce", 0, 2 * kMs, 2 * kMs + 500123, 4096)
      .collective("allreduce", 1, 3 * kMs, 3 * kMs + 7, 8, 2, "world",
                  {{arg::kError, "peer 1 closed the connection"}})
      .span(Category::kDdp, trace::track::kDdp, "backward", 2 * kMs, 4 * kMs, {{arg::kStep, 3}})
      .span(Category::kDdp, "ddp:bucket1", "bucket", 2 * kMs + 1, 3 * kMs - 1,
            {{arg::kBucket, 1},
             {arg::kReadyNs, 2 * kMs + 10},
             {arg::kLaunchNs, 2 * kMs + 20},
             {arg::kExposedNs, 333}})
      .span(Category::kDdp, trace::track::kDdp, "bucket 1 wait", 2 * kMs + 100, 2 * kMs + 200)
      .span(Category::kFsdp, "fsdp:layers.0", "unshard", 3 * kMs, 4 * kMs,
            {{arg::kUnit, "layers.0"}, {arg::kIssueNs, 3 * kMs - 50}})
      .counter(trace::counters::kRss, 3 * kMs, 1.5e9)
      .counter(trace::counters::kRss, 3 * kMs + 999, 1.25e9)
      .span(Category::kUser, trace::track::kUser, "quote \" back\\slash \n newline \xc3\xa9",
            5 * kMs, 5 * kMs + 1, {{"label", "tab\there"}, {"ratio", 0.125}});
  r0.writeTo(dir.file("rank-0.ringx"));

  fx::RankStream r1(1, 2, "node-b");
  r1.clockSync(6 * kMs, -5 * kMs, 2000)
      .collective("allreduce", 0, 7 * kMs, 7 * kMs + 400000, 4096)
      .collective("allreduce", 1, 8 * kMs + 1, 8 * kMs + 3, 8)
      .instant(Category::kStep, trace::track::kSteps, "step", 6 * kMs + 1, {{arg::kStep, 3}})
      .span(Category::kUser, trace::track::kUser, "user work", 7 * kMs + 500123, 7 * kMs + 501000,
            {{"ratio", 0.375}, {"big", -(int64_t{1} << 40)}, {"label", "x"}})
      .counter(trace::counters::kRss, 7 * kMs, 2e9)
      .dropped(8 * kMs, 17);
  r1.writeTo(dir.file("rank-1.ringx"));
  return trace::readTrace(dir.path());
}

TEST(ChromeIngest, RingxExportReadsBackAsTheRingxTraceItself) {
  fx::TempDir dir;
  const trace::TraceSet set = ringxJob(dir);
  TraceStore direct;
  ingestTraceSet(direct, set);
  std::ostringstream json;
  const trace::ExportStats stats = trace::writeChromeTrace(set, json);
  const TraceStore chrome = ingestText(json.str(), "export.json");
  // Chrome times count from the export's origin; ringx's are rank 0's clock.
  const int64_t origin = stats.originNs;

  EXPECT_TRUE(chrome.warnings().empty()) << chrome.warnings()[0];
  EXPECT_EQ(chrome.eventCount(), direct.eventCount());
  EXPECT_EQ(chrome.beginNs() + origin, direct.beginNs());
  EXPECT_EQ(chrome.endNs() + origin, direct.endNs());
  ASSERT_EQ(chrome.ranks().size(), direct.ranks().size());
  for (size_t r = 0; r < direct.ranks().size(); ++r) {
    const RankData& want = direct.ranks()[r];
    const RankData& got = chrome.ranks()[r];
    SCOPED_TRACE(strCat("rank ", want.rank));
    EXPECT_EQ(got.rank, want.rank);
    EXPECT_EQ(got.host, want.host);
    EXPECT_EQ(got.pid, want.pid);
    EXPECT_EQ(got.truncated, want.truncated);
    EXPECT_EQ(got.clockAligned, want.clockAligned);
    EXPECT_EQ(got.clockUncertaintyNs, want.clockUncertaintyNs);
    EXPECT_EQ(got.dropped, want.dropped);
    EXPECT_EQ(got.events, want.events);
    EXPECT_EQ(got.source, "export.json");

    ASSERT_EQ(got.tracks.size(), want.tracks.size());
    for (size_t t = 0; t < want.tracks.size(); ++t) {
      const Track& wt = want.tracks[t];
      const Track& gt = got.tracks[t];
      SCOPED_TRACE(strCat("track ", direct.str(wt.name)));
      EXPECT_EQ(chrome.str(gt.name), direct.str(wt.name));
      EXPECT_EQ(gt.kind, wt.kind);
      ASSERT_EQ(gt.levels.size(), wt.levels.size());
      const std::vector<Span> ws = spansOf(wt), gs = spansOf(gt);
      ASSERT_EQ(gs.size(), ws.size());
      for (size_t i = 0; i < ws.size(); ++i) {
        SCOPED_TRACE(strCat("span ", direct.str(ws[i].name)));
        EXPECT_EQ(gs[i].begin + origin, ws[i].begin);
        EXPECT_EQ(gs[i].end + origin, ws[i].end);
        EXPECT_EQ(chrome.str(gs[i].name), direct.str(ws[i].name));
        EXPECT_EQ(chrome.categories()[gs[i].category], direct.categories()[ws[i].category]);
        EXPECT_EQ(gs[i].flags, ws[i].flags);
        // Time args are on each store's time base, like the spans: shift them.
        std::string wantArgs = argsText(direct, want, ws[i].firstArg, ws[i].argCount);
        std::string gotArgs;
        for (ArgValue v : ArgList(got, gs[i])) {
          const std::string_view key = chrome.str(v.key);
          if (key.size() > 3 && key.substr(key.size() - 3) == "_ns" && key != arg::kExposedNs)
            v.intValue += origin;
          const char* kind = v.kind == ArgKind::kInt ? "i" : v.kind == ArgKind::kDouble ? "d" : "s";
          gotArgs += strCat(key, "=", kind, ":", chrome.argText(v), " ");
        }
        EXPECT_EQ(gotArgs, wantArgs);
      }
      ASSERT_EQ(gt.instants.size(), wt.instants.size());
      for (size_t i = 0; i < wt.instants.size(); ++i) {
        EXPECT_EQ(gt.instants[i].time + origin, wt.instants[i].time);
        EXPECT_EQ(chrome.str(gt.instants[i].name), direct.str(wt.instants[i].name));
        EXPECT_EQ(argsText(chrome, got, gt.instants[i].firstArg, gt.instants[i].argCount),
                  argsText(direct, want, wt.instants[i].firstArg, wt.instants[i].argCount));
      }
    }
    ASSERT_EQ(got.counters.size(), want.counters.size());
    for (size_t c = 0; c < want.counters.size(); ++c) {
      EXPECT_EQ(chrome.str(got.counters[c].name), direct.str(want.counters[c].name));
      EXPECT_EQ(got.counters[c].values, want.counters[c].values);
      ASSERT_EQ(got.counters[c].times.size(), want.counters[c].times.size());
      for (size_t i = 0; i < want.counters[c].times.size(); ++i)
        EXPECT_EQ(got.counters[c].times[i] + origin, want.counters[c].times[i]);
    }
  }
}

TEST(ChromeIngest, ExportOfAFileAndLoaderAgree) {
  fx::TempDir dir;
  const trace::TraceSet set = ringxJob(dir);
  const std::string path = dir.file("job.json");
  trace::writeChromeTraceFile(set, path);
  TraceStore direct, viaLoader, viaFile;
  ingestTraceSet(direct, set);
  loadTraces(viaLoader, {path});
  ingestChromeTraceFile(viaFile, path);
  EXPECT_EQ(viaLoader.eventCount(), direct.eventCount());
  EXPECT_EQ(viaFile.eventCount(), direct.eventCount());
  ASSERT_EQ(viaLoader.ranks().size(), 2u);
  EXPECT_EQ(viaLoader.ranks()[1].host, "node-b");
  EXPECT_EQ(viaLoader.ranks()[1].source, path);
}

TEST(ChromeIngest, BeginEndPairsNestIntoLevelsAndMergeTheirArgs) {
  const TraceStore store = ingestText(R"json([
    {"ph":"B","pid":1,"tid":5,"ts":0,"name":"step","cat":"loop","args":{"n":1}},
    {"ph":"B","pid":1,"tid":5,"ts":10,"name":"forward"},
    {"ph":"B","pid":1,"tid":5,"ts":12,"name":"matmul"},
    {"ph":"E","pid":1,"tid":5,"ts":20},
    {"ph":"E","pid":1,"tid":5,"ts":30,"args":{"flops":99}},
    {"ph":"B","pid":1,"tid":6,"ts":15,"name":"other thread"},
    {"ph":"E","pid":1,"tid":6,"ts":16},
    {"ph":"B","pid":1,"tid":5,"ts":40,"name":"backward","args":{"error":"nan"}},
    {"ph":"E","pid":1,"tid":5,"ts":50},
    {"ph":"E","pid":1,"tid":5,"ts":100},
    {"ph":"E","pid":1,"tid":5,"ts":101},
    {"ph":"B","pid":1,"tid":6,"ts":90,"name":"never ends"},
    {"ph":"M","pid":1,"tid":5,"name":"thread_name","args":{"name":"main"}}
  ])json");
  ASSERT_EQ(store.ranks().size(), 1u);
  const RankData& r = store.ranks()[0];
  const Track* main = findTrack(store, r, "main");
  ASSERT_NE(main, nullptr);
  ASSERT_EQ(main->levels.size(), 3u);
  ASSERT_EQ(main->levels[0].size(), 1u);
  const Span& step = main->levels[0][0];
  EXPECT_EQ(store.str(step.name), "step");
  EXPECT_EQ(step.begin, 0);
  EXPECT_EQ(step.end, 100000);
  EXPECT_EQ(store.categories()[step.category], "loop");
  EXPECT_EQ(store.intArg(r, step, "n"), 1);
  ASSERT_EQ(main->levels[1].size(), 2u);
  const Span& forward = main->levels[1][0];
  EXPECT_EQ(store.str(forward.name), "forward");
  EXPECT_EQ(forward.end, 30000);
  EXPECT_EQ(store.intArg(r, forward, "flops"), 99);  // the "E"'s args join the "B"'s
  const Span& backward = main->levels[1][1];
  EXPECT_EQ(backward.flags, kSpanFailed);
  EXPECT_EQ(store.str(main->levels[2][0].name), "matmul");
  EXPECT_EQ(main->levels[2][0].begin, 12000);

  const Track* other = findTrack(store, r, "thread 6");  // no thread_name
  ASSERT_NE(other, nullptr);
  const std::vector<Span> spans = spansOf(*other);
  ASSERT_EQ(spans.size(), 2u);
  // A "B" with no "E" ends where the trace ends (the last time of any event).
  EXPECT_EQ(spans[1].begin, 90000);
  EXPECT_EQ(spans[1].end, 101000);
  ASSERT_EQ(store.warnings().size(), 2u);
  EXPECT_NE(store.warnings()[0].find("1 events in 'test.json' were skipped: 1 \"E\" without"),
            std::string::npos)
      << store.warnings()[0];
  EXPECT_NE(store.warnings()[1].find("have no matching end"), std::string::npos);
}

TEST(ChromeIngest, CountersAreSeriesPerProcessAndArgKey) {
  const TraceStore store = ingestText(R"json({"traceEvents":[
    {"ph":"C","pid":3,"tid":1,"ts":2,"name":"rss","args":{"rss":100}},
    {"ph":"C","pid":3,"tid":2,"ts":1,"name":"rss","args":{"rss":50.5}},
    {"ph":"C","pid":3,"ts":1,"name":"queue","args":{"cats":1,"dogs":7,"label":"no number"}},
    {"ph":"C","pid":3,"ts":3,"name":"queue","args":{"cats":4,"dogs":2}}
  ]})json");
  ASSERT_EQ(store.ranks().size(), 1u);
  const RankData& r = store.ranks()[0];
  EXPECT_EQ(r.pid, 3);
  EXPECT_TRUE(r.tracks.empty());  // counters make no lanes
  const CounterSeries* rss = r.findCounter(store.strings().find("rss"));
  ASSERT_NE(rss, nullptr);
  EXPECT_EQ(rss->times, (std::vector<int64_t>{1000, 2000}));  // sorted
  EXPECT_EQ(rss->values, (std::vector<double>{50.5, 100}));
  EXPECT_EQ(rss->maxValue, 100);
  const CounterSeries* cats = r.findCounter(store.strings().find("queue.cats"));
  const CounterSeries* dogs = r.findCounter(store.strings().find("queue.dogs"));
  ASSERT_NE(cats, nullptr);
  ASSERT_NE(dogs, nullptr);
  EXPECT_EQ(cats->values, (std::vector<double>{1, 4}));
  EXPECT_EQ(dogs->values, (std::vector<double>{7, 2}));
  EXPECT_EQ(store.eventCount(), 6u);
}

TEST(ChromeIngest, KinetoFileLandsOnItsRankWithExactTimes) {
  // As the PyTorch profiler writes them: epoch microseconds, the rank in
  // distributedInfo, names after the events, CPU and GPU processes, flows.
  const TraceStore store = ingestText(R"json({
    "schemaVersion": 1,
    "deviceProperties": [{"id": 0, "name": "NVIDIA H100", "totalGlobalMem": 85000000000}],
    "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 4},
    "traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 4242, "tid": 4242,
       "ts": 1700000000000123.456, "dur": 12.5,
       "args": {"External id": 7, "Input Dims": [[8, 16], [16, 4]], "flag": true,
                "Sequence number": 18446744073709551615, "ratio": 0.5,
                "nested": {"a": {"b": null}}, "none": null}},
      {"ph": "X", "cat": "kernel", "name": "sm90_gemm", "pid": 0, "tid": 7,
       "ts": 1700000000000130.0005, "dur": 3.0004, "args": {"stream": 7, "device": 0}},
      {"ph": "s", "id": 7, "pid": 4242, "tid": 4242, "ts": 1700000000000123.456, "cat": "ac2g",
       "name": "ac2g"},
      {"ph": "f", "id": 7, "pid": 0, "tid": 7, "ts": 1700000000000130.0005, "cat": "ac2g",
       "name": "ac2g", "bp": "e"},
      {"ph": "X", "cat": "kernel", "name": "other", "pid": 0, "tid": 4242,
       "ts": 1700000000000140, "dur": 1},
      {"ph": "i", "s": "g", "name": "Iteration Start", "pid": 4242, "tid": 4242,
       "ts": 1700000000000100},
      {"name": "process_name", "ph": "M", "pid": 4242, "tid": 0, "args": {"name": "python3"}},
      {"name": "thread_name", "ph": "M", "pid": 4242, "tid": 4242,
       "args": {"name": "thread 4242 (python3)"}},
      {"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "python3"}},
      {"name": "process_labels", "ph": "M", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
      {"name": "thread_name", "ph": "M", "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
      {"name": "thread_name", "ph": "M", "pid": 0, "tid": 4242,
       "args": {"name": "thread 4242 (python3)"}}
    ],
    "traceName": "rank3.pt.trace.json",
    "baseTimeNanoseconds": 1700000000000000000
  })json",
                                      "rank3.json");
  ASSERT_EQ(store.ranks().size(), 1u);
  const RankData& r = store.ranks()[0];
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.pid, 4242);  // the first process seen
  const Track* cpu = findTrack(store, r, "thread 4242 (python3)");
  ASSERT_NE(cpu, nullptr);
  const Span& mm = cpu->levels.at(0).at(0);
  EXPECT_EQ(mm.begin, 1700000000000123456);  // beyond a double's nanoseconds
  EXPECT_EQ(mm.end, 1700000000000135956);
  EXPECT_EQ(store.categories()[mm.category], "cpu_op");
  EXPECT_EQ(store.intArg(r, mm, "External id"), 7);
  EXPECT_EQ(store.intArg(r, mm, "flag"), 1);
  EXPECT_EQ(store.stringArg(r, mm, "Input Dims"), "[[8, 16], [16, 4]]");
  EXPECT_EQ(store.stringArg(r, mm, "nested"), "{\"a\": {\"b\": null}}");
  EXPECT_EQ(store.stringArg(r, mm, "none"), "null");
  const std::optional<ArgValue> seq = store.findArg(r, mm.firstArg, mm.argCount, "Sequence number");
  ASSERT_TRUE(seq.has_value());
  EXPECT_EQ(seq->kind, ArgKind::kDouble);  // past int64
  const std::optional<ArgValue> ratio = store.findArg(r, mm.firstArg, mm.argCount, "ratio");
  ASSERT_TRUE(ratio.has_value());
  EXPECT_EQ(ratio->kind, ArgKind::kDouble);
  EXPECT_EQ(ratio->doubleValue, 0.5);
  ASSERT_EQ(cpu->instants.size(), 1u);
  EXPECT_EQ(cpu->instants[0].time, 1700000000000100000);

  const Track* gpu = findTrack(store, r, "GPU 0 / stream 7");
  ASSERT_NE(gpu, nullptr);
  const Span& kernel = gpu->levels.at(0).at(0);
  EXPECT_EQ(kernel.begin, 1700000000000130001);  // .0005 us rounds up
  EXPECT_EQ(kernel.end - kernel.begin, 3000);    // .0004 us rounds down
  // The GPU's thread of the CPU thread's name stays a lane of its own.
  EXPECT_NE(findTrack(store, r, "GPU 0 / thread 4242 (python3)"), nullptr);
  EXPECT_EQ(r.tracks.size(), 3u);

  // The launch flow is an arrow from the CPU op to the kernel, lane to lane.
  EXPECT_TRUE(store.warnings().empty());
  ASSERT_EQ(store.flows().size(), 1u);
  const Flow& launch = store.flows()[0];
  EXPECT_EQ(store.str(launch.name), "ac2g");
  EXPECT_EQ(launch.from.rank, 3);
  EXPECT_EQ(store.str(launch.from.track), "thread 4242 (python3)");
  EXPECT_EQ(launch.from.time, 1700000000000123456);
  EXPECT_EQ(store.str(launch.to.track), "GPU 0 / stream 7");
  EXPECT_EQ(launch.to.time, 1700000000000130001);
}

// Each lane of a rank with how many spans and instants it holds: the lanes'
// names and contents in one comparison.
std::map<std::string, size_t> lanesOf(const TraceStore& store, const RankData& rank) {
  std::map<std::string, size_t> out;
  for (const Track& t : rank.tracks)
    out[std::string(store.str(t.name))] = spansOf(t).size() + t.instants.size();
  return out;
}

// The rank whose process (its OS pid) is `pid`; null if none.
const RankData* rankWithPid(const TraceStore& store, int64_t pid) {
  for (const RankData& r : store.ranks())
    if (r.pid == pid) return &r;
  return nullptr;
}

// The events of one process's Kineto trace as the PyTorch profiler writes them:
// the metadata of every GPU it can see (first, before the process's own), the
// process labelled "CPU", and three launches from its thread, each with its
// flow ("ac2g", ids from `firstId`) to a kernel on GPU `gpu`: two on stream 7,
// one on stream 13, streams named "stream N " as Kineto names them.
std::string kinetoEvents(int64_t pid, int gpu, int visibleGpus, int firstId) {
  std::string out;
  auto add = [&](const std::string& event) { out += strCat(out.empty() ? "" : ",\n", event); };
  auto meta = [&](std::string_view name, int64_t p, int64_t tid, std::string_view args) {
    add(strCat(R"({"name":")", name, R"(","ph":"M","ts":0,"pid":)", p, R"(,"tid":)", tid,
               R"(,"args":)", args, "}"));
  };
  for (int d = 0; d < visibleGpus; ++d) {
    meta("process_name", d, 0, R"({"name":"python3"})");
    meta("process_labels", d, 0, strCat(R"({"labels":"GPU )", d, R"("})"));
    meta("process_sort_index", d, 0, strCat(R"({"sort_index":)", 5000000 + d, "}"));
  }
  meta("process_name", pid, 0, R"({"name":"python3"})");
  meta("process_labels", pid, 0, R"({"labels":"CPU"})");
  meta("thread_name", pid, pid, strCat(R"({"name":"thread )", pid, " (python3)\"}"));
  for (int stream : {7, 13})
    meta("thread_name", gpu, stream, strCat(R"({"name":"stream )", stream, R"( "})"));
  const int streams[] = {7, 7, 13};
  for (int k = 0; k < 3; ++k) {
    const int ts = 100 + 10 * k, id = firstId + k;
    add(strCat(R"({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":)", pid,
               R"(,"tid":)", pid, R"(,"ts":)", ts, R"(,"dur":2,"args":{"correlation":)", id, "}}"));
    add(strCat(R"({"ph":"s","id":)", id, R"(,"pid":)", pid, R"(,"tid":)", pid, R"(,"ts":)", ts,
               R"(,"cat":"ac2g","name":"ac2g"})"));
    add(strCat(R"({"ph":"X","cat":"kernel","name":"kernel )", k, R"(","pid":)", gpu, R"(,"tid":)",
               streams[k], R"(,"ts":)", ts + 5, R"(,"dur":3,"args":{"device":)", gpu,
               R"(,"stream":)", streams[k], R"(,"correlation":)", id, "}}"));
    add(strCat(R"({"ph":"f","id":)", id, R"(,"pid":)", gpu, R"(,"tid":)", streams[k], R"(,"ts":)",
               ts + 5, R"(,"cat":"ac2g","name":"ac2g","bp":"e"})"));
  }
  return out;
}

// A Kineto file around `events`; `rank` < 0: without distributedInfo.
std::string kinetoFile(const std::string& events, int rank) {
  return strCat(R"({"schemaVersion":1,)",
                rank < 0 ? std::string()
                         : strCat(R"("distributedInfo":{"backend":"nccl","rank":)", rank,
                                  R"(,"world_size":2},)"),
                "\"traceEvents\":[\n", events, "\n],\"baseTimeNanoseconds\":1700000000000000000}");
}

TEST(ChromeIngest, AOneProcessGpuJobIsOneRankWithItsGpusStreamsAsLanes) {
  // GPU 0 runs the kernels; GPUs 1 to 7 are only named, as Kineto names every visible one.
  const TraceStore store = ingestText(kinetoFile(kinetoEvents(4242, 0, 8, 1), -1));
  EXPECT_TRUE(store.warnings().empty()) << store.warnings()[0];
  ASSERT_EQ(store.ranks().size(), 1u);
  const RankData& r = store.ranks()[0];
  EXPECT_EQ(r.rank, 0);
  EXPECT_EQ(r.pid, 4242);  // the process's, though GPU 0's pid came first
  EXPECT_EQ(lanesOf(store, r),
            (std::map<std::string, size_t>{
                {"thread 4242 (python3)", 3}, {"GPU 0 / stream 7", 2}, {"GPU 0 / stream 13", 1}}));
  // Every launch is an arrow from the CPU thread to its kernel's stream.
  ASSERT_EQ(store.flows().size(), 3u);
  std::multiset<std::string> ends;
  for (const Flow& f : store.flows()) {
    EXPECT_EQ(f.from.rank, 0);
    EXPECT_EQ(f.to.rank, 0);
    EXPECT_EQ(store.str(f.from.track), "thread 4242 (python3)");
    ends.insert(std::string(store.str(f.to.track)));
  }
  EXPECT_EQ(ends, (std::multiset<std::string>{"GPU 0 / stream 7", "GPU 0 / stream 7",
                                              "GPU 0 / stream 13"}));
}

TEST(ChromeIngest, EachProcessFileKeepsItsRankAndItsOwnGpus) {
  // Two processes' files, loaded together: with distributedInfo (the first
  // file says rank 1) and without (ranks in the order given).
  for (const bool distributed : {true, false}) {
    SCOPED_TRACE(distributed ? "with distributedInfo" : "without");
    fx::TempDir dir;
    const std::string a = dir.file("a.pt.trace.json"), b = dir.file("b.pt.trace.json");
    fx::writeFile(a, kinetoFile(kinetoEvents(100, 0, 8, 1), distributed ? 1 : -1));
    fx::writeFile(b, kinetoFile(kinetoEvents(200, 1, 8, 1), distributed ? 0 : -1));
    TraceStore store;
    loadTraces(store, {a, b});
    ASSERT_EQ(store.ranks().size(), 2u);
    const RankData* first = store.findRank(distributed ? 1 : 0);
    const RankData* second = store.findRank(distributed ? 0 : 1);
    ASSERT_TRUE(first != nullptr && second != nullptr);
    EXPECT_EQ(first->pid, 100);
    EXPECT_EQ(second->pid, 200);
    EXPECT_EQ(lanesOf(store, *first),
              (std::map<std::string, size_t>{
                  {"thread 100 (python3)", 3}, {"GPU 0 / stream 7", 2}, {"GPU 0 / stream 13", 1}}));
    EXPECT_EQ(lanesOf(store, *second),
              (std::map<std::string, size_t>{
                  {"thread 200 (python3)", 3}, {"GPU 1 / stream 7", 2}, {"GPU 1 / stream 13", 1}}));
  }
}

TEST(ChromeIngest, GpusJoinTheProcessWhoseLaunchesRanOnThem) {
  // Two processes in one file (merged by hand), neither the file's own: each
  // GPU belongs to the process whose launch flows end on it. GPU 5 ran
  // kernels that no flow explains: a rank of its own, as before.
  const std::string gpu5 =
      R"({"ph":"X","cat":"kernel","name":"orphan","pid":5,"tid":7,"ts":50,"dur":1,)"
      R"("args":{"device":5,"stream":7}})";
  const TraceStore store = ingestText(kinetoFile(
      strCat(kinetoEvents(100, 0, 6, 1), ",\n", kinetoEvents(200, 1, 6, 11), ",\n", gpu5), -1));
  ASSERT_EQ(store.ranks().size(), 3u);
  const RankData* p100 = rankWithPid(store, 100);
  const RankData* p200 = rankWithPid(store, 200);
  ASSERT_TRUE(p100 != nullptr && p200 != nullptr);
  EXPECT_EQ(lanesOf(store, *p100),
            (std::map<std::string, size_t>{
                {"thread 100 (python3)", 3}, {"GPU 0 / stream 7", 2}, {"GPU 0 / stream 13", 1}}));
  EXPECT_EQ(lanesOf(store, *p200),
            (std::map<std::string, size_t>{
                {"thread 200 (python3)", 3}, {"GPU 1 / stream 7", 2}, {"GPU 1 / stream 13", 1}}));
  const RankData* alone = nullptr;
  for (const RankData& r : store.ranks())
    if (&r != p100 && &r != p200) alone = &r;
  ASSERT_NE(alone, nullptr);
  EXPECT_EQ(lanesOf(store, *alone), (std::map<std::string, size_t>{{"GPU 5 / stream 7", 1}}));
}

TEST(ChromeIngest, GpusAreKnownByTheirLabelOrByWhatTheyRan) {
  // A process_name "GPU 3" (no labels) and a pid whose kernels say they ran on
  // device 0 (no metadata at all) are GPUs of the only other process.
  const TraceStore named = ingestText(R"json([
    {"ph":"M","name":"process_name","pid":3,"args":{"name":"GPU 3"}},
    {"ph":"X","pid":3,"tid":7,"ts":5,"dur":1,"name":"k"},
    {"ph":"X","cat":"gpu_memcpy","pid":0,"tid":9,"ts":6,"dur":1,"name":"copy",
     "args":{"device":0,"stream":9}},
    {"ph":"X","pid":900,"tid":900,"ts":1,"dur":9,"name":"step"}
  ])json");
  ASSERT_EQ(named.ranks().size(), 1u);
  EXPECT_EQ(named.ranks()[0].pid, 900);
  EXPECT_EQ(lanesOf(named, named.ranks()[0]),
            (std::map<std::string, size_t>{
                {"thread 900", 1}, {"GPU 3 / stream 7", 1}, {"GPU 0 / stream 9", 1}}));

  // Not GPUs: a small pid whose "kernel" events name no device (an OS
  // kernel's, say), or another device than the pid; nor a process labelled
  // "CPU" whose pid is also a GPU's index (pid 1 in a container: Kineto
  // labels it both).
  const TraceStore others = ingestText(R"json([
    {"ph":"X","cat":"kernel","pid":2,"tid":7,"ts":5,"dur":1,"name":"irq"},
    {"ph":"X","cat":"kernel","pid":4,"tid":7,"ts":5,"dur":1,"name":"k","args":{"device":0}},
    {"ph":"M","name":"process_labels","pid":1,"args":{"labels":"CPU"}},
    {"ph":"M","name":"process_labels","pid":1,"args":{"labels":"GPU 1"}},
    {"ph":"X","pid":1,"tid":1,"ts":1,"dur":9,"name":"step"}
  ])json");
  ASSERT_EQ(others.ranks().size(), 3u);
  for (int64_t pid : {2, 4, 1}) {
    const RankData* r = rankWithPid(others, pid);
    ASSERT_NE(r, nullptr) << "pid " << pid;
    EXPECT_EQ(lanesOf(others, *r),
              (std::map<std::string, size_t>{{strCat("thread ", pid == 1 ? 1 : 7), 1}}))
        << "pid " << pid;
  }
}

// A real trace the project's tests used from HolisticTraceAnalysis (the shared traces'
// hta/as-in-project-tests/README.md says where each comes from and how it was trimmed).
std::string kinetoData(const std::string& name) {
  return ringx::testing::sharedTrace("hta/as-in-project-tests/" + name);
}

TEST(ChromeIngest, ARealOneProcessGpuTraceIsOneRank) {
  // ROCm on an MI250 (HolisticTraceAnalysis's test data): the process, GPU 2
  // with kernels, copies and annotations on stream 0, GPUs 0 to 15 named, and
  // Kineto's bookkeeping pids "Spans", "Traces" and "". No distributedInfo.
  TraceStore store;
  loadTraces(store, {kinetoData("mi250_minitoy_train_ROCm6_2_kineto.json.gz")});
  ASSERT_EQ(store.ranks().size(), 1u);
  const RankData& r = store.ranks()[0];
  EXPECT_EQ(r.pid, 597913);
  EXPECT_EQ(store.eventCount(), 115u);  // every X and i in the file
  EXPECT_EQ(lanesOf(store, r), (std::map<std::string, size_t>{{"thread 597913 (python3)", 51},
                                                              {"thread 598009 (pt_autograd_0)", 43},
                                                              {"GPU 2 / stream 0", 18},
                                                              {"PyTorch Profiler", 1},
                                                              {"Trace PyTorch Profiler", 1},
                                                              {"", 1}}));
  // Every ac2g flow that ends on the GPU: launches from the main thread and from autograd's.
  std::map<std::string, size_t> launchesFrom;
  for (const Flow& f : store.flows())
    if (store.str(f.to.track) == "GPU 2 / stream 0")
      ++launchesFrom[std::string(store.str(f.from.track))];
  EXPECT_EQ(launchesFrom, (std::map<std::string, size_t>{{"thread 597913 (python3)", 9},
                                                         {"thread 598009 (pt_autograd_0)", 7}}));
}

TEST(ChromeIngest, RealRankFilesKeepOneRankEachWithItsOwnGpu) {
  // Two ranks of a 128-rank job (HolisticTraceAnalysis's sampled traces, cut
  // to their first 100 ms): rank 0 ran on GPU 0, rank 1 on GPU 1; each file
  // names GPUs 0 to 7 and a stream 203 with nothing on it.
  TraceStore store;
  loadTraces(store, {kinetoData("sampled_rank-1.json.gz"), kinetoData("sampled_rank-0.json.gz")});
  ASSERT_EQ(store.ranks().size(), 2u);
  EXPECT_EQ(store.eventCount(), 580u + 549u);
  auto gpuLanes = [&](const RankData& r) {
    std::map<std::string, size_t> out = lanesOf(store, r);
    std::erase_if(out, [](const auto& lane) { return lane.first.rfind("GPU ", 0) != 0; });
    return out;
  };
  const RankData& r0 = store.ranks()[0];
  const RankData& r1 = store.ranks()[1];
  EXPECT_EQ(r0.rank, 0);
  EXPECT_EQ(r0.pid, 4037);
  EXPECT_EQ(gpuLanes(r0), (std::map<std::string, size_t>{{"GPU 0 / stream 7", 76},
                                                         {"GPU 0 / stream 23", 55},
                                                         {"GPU 0 / stream 25", 8},
                                                         {"GPU 0 / stream 84", 2}}));
  EXPECT_EQ(r1.rank, 1);
  EXPECT_EQ(r1.pid, 4045);
  EXPECT_EQ(gpuLanes(r1), (std::map<std::string, size_t>{{"GPU 1 / stream 7", 66},
                                                         {"GPU 1 / stream 23", 56},
                                                         {"GPU 1 / stream 25", 8},
                                                         {"GPU 1 / stream 84", 1}}));
}

TEST(ChromeIngest, ARealTraceWithASecondProcessKeepsItAsARank) {
  // A Triton kernel's trace (HolisticTraceAnalysis's test data): the process
  // Kineto labels "CPU" launched on GPU 0; one event has a pid of its own,
  // without metadata: another process, so another rank.
  TraceStore store;
  loadTraces(store, {kinetoData("triton_example.json.gz")});
  ASSERT_EQ(store.ranks().size(), 2u);
  const RankData* main = rankWithPid(store, 1670242);
  const RankData* other = rankWithPid(store, 3100453);
  ASSERT_TRUE(main != nullptr && other != nullptr);
  EXPECT_EQ(lanesOf(store, *main),
            (std::map<std::string, size_t>{{"thread 1670242 (python3.10)", 5},
                                           {"GPU 0 / stream 7", 1},
                                           {"PyTorch Profiler", 1},
                                           {"Trace PyTorch Profiler", 1},
                                           {"", 1}}));
  EXPECT_EQ(lanesOf(store, *other), (std::map<std::string, size_t>{{"thread 3100453", 1}}));
  ASSERT_EQ(store.flows().size(), 1u);
  EXPECT_EQ(store.str(store.flows()[0].to.track), "GPU 0 / stream 7");
}

TEST(ChromeIngest, UnnamedProcessesBecomeRanksInOrderOfAppearance) {
  const TraceStore store = ingestText(R"json([
    {"ph":"X","pid":42,"tid":1,"ts":1,"dur":1,"name":"a"},
    {"ph":"X","pid":7,"tid":1,"ts":1,"dur":1,"name":"b"},
    {"ph":"i","pid":42,"tid":2,"ts":3,"name":"c"},
    {"ph":"X","pid":99,"tid":1,"ts":2.5,"dur":1,"name":"d"},
    {"ph":"M","pid":99,"name":"process_name","args":{"name":"rank 1 (elsewhere)"}},
    {"ph":"M","pid":42,"name":"process_name","args":{"name":"worker"}}
  ])json");
  // 99 calls itself rank 1 (a ringx name, even after its events); 42 and 7
  // are numbered in order of appearance around it.
  ASSERT_EQ(store.ranks().size(), 3u);
  auto nameOn = [&](int rank) {
    const RankData* r = store.findRank(rank);
    if (r == nullptr || r->tracks.empty() || r->tracks[0].levels.empty()) return std::string();
    return std::string(store.str(r->tracks[0].levels[0][0].name));
  };
  EXPECT_EQ(nameOn(0), "a");
  EXPECT_EQ(nameOn(1), "d");
  EXPECT_EQ(nameOn(2), "b");
  EXPECT_EQ(store.findRank(0)->pid, 42);
  EXPECT_EQ(store.findRank(2)->pid, 7);
  EXPECT_EQ(store.findRank(0)->tracks.size(), 2u);  // "thread 1" and "thread 2"
  EXPECT_EQ(store.findRank(1)->tracks[0].levels[0][0].begin, 2500);
}

TEST(ChromeIngest, StringPidsAndTidsNameTheirProcessesAndThreads) {
  // The legacy profiler's export: "pid" a string that is not a number.
  const TraceStore store = ingestText(R"json([
    {"ph":"X","pid":"CPU functions","tid":"12","ts":1,"dur":5,"name":"aten::add"},
    {"ph":"X","pid":"CPU functions","tid":"main thread","ts":2,"dur":1,"name":"step"},
    {"ph":"X","pid":"77","tid":3,"ts":3,"dur":1,"name":"numeric text"},
    {"ph":"X","pid":"CPU functions","tid":"12","ts":7,"dur":1,"name":"aten::mul"}
  ])json");
  EXPECT_TRUE(store.warnings().empty()) << store.warnings()[0];
  EXPECT_EQ(store.eventCount(), 4u);
  ASSERT_EQ(store.ranks().size(), 2u);
  const RankData& cpu = store.ranks()[0];
  const Track* t12 = findTrack(store, cpu, "thread 12");  // "12" is the number 12
  ASSERT_NE(t12, nullptr);
  EXPECT_EQ(spansOf(*t12).size(), 2u);
  EXPECT_NE(findTrack(store, cpu, "main thread"), nullptr);  // a name, not a number
  EXPECT_EQ(store.ranks()[1].pid, 77);
}

TEST(ChromeIngest, NumericIdsAsLargeAsNamedOnesAreNumbers) {
  // Ids from 2^62 stand for string pids and tids inside the reader; a number
  // that large is still a number (it crashed the naming of its lane).
  const TraceStore store = ingestText(R"json([
    {"ph":"X","pid":4611686018427387999,"tid":4611686018427387998,"ts":1,"dur":1,"name":"a"},
    {"ph":"X","pid":"named","tid":"x","ts":1,"dur":1,"name":"b"}
  ])json");
  ASSERT_EQ(store.ranks().size(), 2u);
  EXPECT_EQ(store.ranks()[0].pid, 4611686018427387999);
  EXPECT_EQ(lanesOf(store, store.ranks()[0]),
            (std::map<std::string, size_t>{{"thread 4611686018427387998", 1}}));
  EXPECT_EQ(lanesOf(store, store.ranks()[1]), (std::map<std::string, size_t>{{"x", 1}}));
}

TEST(ChromeIngest, AsyncEventsPairByIdAndStackOnTheirCategorysLane) {
  const TraceStore store = ingestText(R"json({"traceEvents":[
    {"ph":"b","cat":"io","id":1,"pid":1,"tid":1,"ts":10,"name":"read","args":{"file":"a"}},
    {"ph":"b","cat":"io","id":"0x2","pid":1,"tid":2,"ts":12,"name":"read"},
    {"ph":"n","cat":"io","id":1,"pid":1,"tid":1,"ts":13,"name":"halfway"},
    {"ph":"b","cat":"io","id":1,"pid":1,"tid":1,"ts":14,"name":"inner"},
    {"ph":"e","cat":"io","id":1,"pid":1,"tid":1,"ts":15,"name":"inner"},
    {"ph":"e","cat":"io","id":1,"pid":1,"tid":3,"ts":20,"name":"read","args":{"bytes":9}},
    {"ph":"e","cat":"io","id":"0x2","pid":1,"tid":2,"ts":30},
    {"ph":"e","cat":"io","id":5,"pid":1,"tid":2,"ts":31,"name":"never begun"},
    {"ph":"b","cat":"net","id2":{"local":"0x9"},"pid":1,"tid":1,"ts":40,"name":"open"},
    {"ph":"X","pid":1,"tid":1,"ts":50,"dur":1,"name":"last"}
  ]})json");
  const RankData& r = store.ranks().at(0);
  const Track* io = findTrack(store, r, "async io");
  ASSERT_NE(io, nullptr);
  const std::vector<Span> spans = spansOf(*io);
  ASSERT_EQ(spans.size(), 3u);  // read [10,20], read [12,30] overlapping, inner [14,15]
  std::multiset<std::pair<int64_t, int64_t>> got;
  for (const Span& s : spans) got.insert({s.begin, s.end});
  EXPECT_EQ(got, (std::multiset<std::pair<int64_t, int64_t>>{
                     {10000, 20000}, {12000, 30000}, {14000, 15000}}));
  EXPECT_EQ(io->levels.size(), 3u);  // the overlap and the nesting stack
  for (const Span& s : spans) {
    if (s.begin != 10000) continue;
    EXPECT_EQ(store.stringArg(r, s, "file"), "a");  // the "b"'s args and the "e"'s
    EXPECT_EQ(store.intArg(r, s, "bytes"), 9);
  }
  ASSERT_EQ(io->instants.size(), 1u);
  EXPECT_EQ(store.str(io->instants[0].name), "halfway");
  const Track* net = findTrack(store, r, "async net");
  ASSERT_NE(net, nullptr);
  EXPECT_EQ(spansOf(*net).at(0).end, 51000);  // never ended: ends where the trace does
  ASSERT_EQ(store.warnings().size(), 2u);
  EXPECT_NE(store.warnings()[0].find("1 \"E\" without an open \"B\""), std::string::npos)
      << store.warnings()[0];
  EXPECT_NE(store.warnings()[1].find("1 \"B\" or \"b\" events"), std::string::npos)
      << store.warnings()[1];
}

TEST(ChromeIngest, FlowsBecomeArrowsBetweenLanesAndRanks) {
  const TraceStore store = ingestText(R"json({"traceEvents":[
    {"ph":"X","pid":1,"tid":1,"ts":1,"dur":4,"name":"launch"},
    {"ph":"X","pid":2,"tid":5,"ts":6,"dur":4,"name":"kernel"},
    {"ph":"X","pid":2,"tid":6,"ts":12,"dur":4,"name":"copy"},
    {"ph":"s","cat":"c","id":1,"pid":1,"tid":1,"ts":2,"name":"chain"},
    {"ph":"f","cat":"c","id":1,"pid":2,"tid":6,"ts":13,"bp":"e","name":"chain"},
    {"ph":"t","cat":"c","id":1,"pid":2,"tid":5,"ts":7,"name":"chain"},
    {"ph":"s","cat":"other","id":1,"pid":1,"tid":1,"ts":3,"name":"alone"},
    {"ph":"f","cat":"c","id":2,"pid":1,"tid":99,"ts":3,"name":"no lane"},
    {"ph":"s","cat":"c","id":2,"pid":1,"tid":1,"ts":2,"name":"to no lane"},
    {"ph":"X","pid":1,"tid":1,"ts":20,"dur":2,"name":"out","bind_id":"q","flow_out":true},
    {"ph":"X","pid":2,"tid":5,"ts":30,"dur":2,"name":"in","bind_id":"q","flow_in":true}
  ]})json");
  ASSERT_EQ(store.flows().size(), 3u);
  const Flow& a = store.flows()[0];  // s -> t, then t -> f (sorted by start)
  const Flow& b = store.flows()[1];
  const Flow& c = store.flows()[2];
  EXPECT_EQ(a.from.rank, 0);
  EXPECT_EQ(a.from.time, 2000);
  EXPECT_EQ(a.to.rank, 1);
  EXPECT_EQ(store.str(a.to.track), "thread 5");
  EXPECT_EQ(a.to.time, 7000);
  EXPECT_EQ(b.from.time, 7000);
  EXPECT_EQ(store.str(b.to.track), "thread 6");
  EXPECT_EQ(b.to.time, 13000);
  EXPECT_EQ(store.str(c.name), "out");  // bind_id: from the end of "out" to "in"'s start
  EXPECT_EQ(c.from.time, 22000);
  EXPECT_EQ(c.to.time, 30000);
  EXPECT_EQ(c.to.rank, 1);
  ASSERT_EQ(store.warnings().size(), 1u);
  EXPECT_NE(store.warnings()[0].find("3 flow events in 'test.json' have no other end"),
            std::string::npos)
      << store.warnings()[0];
}

// `text` gzip-compressed, as the profiler's use_gzip=True writes it.
std::string gzipped(const std::string& text) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, text.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

TEST(ChromeIngest, GzipCompressedTracesOpenAndACutOneReadsWhatCameBefore) {
  fx::TempDir dir;
  std::string json = "[";
  for (int i = 0; i < 2000; ++i)
    json += strCat(i ? "," : "", "{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":", i * 10,
                   ",\"dur\":5,\"name\":\"op ", i % 7, "\"}");
  json += "]";
  const std::string gz = gzipped(json);
  const std::string path = dir.file("rank0.pt.trace.json.gz");
  fx::writeFile(path, gz);
  {
    TraceStore store;
    loadTraces(store, {path});
    EXPECT_EQ(store.eventCount(), 2000u);
    EXPECT_TRUE(store.warnings().empty());
  }
  // Cut in the middle, as a crash leaves it: the events before the cut.
  const std::string cut = dir.file("cut.json.gz");
  fx::writeFile(cut, gz.substr(0, gz.size() / 2));
  TraceStore store;
  loadTraces(store, {cut});
  EXPECT_GT(store.eventCount(), 100u);
  EXPECT_LT(store.eventCount(), 2000u);
  ASSERT_FALSE(store.warnings().empty());
  EXPECT_NE(store.warnings()[0].find("is cut off or damaged after"), std::string::npos)
      << store.warnings()[0];
  // Not gzip after all: a clear error, not a crash.
  const std::string bad = dir.file("bad.json.gz");
  fx::writeFile(bad, std::string("\x1f\x8b", 2) + "not really gzip");
  TraceStore none;
  EXPECT_THROW(loadTraces(none, {bad}), trace::FormatError);
}

// The profiler's times (baseTimeNanoseconds + ts, Unix-epoch) land on the
// ringx rank's aligned clock through the stream's (steady, wall) start pair.
TEST(ChromeIngest, AProfilerFileAlignsToItsRanksRingxClockReference) {
  fx::TempDir dir;
  constexpr int64_t kWall = 1700000000000000000;  // the fixture's startWallNs
  fx::RankStream r0(0, 2, "node-a", 50 * kMs);
  r0.instant(Category::kStep, trace::track::kSteps, "start", 50 * kMs, {});
  r0.writeTo(dir.file("rank-0.ringx"));
  fx::RankStream r1(1, 2, "node-a", 80 * kMs);
  r1.clockSync(80 * kMs, -7 * kMs, 1000)  // rank 1's clock runs 7 ms off rank 0's
      .instant(Category::kStep, trace::track::kSteps, "start", 80 * kMs, {});
  r1.writeTo(dir.file("rank-1.ringx"));
  auto profilerFile = [&](int rank) {
    // An op 2.5 ms after the rank's stream started, by the wall clock.
    const std::string path = dir.file(strCat("rank", rank, ".pt.trace.json"));
    fx::writeFile(path, strCat(R"({"distributedInfo": {"rank": )", rank,
                               R"(}, "baseTimeNanoseconds": )", kWall - 1000000000,
                               R"(, "traceEvents": [{"ph":"X","pid":9,"tid":9,"ts":1002500,)",
                               R"("dur":1,"name":"aten::mm"}, {"ph":"s","id":1,"cat":"c","pid":9,)",
                               R"("tid":9,"ts":1002500}, {"ph":"f","id":1,"cat":"c","pid":9,)",
                               R"("tid":9,"ts":1002501}]})"));
    return path;
  };
  TraceStore store;
  // Given first, read after the ringx trace all the same.
  loadTraces(store, {profilerFile(0), profilerFile(1), dir.path()});
  ASSERT_EQ(store.ranks().size(), 2u);
  for (int rank : {0, 1}) {
    const RankData& r = *store.findRank(rank);
    const Track* steps = findTrack(store, r, trace::track::kSteps);
    const Track* ops = findTrack(store, r, "thread 9");
    ASSERT_TRUE(steps != nullptr && ops != nullptr);
    const int64_t start = steps->instants.at(0).time;  // the stream's start, aligned
    EXPECT_EQ(spansOf(*ops).at(0).begin, start + 2500000) << "rank " << rank;
  }
  EXPECT_NE(store.findRank(1)->tracks.size(), 0u);
  const int64_t start1 =
      findTrack(store, *store.findRank(1), trace::track::kSteps)->instants[0].time;
  EXPECT_NE(start1, 80 * kMs);  // rank 1 really was moved by its clock sync
  ASSERT_EQ(store.flows().size(), 2u);
  EXPECT_EQ(store.flows()[1].from.time, start1 + 2500000);
  EXPECT_EQ(store.flows()[1].to.time, start1 + 2501000);
}

TEST(ChromeIngest, TwoFilesWithoutRankInformationAreTwoRanks) {
  fx::TempDir dir;
  fx::writeFile(dir.file("a.json"),
                R"([{"ph":"X","pid":"CPU functions","tid":1,"ts":1,"dur":1,"name":"a"}])");
  fx::writeFile(dir.file("b.json"),
                R"([{"ph":"X","pid":"CPU functions","tid":1,"ts":1,"dur":1,"name":"b"}])");
  TraceStore store;
  loadTraces(store, {dir.file("a.json"), dir.file("b.json")});
  ASSERT_EQ(store.ranks().size(), 2u);
  EXPECT_EQ(store.ranks()[1].source, dir.file("b.json"));
}

TEST(ChromeIngest, MalformedEventsAreSkippedAndCountedInOneWarning) {
  const TraceStore store = ingestText(R"json({"traceEvents":[
    {"ph":"X","pid":1,"tid":1,"ts":1,"dur":2,"name":"good"},
    {"ph":"X","pid":1,"tid":1,"dur":2,"name":"no ts"},
    {"ph":"X","pid":1,"tid":1,"ts":"5","dur":2,"name":"string ts"},
    {"ph":"X","pid":[1],"tid":1,"ts":5,"dur":2,"name":"array pid"},
    {"pid":1,"tid":1,"ts":5,"name":"no ph"},
    {"ph":"X","pid":1,"tid":1,"ts":5,"dur":2,"name":17},
    42, "text", null, [1, 2],
    {"ph":"Z","pid":1,"tid":1,"ts":5},
    {"ph":"X","pid":1,"tid":1,"ts":1.5e3,"dur":1E1,"name":"exponent"},
    {"ph":"X","pid":1.0,"tid":1,"ts":-2,"dur":-5,"name":"negative"}
  ]})json");
  EXPECT_EQ(store.eventCount(), 3u);
  const RankData& r = store.ranks().at(0);
  const std::vector<Span> spans = spansOf(r.tracks.at(0));
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0].begin, -2000);  // negative dur: zero length
  EXPECT_EQ(spans[0].end, -2000);
  EXPECT_EQ(spans[2].begin, 1500000);
  EXPECT_EQ(spans[2].end, 1510000);
  ASSERT_EQ(store.warnings().size(), 2u);
  EXPECT_EQ(
      store.warnings()[0],
      "9 events in 'test.json' were skipped: 4 not JSON objects, 1 without \"ph\", 1 "
      "without a numeric \"ts\", 3 with a field of the wrong type (pid, tid, dur, name, ...)");
}

TEST(ChromeIngest, BytesThatAreNotUtf8BecomeQuestionMarks) {
  const TraceStore store = ingestText(
      "[{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":1,"
      "\"name\":\"bad \xff\xfe name\"}]");
  ASSERT_EQ(store.eventCount(), 1u);
  const RankData& r = store.ranks()[0];
  EXPECT_EQ(store.str(r.tracks[0].levels[0][0].name), "bad ?? name");
  ASSERT_EQ(store.warnings().size(), 1u);
  EXPECT_NE(store.warnings()[0].find("2 bytes that are not UTF-8"), std::string::npos);
}

TEST(ChromeIngest, AnArrayLeftOpenByAWriterStillRunningReads) {
  // The format allows it, and chrome://tracing reads it.
  for (const char* text : {"[{\"ph\":\"X\",\"pid\":1,\"ts\":1,\"dur\":1,\"name\":\"a\"},\n",
                           "[{\"ph\":\"X\",\"pid\":1,\"ts\":1,\"dur\":1,\"name\":\"a\"}  "}) {
    const TraceStore store = ingestText(text);
    EXPECT_EQ(store.eventCount(), 1u) << text;
    ASSERT_EQ(store.warnings().size(), 1u);
    EXPECT_NE(store.warnings()[0].find("without closing its event array"), std::string::npos);
  }
  EXPECT_EQ(ingestText("[").eventCount(), 0u);
}

// The message of the FormatError that ingesting `text` throws ("" if none).
std::string formatError(const std::string& text) {
  try {
    ingestText(text, "x.json");
  } catch (const trace::FormatError& e) {
    return e.what();
  }
  return "";
}

TEST(ChromeIngest, TextThatIsNotAChromeTraceIsAFormatErrorSayingWhere) {
  struct Case {
    std::string text;
    std::string expect;  // part of the message
  };
  const std::vector<Case> cases = {
      {"", "the file is empty"},
      {"  \n", "the file is empty"},
      {"hello", "JSON error at byte 0: the text does not start with '{' or '['"},
      {"42", "does not start with"},
      {"{}", "no \"traceEvents\" array"},
      {"{\"traceEvents\": 5}", "\"traceEvents\" is not an array"},
      {"{\"traceEvents\": [], \"x\": }", "JSON error at byte 25"},
      {"{\"traceEvents\": []} trailing", "unexpected text after the top-level object"},
      {"[] []", "unexpected text after the event array"},
      {"{\"traceEvents\": [{\"ph\":\"X\",\"ts\":1}", "the file ends inside the \"traceEvents\""},
      {"{\"traceEvents\": [{\"ph\":\"X\",\"ts\":1", "the file ends inside an event"},
      {"{\"traceEvents\": [{\"ph\":\"X\",\"name\":\"cut", "the file ends inside an event"},
      {"{\"traceEvents\": [{\"ph\":\"X\"}, ]}", "an event is missing"},
      {"{\"traceEvents\": [{\"ph\":\"X\"]}", "brackets do not match"},
      {"{\"traceEvents\": [{\"ph\" \"X\"}]}", "JSON error at byte"},
      {"{\"traceEvents\": [{\"ph\":\"X\",}]}", "JSON error at byte"},
      {"{\"traceEvents\": [{\"ph\":\"X\"} {\"ph\":\"X\"}]}", "expected ',' or ']' after an event"},
      {"{\"traceEvents\": [], \"otherData\": {\"a\": [}}", "JSON error"},
      {"{\"traceEvents\": []", "expected ',' or '}'"},
  };
  for (const Case& c : cases) {
    const std::string message = formatError(c.text);
    EXPECT_NE(message.find("'x.json' is not a Chrome trace"), std::string::npos)
        << c.text << " -> " << message;
    EXPECT_NE(message.find(c.expect), std::string::npos) << c.text << " -> " << message;
  }
  // Cut off mid-file: the message says so, and how far it got.
  const std::string message = formatError(
      "{\"traceEvents\": [{\"ph\":\"X\",\"pid\":1,\"ts\":1,\"dur\":1,\"name\":\"a\"},{\"ph\"");
  EXPECT_NE(message.find("is it cut off?"), std::string::npos) << message;
}

TEST(ChromeIngest, MissingFileIsAnIoError) {
  fx::TempDir dir;
  TraceStore store;
  try {
    ingestChromeTraceFile(store, dir.file("missing.json"));
    FAIL() << "no error";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("missing.json"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ingestChromeTraceFile(store, dir.path()), IoError);
}

// Ingests `text`: fine when it reads or throws FormatError; anything else (or
// a crash, which ends the test binary) is a failure.
void expectReadsOrFormatError(const std::string& text, const std::string& what) {
  try {
    TraceStore store;
    ingestChromeTraceText(store, text, "fuzz.json");
    for (const RankData& r : store.ranks())
      for (const Track& t : r.tracks)
        for (const auto& level : t.levels)
          for (size_t i = 1; i < level.size(); ++i) ASSERT_LE(level[i - 1].end, level[i].begin);
  } catch (const trace::FormatError&) {
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": " << e.what();
  }
}

TEST(ChromeIngest, TruncatedAndCorruptedFilesNeverCrash) {
  fx::TempDir dir;
  std::ostringstream json;
  trace::writeChromeTrace(ringxJob(dir), json);
  const std::vector<std::string> inputs = {
      json.str(),
      R"json([{"ph":"B","pid":1,"tid":5,"ts":0,"name":"step","args":{"n":[1,{"x":"},{"}]}},
          {"ph":"E","pid":1,"tid":5,"ts":2.5},{"ph":"C","pid":1,"ts":1,"name":"c","args":{"a":1,"b":2}},
          {"ph":"i","pid":2,"ts":1e2,"name":"\u00e9\"\\"},{"ph":"M","pid":2,"name":"thread_name",
          "args":{"name":"t"}}])json"};
  std::mt19937 rng(12345);
  for (const std::string& input : inputs) {
    for (int i = 0; i < 200; ++i) {
      const size_t cut = std::uniform_int_distribution<size_t>(0, input.size())(rng);
      expectReadsOrFormatError(input.substr(0, cut), strCat("cut at ", cut));
    }
    for (int i = 0; i < 200; ++i) {
      std::string corrupt = input;
      const int flips = std::uniform_int_distribution<int>(1, 5)(rng);
      for (int f = 0; f < flips; ++f) {
        const size_t at = std::uniform_int_distribution<size_t>(0, corrupt.size() - 1)(rng);
        corrupt[at] = static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
      }
      expectReadsOrFormatError(corrupt, strCat("corrupt variant ", i));
    }
  }
}

// `events` spans in Chrome JSON over 4 processes x 3 threads, `tricky` adding
// args whose text looks like the end of an event ("},{" in nested arrays and
// strings) so that some guessed chunk ends are wrong and must be found again.
std::string generatedTrace(int events, bool tricky) {
  std::string out = "{\"traceEvents\":[\n";
  for (int pid = 1; pid <= 4; ++pid)
    for (int tid = 1; tid <= 3; ++tid)
      out += strCat("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":", pid, ",\"tid\":", tid,
                    ",\"args\":{\"name\":\"lane ", tid, "\"}},\n");
  for (int i = 0; i < events; ++i) {
    const int pid = 1 + i % 4, tid = 1 + (i / 4) % 3;
    out += strCat("{\"ph\":\"X\",\"pid\":", pid, ",\"tid\":", tid, ",\"ts\":", i,
                  ".007,\"dur\":0.5,\"name\":\"op", i % 17, "\",\"cat\":\"gen\",\"args\":{");
    if (tricky && i % 3 == 0) {
      out += "\"list\":[{\"a\":1},\n{\"b\":2}],\"text\":\"},{\\\"ph\\\":\\\"X\\\"}, {\",";
    }
    out += strCat("\"i\":", i, "}}", i + 1 < events ? ",\n" : "\n");
  }
  out += "],\"otherData\":{\"generator\":\"test\"}}\n";
  return out;
}

void expectGenerated(const TraceStore& store, int events) {
  ASSERT_EQ(store.eventCount(), static_cast<uint64_t>(events));
  ASSERT_EQ(store.ranks().size(), 4u);
  std::vector<bool> seen(static_cast<size_t>(events), false);
  for (const RankData& r : store.ranks()) {
    EXPECT_EQ(r.tracks.size(), 3u);
    for (const Track& t : r.tracks)
      for (const Span& s : spansOf(t)) {
        const int64_t i = store.intArg(r, s, "i");
        ASSERT_GE(i, 0);
        ASSERT_LT(i, events);
        EXPECT_FALSE(seen[static_cast<size_t>(i)]) << "event " << i << " twice";
        seen[static_cast<size_t>(i)] = true;
        EXPECT_EQ(s.begin, i * 1000 + 7);
        EXPECT_EQ(s.end, i * 1000 + 507);
        EXPECT_EQ(r.rank, i % 4);
      }
  }
  EXPECT_TRUE(store.warnings().empty()) << store.warnings()[0];
}

TEST(ChromeIngest, LargeFileReadsInChunksWithEveryEventOnce) {
  constexpr int kEvents = 200000;
  fx::TempDir dir;
  const std::string path = dir.file("big.json");
  fx::writeFile(path, generatedTrace(kEvents, false));
  TraceStore store;
  ingestChromeTraceFile(store, path);
  expectGenerated(store, kEvents);
}

TEST(ChromeIngest, ChunkEndsThatLookRightButAreNotAreFoundAgain) {
  constexpr int kEvents = 60000;
  const std::string text = generatedTrace(kEvents, true);
  ASSERT_GT(text.size(), 4u << 20);  // several chunks
  TraceStore store;
  ingestChromeTraceText(store, text, "tricky.json");
  expectGenerated(store, kEvents);
  const RankData& r = store.ranks()[0];
  const Span& first = r.tracks[0].levels[0][0];
  EXPECT_EQ(store.stringArg(r, first, "list"), "[{\"a\":1},\n{\"b\":2}]");
  EXPECT_EQ(store.stringArg(r, first, "text"), "},{\"ph\":\"X\"}, {");
}

}  // namespace
}  // namespace ringx::model
