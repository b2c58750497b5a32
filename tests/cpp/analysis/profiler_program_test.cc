// Profiler traces as replay programs (analysis/profiler_program.h, profiler_whatif.h): small
// hand-made Kineto traces whose step, waits and critical path are known by construction, and
// the real multi-rank sets of other projects (../shared/traces), whose recorded steps the
// unchanged replay must reproduce within 3% (Lumos's average error is 3.3%).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "analysis/profiler_program.h"
#include "analysis/profiler_whatif.h"
#include "base/text.h"
#include "tests/cpp/shared_traces.h"
#include "trace/model/chrome_ingest.h"
#include "trace/model/loader.h"

namespace ringx::analysis {
namespace {

using replay::PathSegment;
using Kind = PathSegment::Kind;

// One rank's profiler file, in microseconds as Kineto writes them: CPU pid 100 (thread 100),
// GPU 0 with a compute stream (7) and an NCCL stream (20).
class KinetoRank {
 public:
  explicit KinetoRank(int rank) : rank_(rank) {}
  void step(int n, int64_t ts, int64_t dur) {
    add(strCat(R"({"ph":"X","cat":"user_annotation","name":"ProfilerStep#)", n,
               R"(","pid":100,"tid":100,"ts":)", ts, R"(,"dur":)", dur, "}"));
  }
  void call(const char* name, int64_t ts, int64_t dur) {
    add(strCat(R"({"ph":"X","cat":"cuda_runtime","name":")", name, R"(","pid":100,"tid":100,"ts":)",
               ts, R"(,"dur":)", dur, R"(,"args":{"correlation":)", ++correlation_ + 100000, "}}"));
  }
  // A launch at ts (2 us) of a kernel that ran [kts, kts + kdur) on the compute stream.
  void kernel(int64_t ts, int64_t kts, int64_t kdur, const char* name = "volta_sgemm") {
    launch(ts, 2, "cudaLaunchKernel");
    add(strCat(R"({"ph":"X","cat":"kernel","name":")", name, R"(","pid":0,"tid":7,"ts":)", kts,
               R"(,"dur":)", kdur, R"(,"args":{"stream":7,"correlation":)", correlation_, "}}"));
  }
  // c10d's allreduce of 1 MiB: the NCCL stream waits on the current one, the kernel is
  // launched, and (with `wait`) work.wait() makes the current stream wait on its end.
  void allreduce(int64_t ts, int64_t kts, int64_t kdur, bool events = true) {
    if (events) {
      call("cudaEventRecord", ts - 4, 1);
      call("cudaStreamWaitEvent", ts - 2, 1);
    }
    launch(ts, 3, "cudaLaunchKernelExC");
    add(strCat(R"({"ph":"X","cat":"kernel","name":"ncclDevKernel_AllReduce_Sum_f32_RING_LL",)",
               R"("pid":0,"tid":20,"ts":)", kts, R"(,"dur":)", kdur,
               R"(,"args":{"stream":20,"correlation":)", correlation_,
               R"(,"Collective name":"allreduce","Process Group Name":"0","Group size":2,)",
               R"("In msg nelems":262144,"Out msg nelems":262144,"dtype":"Float"}})"));
    if (events) {
      call("cudaEventRecord", ts + 4, 1);
      call("cudaStreamWaitEvent", ts + 6, 1);
    }
  }
  // A kernel whose launch the trace does not hold (made before the profiler began), on `stream`.
  void unlaunched(int stream, int64_t kts, int64_t kdur) {
    add(strCat(R"({"ph":"X","cat":"kernel","name":"volta_sgemm","pid":0,"tid":)", stream,
               R"(,"ts":)", kts, R"(,"dur":)", kdur, R"(,"args":{"stream":)", stream,
               R"(,"correlation":)", 900000 + ++unlaunched_, "}}"));
  }
  std::string json() const {
    return strCat(
        R"({"schemaVersion":1,"distributedInfo":{"backend":"nccl","rank":)", rank_,
        R"(,"world_size":2},"traceEvents":[)",
        R"({"name":"process_labels","ph":"M","pid":0,"tid":0,"args":{"labels":"GPU 0"}},)",
        R"({"name":"process_labels","ph":"M","pid":100,"tid":0,"args":{"labels":"CPU"}})", events_,
        "]}");
  }

 private:
  void launch(int64_t ts, int64_t dur, const char* name) {
    ++correlation_;
    add(strCat(R"({"ph":"X","cat":"cuda_runtime","name":")", name, R"(","pid":100,"tid":100,"ts":)",
               ts, R"(,"dur":)", dur, R"(,"args":{"correlation":)", correlation_, "}}"));
  }
  void add(const std::string& event) { events_ += "," + event; }
  int rank_;
  int64_t correlation_ = 0, unlaunched_ = 0;
  std::string events_;
};

model::TraceStore storeOf(const std::vector<KinetoRank>& ranks) {
  model::TraceStore store;
  for (size_t r = 0; r < ranks.size(); ++r) {
    model::ingestChromeTraceText(store, ranks[r].json(), strCat("rank", r, ".json"));
  }
  return store;
}

// Each rank: a gemm (10 -> [20, 220)), c10d's allreduce launched at 35 that waits for it
// ([220, 320)), a second gemm launched at 50 that waits for the allreduce ([320, 420)), a
// cudaStreamSynchronize from 60 that returns at 422, and the host's step until 450.
KinetoRank syncStep(int rank, bool events = true) {
  KinetoRank k(rank);
  k.step(1, 0, 450);
  k.kernel(10, 20, 200);
  k.allreduce(35, 220, 100, events);
  k.kernel(50, 320, 100);
  k.call("cudaStreamSynchronize", 60, 362);
  return k;
}

int64_t us(int64_t n) { return n * 1000; }

TEST(ProfilerProgram, StreamsWaitsAndTheHostReplayTheRecordedStepExactly) {
  const model::TraceStore store = storeOf({syncStep(0), syncStep(1)});
  ASSERT_TRUE(holdsProfilerTrace(store));
  const ProfilerProgram p = profilerProgramOf(store);
  EXPECT_EQ(p.times.ranks.size(), 2u);
  EXPECT_EQ(p.collectives, 1u);
  EXPECT_EQ(p.kernels, 6u);
  EXPECT_EQ(p.streamWaits, 2u);  // each rank's second gemm waits for the allreduce
  EXPECT_EQ(p.hostSyncs, 2u);
  EXPECT_FALSE(p.syncRule);
  EXPECT_EQ(p.recordedStepNs, us(450));
  EXPECT_EQ(p.times.launchNs, (std::vector<int64_t>{us(10), us(10)}));
  const replay::LinkFit wire = profilerWire(p);
  const ProfilerReplay same = replayProfiler(p, wire, {});
  EXPECT_EQ(same.stepNs, us(450));
  EXPECT_EQ(same.exposedCommNs, us(100));  // nothing ran beside the allreduce
  // The host up to the first launch, the gemm, the allreduce, the gemm, the host after the
  // synchronisation: what the step waited on.
  std::vector<Kind> kinds;
  for (const PathSegment& s : same.criticalPath) {
    if (kinds.empty() || kinds.back() != s.kind) kinds.push_back(s.kind);
  }
  EXPECT_EQ(kinds, (std::vector<Kind>{Kind::kHost, Kind::kKernel, Kind::kAllreduce, Kind::kKernel,
                                      Kind::kHost}));
  EXPECT_EQ(same.criticalPath.back().endNs, us(450));

  // Communication free: the second gemm follows the first at once, 100 us sooner.
  ProfilerChange commFree;
  commFree.commFree = true;
  EXPECT_EQ(replayProfiler(p, wire, commFree).stepNs, us(350));
  // The device's compute free: the allreduce starts when launched (35 + 10), ends at 145; the
  // synchronisation returns 2 us later and the host's 28 us follow.
  ProfilerChange computeFree;
  computeFree.computeFree = true;
  EXPECT_EQ(replayProfiler(p, wire, computeFree).stepNs, us(175));
  // A wire twice as slow: the allreduce's 100 us scale by the model's ratio (nearly 2).
  ProfilerChange slow;
  slow.link = replay::LinkCost{wire.link.stepNs, wire.link.nsPerByte * 2};
  const int64_t slower = replayProfiler(p, wire, slow).stepNs;
  EXPECT_GT(slower, us(530));
  EXPECT_LE(slower, us(550));
}

TEST(ProfilerProgram, WithoutStreamWaitsInTheTraceTheNextKernelWaitsForTheCollective) {
  const model::TraceStore store = storeOf({syncStep(0, false), syncStep(1, false)});
  const ProfilerProgram p = profilerProgramOf(store);
  EXPECT_TRUE(p.syncRule);
  EXPECT_EQ(p.streamWaits, 2u);
  EXPECT_EQ(replayProfiler(p, profilerWire(p), {}).stepNs, us(450));
}

// Rank 1's host works 300 us before it launches the allreduce: rank 0's kernel waits for it on
// the GPU ([20, 420) recorded), and the step's critical path runs through rank 1's host.
TEST(ProfilerProgram, ALateRankIsTheOneTheCollectiveWaitedFor) {
  std::vector<KinetoRank> ranks;
  for (int r = 0; r < 2; ++r) {
    KinetoRank k(r);
    const int64_t at = r == 0 ? 10 : 310;
    k.step(1, 0, 430);
    k.allreduce(at, r == 0 ? 20 : 320, r == 0 ? 400 : 100);
    k.call("cudaDeviceSynchronize", at + 10, 421 - at - 10);
    ranks.push_back(k);
  }
  const ProfilerProgram p = profilerProgramOf(storeOf(ranks));
  const ProfilerReplay run = replayProfiler(p, profilerWire(p), {});
  EXPECT_EQ(run.stepNs, us(430));
  bool allreduceOnRank1 = false, hostOfRank1 = false;
  for (const PathSegment& s : run.criticalPath) {
    allreduceOnRank1 |= s.kind == Kind::kAllreduce && s.rank == 1;
    hostOfRank1 |= s.kind == Kind::kHost && s.rank == 1 && s.endNs - s.beginNs >= us(290);
  }
  EXPECT_TRUE(allreduceOnRank1);
  EXPECT_TRUE(hostOfRank1);
  // Rank 1's wire time is the allreduce's: 100 us, not rank 0's 400 of waiting.
  EXPECT_EQ(p.program.collectives[0].ns, us(100));
}

// The host launches a 10 us kernel every 100 us: the GPU waits on the CPU. Compute free saves
// nothing; the critical path is the host's.
TEST(ProfilerProgram, ALaunchBoundStretchIsTheHostsOnTheCriticalPath) {
  std::vector<KinetoRank> ranks;
  for (int r = 0; r < 2; ++r) {
    KinetoRank k(r);
    k.step(1, 0, 1000);
    for (int i = 0; i < 9; ++i) k.kernel(100 * i + 5, 100 * i + 15, 10);
    k.allreduce(950, 960, 20);
    k.call("cudaStreamSynchronize", 960, 21);
    ranks.push_back(k);
  }
  const ProfilerProgram p = profilerProgramOf(storeOf(ranks));
  const replay::LinkFit wire = profilerWire(p);
  const ProfilerReplay same = replayProfiler(p, wire, {});
  EXPECT_EQ(same.stepNs, us(1000));
  int64_t host = 0;
  for (const PathSegment& s : same.criticalPath) {
    if (s.kind == Kind::kHost) host += s.endNs - s.beginNs;
  }
  EXPECT_GT(host, us(900));
  ProfilerChange computeFree;
  computeFree.computeFree = true;
  EXPECT_EQ(replayProfiler(p, wire, computeFree).stepNs, us(1000));
}

TEST(ProfilerProgram, AFolderOfProfilerFilesLoadsAsTheirRanks) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / strCat("ringx-profiler-folder-", ::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (int r = 0; r < 2; ++r) {
    std::ofstream(dir / strCat("host_", r, ".pt.trace.json")) << syncStep(r).json();
  }
  std::ofstream(dir / "notes.txt") << "not a trace";
  EXPECT_EQ(model::detectFormat(dir.string()), model::TraceFormat::kChromeDirectory);
  model::TraceStore store;
  model::loadTraces(store, {dir.string()});
  EXPECT_EQ(store.ranks().size(), 2u);
  EXPECT_EQ(profilerWhatIf(store).baseline.stepNs, us(450));
  std::filesystem::remove_all(dir);
}

TEST(ProfilerProgram, EngineQuestionsAndTracesWithoutKernelsAreRefusedSayingWhy) {
  const model::TraceStore store = storeOf({syncStep(0), syncStep(1)});
  WhatIfQuestions buckets;
  buckets.bucketCapMb = {4};
  EXPECT_THROW(profilerWhatIf(store, buckets), std::invalid_argument);
  model::TraceStore cpu;
  model::ingestChromeTraceText(
      cpu,
      R"({"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":0,"dur":5}]})",
      "cpu.json");
  try {
    profilerProgramOf(cpu);
    ADD_FAILURE() << "a trace without kernels gave a program";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("GPU job"), std::string::npos) << e.what();
  }
}

TEST(ProfilerProgram, WorkQueuedBeforeTheProfilerBeganHoldsItsStreamBack) {
  // The NCCL stream still runs a kernel launched before profiling ([0, 300): no launch in the
  // trace), so the step's allreduce, ready at 220, starts at 300; the gemm after it at 400, the
  // host's synchronisation returns at 502. (The MI300 set's stream ran the step before's
  // allreduces this way: 2.4 ms of collective-start error until the rule took them in.)
  std::vector<KinetoRank> ranks;
  for (int r = 0; r < 2; ++r) {
    KinetoRank& k = ranks.emplace_back(r);
    k.step(1, 0, 510);
    k.unlaunched(20, 0, 300);
    k.kernel(10, 20, 200);
    k.allreduce(35, 300, 100);
    k.kernel(50, 400, 100);
    k.call("cudaStreamSynchronize", 60, 442);
  }
  const model::TraceStore store = storeOf(ranks);
  const ProfilerWhatIfReport r = profilerWhatIf(store, {});
  EXPECT_EQ(r.source.recordedStepNs, us(510));
  EXPECT_EQ(r.baseline.stepNs, us(510));
  EXPECT_LT(r.startErrorMedianNs, us(1));
}

// ---- the real sets ----

std::vector<std::string> filesOf(const std::string& folder, const std::string& prefix = "") {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(testing::sharedTrace(folder))) {
    const std::string name = e.path().filename().string();
    if (name.find(".json") != std::string::npos && startsWith(name, prefix)) {
      out.push_back(e.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct RealSet {
  const char* name;
  std::vector<std::string> files;
  size_t ranks;
};

TEST(ProfilerProgram, TheRealSetsUnchangedReplaysAreWithinThreePercentOfTheirSteps) {
  const RealSet sets[] = {
      {"DLRM, 8 V100s", filesOf("nccl/param_dlrm_8rank"), 8},
      {"Megatron TP8, 8 A100s", filesOf("nccl/astrasim_megatron_tp8"), 8},
      {"HTA's two sampled ranks", filesOf("hta", "sampled_rank-"), 2},
      {"B200 rank", filesOf("nccl/tracelens_b200_rank0"), 1},
      {"MI300 rank", filesOf("nccl/tracelens_mi300_rccl_rank0"), 1},
  };
  for (const RealSet& set : sets) {
    SCOPED_TRACE(set.name);
    model::TraceStore store;
    model::loadTraces(store, set.files);
    const ProfilerWhatIfReport report = profilerWhatIf(store);
    EXPECT_EQ(report.source.times.ranks.size(), set.ranks);
    EXPECT_GT(report.source.recordedStepNs, 0);
    EXPECT_LT(std::abs(report.baselineErrorShare), 0.03)
        << "recorded " << report.source.recordedStepNs << " replayed " << report.baseline.stepNs;
    EXPECT_FALSE(report.baseline.criticalPath.empty());
    // The bounds never make the step longer.
    for (const ProfilerWhatIfRow& row : report.rows) {
      EXPECT_TRUE(row.error.empty()) << row.change.label << ": " << row.error;
      EXPECT_LE(row.replay.stepNs, report.baseline.stepNs + report.baseline.stepNs / 1000)
          << row.change.label;
    }
  }
}

}  // namespace
}  // namespace ringx::analysis
