// torch's own Flight Recorder dumps in the viewer (trace/model/torch_flight_ingest.h): a
// directory of them (NCCL's _dump_<N> pickles of the shared Megatron job, or a gloo job's JSON
// built here) or one of them is recognised, each rank's entries become collective spans on the
// wall clock with the group's members as the dumps give them, inferred where they list none.
#include "trace/model/torch_flight_ingest.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "analysis/trace_analyses.h"
#include "tests/cpp/shared_traces.h"
#include "tests/cpp/trace/torch_flight_fixture.h"
#include "tests/cpp/trace/trace_fixture.h"
#include "trace/model/flight_ingest.h"
#include "trace/model/loader.h"

namespace ringx::model {
namespace {

namespace fx = trace::fixture;

// Every span of a rank's track, level by level.
std::vector<Span> spansOf(const TraceStore& store, int32_t rank, const std::string& track) {
  std::vector<Span> out;
  const RankData* r = store.findRank(rank);
  if (!r) return out;
  const int t = r->findTrack(store.strings().find(track));
  if (t < 0) return out;
  for (const auto& level : r->tracks[size_t(t)].levels)
    out.insert(out.end(), level.begin(), level.end());
  std::sort(out.begin(), out.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  return out;
}

std::string stringArg(const TraceStore& store, int32_t rank, const Span& s, const char* key) {
  return std::string(store.stringArg(*store.findRank(rank), s, key));
}

int64_t intArg(const TraceStore& store, int32_t rank, const Span& s, const char* key) {
  return store.intArg(*store.findRank(rank), s, key);
}

// The gpu_error_1st run: rank 12 never enqueued the all_to_all seq 20537 of group 74 (ranks
// 12-15) that ranks 13-15 have pending.
TEST(TorchFlightIngest, NcclDumpsOpenAsADirectoryOrOneFileOnTheirWallClock) {
  const std::string dir = ringx::testing::sharedTrace("fr/nvrx_megatron16/gpu_error_1st");
  EXPECT_EQ(detectFormat(dir), TraceFormat::kTorchFlightDump);
  EXPECT_EQ(detectFormat(dir + "/_dump_12"), TraceFormat::kTorchFlightDump);
  const trace::TorchFlightSet set = trace::readTorchFlightDumps(dir);
  TraceStore store;
  loadTraces(store, {dir});
  ASSERT_EQ(store.ranks().size(), 16u);
  ASSERT_NE(store.torchFlight(), nullptr);
  EXPECT_EQ(store.torchFlight()->dumps.size(), 16u);
  size_t entries = 0;
  for (const trace::TorchFlightDump& d : set.dumps) entries += d.entries.size();
  EXPECT_EQ(store.eventCount(), entries);  // every entry names its group and a time

  const std::string group = "74 (EXPERT_MODEL_PARALLEL_GROUP)";
  const std::vector<Span> spans = spansOf(store, 13, "comm:" + group);
  ASSERT_FALSE(spans.empty());
  const trace::TorchFlightDump& rank13 = set.dumps[13];
  ASSERT_EQ(rank13.rank, 13);
  int64_t firstCreated = INT64_MAX;
  for (const trace::TorchFlightEntry& e : rank13.entries)
    if (e.group == "74") firstCreated = std::min(firstCreated, e.createdNs);
  EXPECT_EQ(spans.front().begin, firstCreated);  // the wall clock, as the dump has it
  EXPECT_EQ(store.str(spans.front().name), "all_to_all");
  EXPECT_EQ(stringArg(store, 13, spans.front(), trace::arg::kGroup), group);
  EXPECT_EQ(intArg(store, 13, spans.front(), trace::arg::kGroupSize), 4);
  EXPECT_EQ(intArg(store, 13, spans.front(), trace::arg::kGroupRank), 1);     // pg_config's order
  EXPECT_EQ(stringArg(store, 13, spans.front(), kFlightStateArg), "issued");  // "scheduled"

  const std::vector<analysis::CollectiveRow> rows = analysis::matchCollectives(store);
  const analysis::CollectiveRow* hung = nullptr;
  for (const analysis::CollectiveRow& r : rows)
    if (r.group == group && r.seq == 20537) hung = &r;
  ASSERT_NE(hung, nullptr);
  EXPECT_EQ(hung->op, "all_to_all");
  EXPECT_EQ(hung->groupSize, 4);
  for (const analysis::CollectiveRank& r : hung->ranks) EXPECT_NE(r.rank, 12);
}

// A gloo job's JSON dumps (as torch 2.13 writes them): no members listed, so group 1's are the
// ranks whose dumps name it (1-3) and the default group every rank; a rank that issued nothing is
// there with no events; a finished entry is an instant (gloo records no completion), one pending
// lasts at least until the latest time its rank's dump records.
TEST(TorchFlightIngest, GlooDumpsTakeTheirMembersFromTheDumps) {
  fx::TempDir dir;
  for (int32_t rank = 0; rank < 5; ++rank) {
    std::map<std::string, int64_t> status{{"0", 3}};
    std::vector<fx::GlooCall> calls = fx::worldCalls(3);
    if (rank == 4) {
      status.clear();
      calls.clear();
    } else if (rank > 0) {
      status["1"] = rank == 2 ? 2 : 3;
      // Rank 1's last two still pending; the group's calls 10 ms after the world's.
      for (int64_t seq = 1; seq <= status["1"]; ++seq)
        calls.push_back({"1", "1", "undefined", seq, "gloo:all_reduce", !(rank == 1 && seq >= 2),
                         256, fx::kGlooEpochNs + (10 + seq) * 1'000'000});
    }
    fx::writeFile(dir.file("fr_trace_rank_" + std::to_string(rank) + ".json"),
                  fx::glooDump(rank, 5, status, calls));
  }
  EXPECT_EQ(detectFormat(dir.path()), TraceFormat::kTorchFlightDump);
  EXPECT_EQ(detectFormat(dir.file("fr_trace_rank_1.json")), TraceFormat::kTorchFlightDump);
  fx::writeFile(dir.file("chrome.json"), R"({"traceEvents": []})");  // still a Chrome trace
  EXPECT_EQ(detectFormat(dir.file("chrome.json")), TraceFormat::kChromeJson);
  std::filesystem::remove(dir.file("chrome.json"));

  TraceStore store;
  loadTraces(store, {dir.path()});
  ASSERT_EQ(store.ranks().size(), 5u);
  EXPECT_EQ(store.eventCount(), 3u + 6 + 5 + 6);  // rank 4: none
  const std::vector<Span> sub = spansOf(store, 2, "comm:1");
  ASSERT_EQ(sub.size(), 2u);
  EXPECT_EQ(intArg(store, 2, sub[0], trace::arg::kGroupSize), 3);
  EXPECT_EQ(intArg(store, 2, sub[0], trace::arg::kGroupRank), 1);
  EXPECT_EQ(intArg(store, 2, sub[1], trace::arg::kSeq), 2);
  EXPECT_EQ(sub[0].begin, fx::kGlooEpochNs + 11'000'000);
  EXPECT_EQ(sub[0].end, sub[0].begin);
  EXPECT_EQ(stringArg(store, 2, sub[0], kTorchStateArg), "scheduled");
  EXPECT_EQ(intArg(store, 2, sub[0], kTorchRetiredArg), 1);
  EXPECT_EQ(stringArg(store, 2, sub[0], kTorchInputSizeArg), "256");
  EXPECT_EQ(intArg(store, 2, sub[0], trace::arg::kBytes), 1024);
  const std::vector<Span> world = spansOf(store, 0, "comm:0 (default_pg)");
  ASSERT_EQ(world.size(), 3u);
  EXPECT_EQ(intArg(store, 0, world[0], trace::arg::kGroupSize), 5);
  // Rank 1's seqs 2 and 3 of group 1 are still pending: issued, and seq 2 lasts until seq 3 was
  // created, the latest time rank 1's dump records.
  const std::vector<Span> pending = spansOf(store, 1, "comm:1");
  ASSERT_EQ(pending.size(), 3u);
  EXPECT_EQ(stringArg(store, 1, pending[1], kFlightStateArg), "issued");
  EXPECT_EQ(intArg(store, 1, pending[1], kTorchRetiredArg), 0);
  EXPECT_EQ(pending[1].begin, fx::kGlooEpochNs + 12'000'000);
  EXPECT_EQ(pending[1].end, fx::kGlooEpochNs + 13'000'000);
  EXPECT_EQ(stringArg(store, 1, pending[0], kFlightStateArg), "");  // retired: finished
  ASSERT_NE(store.findRank(4), nullptr);
  EXPECT_EQ(store.findRank(4)->tracks.size(), 0u);
}

// torch.profiler's traces name the process groups too (distributedInfo's pg_config, in their
// first bytes) but are Chrome traces: a file of one, or a directory of them with or without a
// ringx trace, never opens as Flight Recorder dumps (the profiler and sample tests caught it).
TEST(TorchFlightIngest, AProfilerTraceThatNamesItsGroupsIsNoDump) {
  fx::TempDir dir;
  const std::string kineto =
      R"({"schemaVersion": 1, "deviceProperties": [], "distributedInfo": {"backend": "gloo", )"
      R"("rank": 0, "world_size": 2, "pg_count": 1, "pg_config": [{"pg_name": "0", "pg_desc": )"
      R"("default_pg", "backend_config": "cpu:gloo", "pg_size": 2, "ranks": [0, 1]}]}, )"
      R"("traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, )"
      R"("ts": 1, "dur": 2}]})";
  fx::writeFile(dir.file("rank0.pt.trace.json"), kineto);
  EXPECT_FALSE(trace::looksLikeTorchFlightDump(kineto));
  EXPECT_EQ(detectFormat(dir.file("rank0.pt.trace.json")), TraceFormat::kChromeJson);
  EXPECT_NE(detectFormat(dir.path()), TraceFormat::kTorchFlightDump);
  const std::string nccl = ringx::testing::sharedTrace("nccl/param_dlrm_8rank");
  EXPECT_NE(detectFormat(nccl), TraceFormat::kTorchFlightDump);
}

TEST(TorchFlightIngest, ADirectoryWhoseDumpsAllFailToReadIsAnError) {
  fx::TempDir dir;
  fx::writeFile(dir.file("fr_trace_rank_0.json"), R"({"pg_config": {"0": )");  // cut off
  EXPECT_EQ(detectFormat(dir.path()), TraceFormat::kTorchFlightDump);
  TraceStore store;
  EXPECT_THROW(loadTraces(store, {dir.path()}), trace::FormatError);
}

}  // namespace
}  // namespace ringx::model
