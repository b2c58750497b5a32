// Two recorded runs compared (analysis/diff.h): collectives matched by (group,
// seq), iterations by step, DDP buckets by index; the largest regression first;
// runs that diverged are said to have diverged instead of being compared.
#include "analysis/diff.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/cpp/trace/trace_fixture.h"
#include "trace/model/ringx_ingest.h"

namespace ringx::analysis {
namespace {

using namespace ringx::trace;
using fixture::RankStream;
using fixture::TempDir;

struct RecordedRun {
  int64_t slowSeq = -1;  // this collective takes `extraNs` longer
  int64_t extraNs = 0;
  int64_t backwardExtraNs = 0;  // every backward takes this much longer
  int64_t bucketExposedNs = 0;  // bucket 1's exposed time
  int collectives = 6;
  std::string opAtSeq4 = "allreduce";
};

// Two ranks, three DDP iterations with two buckets, and `collectives` 1 MiB
// collectives of 100 us (seq 0..), each rank's spans on its own comm track.
model::TraceStore record(const TempDir& dir, const std::string& name, const RecordedRun& run) {
  std::filesystem::create_directories(dir.file(name));
  for (int r = 0; r < 2; ++r) {
    RankStream s(r, 2);
    for (int step = 0; step < 3; ++step) {
      const int64_t t = step * 1000000;
      s.span(Category::kDdp, track::kDdp, "forward", t, t + 100000, {{"step", step}});
      s.span(Category::kDdp, track::kDdp, "backward", t + 100000, t + 400000 + run.backwardExtraNs,
             {{"step", step}});
      for (int b = 0; b < 2; ++b) {
        const int64_t ready = t + 150000 + b * 100000;
        s.span(Category::kDdp, std::string(track::kDdpBucketPrefix) + std::to_string(b), "bucket",
               ready - 10000, ready + 200000,
               {{arg::kBucket, b},
                {arg::kStep, step},
                {arg::kBytes, 4096},
                {arg::kReadyNs, ready},
                {arg::kLaunchNs, ready + 1000},
                {arg::kWireStartNs, ready + 2000},
                {arg::kWireEndNs, ready + 102000},
                {arg::kExposedNs, b == 1 ? run.bucketExposedNs : 0}});
      }
    }
    for (int seq = 0; seq < run.collectives; ++seq) {
      const int64_t begin = 5000000 + seq * 1000000;
      const int64_t duration = 100000 + (seq == run.slowSeq ? run.extraNs : 0);
      s.collective(seq == 4 ? run.opAtSeq4 : "allreduce", seq, begin, begin + duration, 1 << 20);
    }
    s.writeTo(dir.file(name + "/rank-" + std::to_string(r) + ".ringx"));
  }
  model::TraceStore store;
  model::ingestTraceSet(store, readTrace(dir.file(name)));
  return store;
}

// B's seq 3 stalls once (+900 us, 10x); B's bucket 1 is exposed 30 us longer on every
// iteration. The steady regression ranks first: it stands far above its figure's spread (none),
// while the stall inflates the spread of its own run's allreduces (diff.h).
TEST(Diff, ASteadyRegressionRanksAboveALargerOneOffStallAndBothPlacesToJumpTo) {
  TempDir dir;
  RecordedRun slower;
  slower.slowSeq = 3;
  slower.extraNs = 900000;
  slower.bucketExposedNs = 30000;
  const model::TraceStore a = record(dir, "a", RecordedRun{});
  const model::TraceStore b = record(dir, "b", slower);
  const RunDiff d = diffRuns(a, b);

  EXPECT_EQ(d.matchedCollectives, 6u);
  EXPECT_EQ(d.onlyInA + d.onlyInB + d.opMismatches, 0u);
  EXPECT_EQ(d.collectiveTotalB - d.collectiveTotalA, 900000);
  ASSERT_GE(d.rows.size(), 2u);
  const DiffRow& steady = d.rows[0];
  EXPECT_EQ(steady.name, "bucket 1 exposed");
  EXPECT_EQ(steady.deltaNs, 30000);
  EXPECT_EQ(steady.noiseNs, 1000 + 300);  // no spread: the floor, 1 us + 1%
  const DiffRow& stall = d.rows[1];
  EXPECT_EQ(stall.kind, DiffKind::kCollective);
  EXPECT_EQ(stall.name, "allreduce seq 3 (group world, 1.00 MiB)");
  EXPECT_EQ(stall.aNs, 100000);
  EXPECT_EQ(stall.deltaNs, 900000);
  // B's six allreduces of 1 MiB: five of 100 us and one of 1 ms, a population standard
  // deviation of 335.4 us; A's do not vary: pooled, 237.2 us.
  EXPECT_NEAR(stall.noiseNs, 237171, 2);
  EXPECT_GT(steady.score, stall.score);
  EXPECT_EQ(stall.aTimeNs, 8000000);  // where seq 3 began in each run
  EXPECT_EQ(stall.bTimeNs, 8000000);
  EXPECT_EQ(d.engine, "DDP");
  EXPECT_EQ(d.aIterations, 6u);
  ASSERT_EQ(d.phases.size(), 4u);
  EXPECT_EQ(d.phases[3].name, "exposed communication");
  EXPECT_EQ(d.phases[3].deltaNs, 30000);

  const std::string text = formatDiff(d, "a", "b");
  EXPECT_NE(text.find("Largest regressions"), std::string::npos) << text;
  EXPECT_LT(text.find("bucket 1 exposed"), text.find("allreduce seq 3")) << text;
  EXPECT_EQ(text.find("Largest improvements"), std::string::npos) << text;
}

TEST(Diff, StepsAlignByStepNumber) {
  TempDir dir;
  RecordedRun slower;
  slower.backwardExtraNs = 50000;
  const RunDiff d = diffRuns(record(dir, "a", RecordedRun{}), record(dir, "b", slower));
  int steps = 0;
  for (const DiffRow& r : d.rows) {
    if (r.kind != DiffKind::kStep) continue;
    ++steps;
    EXPECT_EQ(r.deltaNs, 50000) << r.name;
    EXPECT_EQ(r.aTimeNs, r.bTimeNs) << r.name;  // step k began at the same place in both
  }
  EXPECT_EQ(steps, 3);
  EXPECT_EQ(d.phases[1].name, "backward");
  EXPECT_EQ(d.phases[1].deltaNs, 50000);
  // Swapped, the same rows are improvements.
  const RunDiff back = diffRuns(record(dir, "c", slower), record(dir, "d", RecordedRun{}));
  EXPECT_LT(back.rows.back().deltaNs, 0);
  EXPECT_NE(formatDiff(back, "c", "d").find("Largest improvements"), std::string::npos);
}

TEST(Diff, DivergedRunsAreCountedNotCompared) {
  TempDir dir;
  RecordedRun other;
  other.opAtSeq4 = "broadcast";
  other.collectives = 5;
  RecordedRun longer;
  longer.collectives = 8;
  const RunDiff d = diffRuns(record(dir, "a", longer), record(dir, "b", other));
  EXPECT_EQ(d.opMismatches, 1u);
  EXPECT_EQ(d.firstMismatch, "seq 4 of group world: allreduce in A, broadcast in B");
  EXPECT_EQ(d.matchedCollectives, 4u);
  EXPECT_EQ(d.onlyInA, 3u);  // seq 5, 6, 7
  EXPECT_EQ(d.onlyInB, 0u);
  const std::string text = formatDiff(d, "a", "b");
  EXPECT_NE(text.find("the runs diverged"), std::string::npos) << text;
}

}  // namespace
}  // namespace ringx::analysis
