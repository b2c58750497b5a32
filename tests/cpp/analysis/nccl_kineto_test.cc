// NCCL and RCCL kernels of profiler traces as collectives matched across ranks
// (trace/model/chrome_nccl.cc, analysis/collective_matching.cc): on real traces of other
// projects (../shared/traces/nccl/), whose figures below were read off their JSON by hand, and
// on a small generated pair of ranks for the rules those lack.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "analysis/trace_analyses.h"
#include "base/error.h"
#include "tests/cpp/shared_traces.h"
#include "trace/format/collective_key.h"
#include "trace/model/aggregate_lanes.h"
#include "trace/model/chrome_ingest.h"
#include "trace/model/loader.h"

namespace ringx::analysis {
namespace {

using ringx::testing::sharedTrace;

std::vector<std::string> filesIn(const std::string& folder) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(sharedTrace(folder))) {
    if (e.path().string().find(".json") != std::string::npos) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The string argument `key` of a collective's span on one of its ranks.
std::string argOf(const TraceStore& store, const CollectiveRank& r, const char* key) {
  const model::RankData& rank = *store.findRank(r.rank);
  const model::Span& s = rank.tracks[r.span.track].levels[r.span.level][r.span.index];
  return std::string(store.stringArg(rank, s, key));
}

// DLRM on 8 V100s (torch ~2.1): kernels with no process group, size or sequence number, all on
// each rank's stream 84, launched in ProfilerStep#10: matched by their order on the stream.
// Per collective, from the files: the op of the "nccl:" annotation around its launch, the
// input's dims x type there, the latest kernel start minus the earliest (us), the last rank.
TEST(NcclKineto, EightRanksOfAnOldTraceMatchByTheirOrderOnTheStream) {
  model::TraceStore store;
  model::loadTraces(store, filesIn("nccl/param_dlrm_8rank"));
  ASSERT_EQ(store.ranks().size(), 8u);
  const std::vector<CollectiveRow> rows = matchCollectives(store);
  struct ExpectedCollective {
    const char* op;
    int64_t bytes, skewUs;
    int32_t last;
  };
  const ExpectedCollective expected[] = {
      {"alltoall", 6144 * 4, 7624, 7},   {"alltoall", 24 * 8, 1101, 7},
      {"alltoall", 384 * 4, 168, 7},     {"alltoall", 3392 * 4, 125, 7},
      {"allreduce", 394241 * 4, 223, 7}, {"alltoall", 6144 * 4, 534, 5},
      {"allreduce", 112 * 4, 584, 5},    {"allreduce", 226960 * 4, 885, 4}};
  ASSERT_EQ(rows.size(), std::size(expected));
  for (size_t i = 0; i < rows.size(); ++i) {
    const CollectiveRow& row = rows[i];
    SCOPED_TRACE(strCat("collective ", i));
    EXPECT_EQ(row.op, expected[i].op);
    EXPECT_EQ(row.group, "nccl stream 1");
    EXPECT_EQ(row.seq, 10 * 1000000 + static_cast<int64_t>(i));  // step 10, place i
    EXPECT_EQ(row.ranks.size(), 8u);
    EXPECT_EQ(row.groupSize, 8);  // the world, from distributedInfo
    EXPECT_EQ(row.bytes, expected[i].bytes);
    EXPECT_EQ(row.arrivalSkewNs, expected[i].skewUs * 1000);
    EXPECT_EQ(row.lastArrivalRank, expected[i].last);
    EXPECT_FALSE(row.mismatch);
    EXPECT_EQ(argOf(store, row.ranks[0], trace::kMatchedByArg),
              "NCCL stream and order in profiler step");
    EXPECT_EQ(argOf(store, row.ranks[0], "kernel").rfind("ncclKernel_", 0), 0u);
  }
}

// RCCL on an MI300X: every kernel "ncclDevKernel_Generic"; 12 carry torch's metadata and were
// launched in ProfilerStep#15-17, four a step (broadcast 9600 and 20 elements, allreduce 2873320
// and 8816192, bfloat16 but the 20: long); 5 were launched before profiling began (no launch in
// the file), so their step cannot be told and they stay unmatched.
TEST(NcclKineto, RcclGenericKernelsTakeTorchsMetadataAndTheirLaunchsStep) {
  model::TraceStore store;
  model::loadTraces(store, filesIn("nccl/tracelens_mi300_rccl_rank0"));
  const std::vector<CollectiveRow> rows = matchCollectives(store);
  ASSERT_EQ(rows.size(), 12u);
  const std::pair<const char*, int64_t> perStep[] = {{"broadcast", 9600 * 2},
                                                     {"broadcast", 20 * 8},
                                                     {"allreduce", 2873320 * 2},
                                                     {"allreduce", 8816192 * 2}};
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(strCat("collective ", i));
    EXPECT_EQ(rows[i].op, perStep[i % 4].first);
    EXPECT_EQ(rows[i].bytes, perStep[i % 4].second);
    EXPECT_EQ(rows[i].seq,
              static_cast<int64_t>(15 + i / 4) * 1000000 + static_cast<int64_t>(i % 4));
    EXPECT_EQ(rows[i].group, "pg 0 (default_pg)");
    EXPECT_EQ(rows[i].groupSize, 8);
    EXPECT_EQ(rows[i].ranks.at(0).groupRank, 0);
    EXPECT_EQ(rows[i].missingCount, 7);  // one rank's file of eight
  }
  // The five without a step: collectives (their time is communication) with no seq.
  uint64_t unmatched = 0;
  const model::RankData& rank = store.ranks().at(0);
  for (const model::Track& track : rank.tracks) {
    for (const auto& level : track.levels) {
      for (const model::Span& s : level) {
        if (store.categories()[s.category] == "collective" &&
            store.stringArg(rank, s, trace::kMatchedByArg).empty()) {
          ++unmatched;
          EXPECT_EQ(store.str(s.name), "nccl");  // a generic kernel without metadata says none
        }
      }
    }
  }
  EXPECT_EQ(unmatched, 5u);
}

// A newer trace (B200, NCCL 2.27) without profiler steps: the kernel names its collective and
// group; an all-gather counts its output, 201088 bfloat16 elements.
TEST(NcclKineto, ANewerTracesKernelNamesItsGroupAndSize) {
  model::TraceStore store;
  model::loadTraces(store, filesIn("nccl/tracelens_b200_rank0"));
  const std::vector<CollectiveRow> rows = matchCollectives(store);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].op, "allgather");
  EXPECT_EQ(rows[0].group, "pg 3");  // its description, "undefined", says nothing
  EXPECT_EQ(rows[0].seq, 0);
  EXPECT_EQ(rows[0].bytes, 201088 * 2);
  EXPECT_EQ(rows[0].groupSize, 8);
  EXPECT_EQ(argOf(store, rows[0].ranks[0], trace::kMatchedByArg), "process group and order");
}

// Two ranks of a generated trace: rank 0 profiled steps 5 and 6, rank 1 only step 6. Each step
// launches an allreduce of 256 floats on group "0"; a third kernel on each rank has seq_num 42.
// Step 6's allreduces match each other, not rank 1's first with rank 0's first: the seq holds
// the step. The seq_num kernel matches by its number.
std::string twoStepRank(int rank, bool withStep5) {
  std::string events;
  auto add = [&](const std::string& e) { events += strCat(events.empty() ? "" : ",\n", e); };
  add(R"({"name":"process_name","ph":"M","pid":0,"tid":0,"args":{"name":"python3"}})");
  add(R"({"name":"process_labels","ph":"M","pid":0,"tid":0,"args":{"labels":"GPU 0"}})");
  add(R"({"name":"process_labels","ph":"M","pid":100,"tid":0,"args":{"labels":"CPU"}})");
  int correlation = 1;
  auto step = [&](int n, int at, const std::string& extra) {
    add(strCat(R"({"ph":"X","cat":"user_annotation","name":"ProfilerStep#)", n,
               R"(","pid":100,"tid":100,"ts":)", at, R"(,"dur":100,"args":{}})"));
    add(strCat(R"({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":100,"tid":100,)",
               R"("ts":)", at + 10 + rank, R"(,"dur":2,"args":{"correlation":)", correlation,
               "}}"));
    add(strCat(R"({"ph":"X","cat":"kernel","name":"ncclDevKernel_Generic","pid":0,"tid":4,)",
               R"("ts":)", at + 20 + 3 * rank, R"(,"dur":30,"args":{"correlation":)", correlation,
               R"(,"Collective name":"allreduce","Process Group Name":"0",)",
               R"("Process Group Description":"default_pg","Process Group Ranks":"[0, 1]",)",
               R"("Group size":2,"In msg nelems":256,"Out msg nelems":256,"dtype":"Float")", extra,
               "}}"));
    ++correlation;
  };
  if (withStep5) step(5, 1000, "");
  step(6, 2000, "");
  step(7, 3000, R"(,"seq_num":42)");
  return strCat(R"({"schemaVersion":1,"distributedInfo":{"backend":"nccl","rank":)", rank,
                R"(,"world_size":2},"traceEvents":[)", "\n", events, "\n]}");
}

TEST(NcclKineto, NeverMatchedAcrossAGapInTheRecordedStepsAndASeqNumWins) {
  model::TraceStore store;
  model::ingestChromeTraceText(store, twoStepRank(0, true), "rank0.json");
  model::ingestChromeTraceText(store, twoStepRank(1, false), "rank1.json");
  const std::vector<CollectiveRow> rows = matchCollectives(store);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].seq, 5000000);
  EXPECT_EQ(rows[0].ranks.size(), 1u);  // only rank 0 profiled step 5
  EXPECT_EQ(rows[0].missingRanks, std::vector<int32_t>{1});
  EXPECT_EQ(rows[1].seq, 6000000);
  ASSERT_EQ(rows[1].ranks.size(), 2u);
  EXPECT_EQ(rows[1].arrivalSkewNs, 3000);  // rank 1's kernel starts 3 us later
  EXPECT_EQ(rows[1].lastArrivalRank, 1);
  EXPECT_EQ(rows[1].bytes, 1024);
  EXPECT_EQ(rows[2].seq, 42);
  EXPECT_EQ(rows[2].ranks.size(), 2u);
  EXPECT_EQ(argOf(store, rows[2].ranks[1], trace::kMatchedByArg), "seq_num");
}

// Forty ranks of a generated NCCL job, above the 32 where the timeline draws aggregate lanes (in
// blocks of eight ranks: Kineto files name no host): each rank's GPU runs a gemm from 900 to
// 1000 us and then, on its NCCL stream, one allreduce kernel from 1020 us, but rank 23's from
// 1420. The lanes read the kernels as communication, not compute, and mark rank 23 the last to
// arrive, 400 us after the first, on the lane of ranks 16-23 only.
TEST(NcclKineto, AggregateLanesOfAnNcclJobShowItsCommunicationAndItsStraggler) {
  model::TraceStore store;
  for (int rank = 0; rank < 40; ++rank) {
    const int start = rank == 23 ? 1420 : 1020;
    const std::string events = strCat(
        R"({"name":"process_labels","ph":"M","pid":0,"tid":0,"args":{"labels":"GPU 0"}},)",
        R"({"name":"process_labels","ph":"M","pid":100,"tid":0,"args":{"labels":"CPU"}},)",
        R"({"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":100,"tid":100,)",
        R"("ts":1000,"dur":5},)",
        R"({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":100,"tid":100,)",
        R"("ts":1001,"dur":2,"args":{"correlation":1}},)",
        R"({"ph":"X","cat":"kernel","name":"volta_sgemm_128x64_nn","pid":0,"tid":7,"ts":900,)",
        R"("dur":100,"args":{}},)",
        R"({"ph":"X","cat":"kernel","name":"ncclDevKernel_Generic","pid":0,"tid":4,"ts":)", start,
        R"(,"dur":100,"args":{"correlation":1,"Collective name":"allreduce",)",
        R"("Process Group Name":"0","Group size":40,"In msg nelems":256,)",
        R"("Out msg nelems":256,"dtype":"Float"}})");
    model::ingestChromeTraceText(
        store,
        strCat(R"({"schemaVersion":1,"distributedInfo":{"backend":"nccl","rank":)", rank,
               R"(,"world_size":40},"traceEvents":[)", events, "]}"),
        strCat("rank", rank, ".json"));
  }
  ASSERT_EQ(store.ranks().size(), 40u);
  const model::AggregateLanes lanes(store);
  ASSERT_EQ(lanes.groups().size(), 5u);
  for (size_t g = 0; g < 5; ++g) {
    SCOPED_TRACE(lanes.groups()[g].label);
    if (g != 2) {
      EXPECT_TRUE(lanes.groups()[g].marks.empty());
      continue;
    }
    ASSERT_EQ(lanes.groups()[g].marks.size(), 1u);
    const model::StragglerMark& mark = lanes.groups()[g].marks[0];
    EXPECT_EQ(mark.rank, 23);
    EXPECT_EQ(mark.skewNs, 400'000);
    EXPECT_EQ(store.str(mark.name), "allreduce");
  }
  // Busy shares (buckets of about a microsecond, so within a few percent).
  const auto share = [&](size_t group, model::AggregateLanes::Kind kind, int fromUs, int toUs) {
    float out = 0;
    lanes.busyShares(group, kind, store.beginNs() + (fromUs - 900) * 1000,
                     store.beginNs() + (toUs - 900) * 1000, 1, &out);
    return out;
  };
  using Kind = model::AggregateLanes::Kind;
  EXPECT_NEAR(share(0, Kind::kCompute, 900, 1000), 1.0, 0.03);    // every gemm
  EXPECT_NEAR(share(0, Kind::kComm, 1020, 1120), 1.0, 0.03);      // every rank's allreduce
  EXPECT_NEAR(share(2, Kind::kComm, 1020, 1120), 7.0 / 8, 0.03);  // all but rank 23's
  EXPECT_NEAR(share(0, Kind::kCompute, 1020, 1120), 0.0, 0.03);   // the kernels are not compute
}

}  // namespace
}  // namespace ringx::analysis
