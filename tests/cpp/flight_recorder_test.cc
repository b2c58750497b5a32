// The flight recorder: the ring (wraparound, an entry's states, the seq an
// issued call is predicted to get, also when calls run out of issue order), a snapshot taken while
// another thread records, and a group that dumps on its own when a collective times out.
#include "backend/group/flight_recorder.h"

#include <gtest/gtest.h>

#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/cpp/rank_threads.h"
#include "tests/cpp/trace/trace_fixture.h"
#include "trace/format/flight_dump.h"

namespace ringx {
namespace {

using algorithms::Collective;
using algorithms::CollectiveKind;
using testing::allreduceFloats;
using trace::FlightState;

FlightRecorder::Entry runOne(FlightRecorder& r, int64_t seq, const char* algorithm = "ring") {
  const auto issued = r.issue("allreduce", 4096);
  const auto started =
      r.start(issued, seq, "allreduce", DataType::kFloat32, true, ReduceOp::kSum, -1, 0);
  r.finish(started, algorithm);
  return started;
}

TEST(FlightRecorder, KeepsTheLastEntriesOldestFirstWhenItWrapsAround) {
  FlightRecorder r("world", "id", 0, 2, 4);
  for (int64_t seq = 0; seq < 10; ++seq) runOne(r, seq);
  const trace::FlightGroup g = r.snapshot();
  EXPECT_EQ(g.capacity, 4u);
  EXPECT_EQ(g.recorded, 10u);
  EXPECT_EQ(g.nextSeq, 10);
  ASSERT_EQ(g.entries.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(g.entries[i].seq, int64_t(6 + i));
    EXPECT_EQ(g.entries[i].id, 7 + i);
    EXPECT_EQ(g.entries[i].state, FlightState::kFinished);
  }
}

TEST(FlightRecorder, AnEntryGoesFromIssuedToStartedToFinishedOrFailed) {
  FlightRecorder r("world", "id", 1, 3, 16);
  const auto a = r.issue("broadcast", 64);
  const auto b = r.issue("allreduce", 128);
  auto g = r.snapshot();
  ASSERT_EQ(g.entries.size(), 2u);
  EXPECT_EQ(g.entries[0].state, FlightState::kIssued);
  EXPECT_EQ(g.entries[0].seq, 0);  // predicted
  EXPECT_EQ(g.entries[1].seq, 1);
  EXPECT_EQ(g.entries[0].dtype, "");  // not known before it starts
  EXPECT_GT(g.entries[0].issueNs, 0);
  EXPECT_EQ(g.entries[0].startNs, 0);

  EXPECT_EQ(r.start(a, 0, "broadcast", DataType::kInt64, false, ReduceOp::kSum, 2, 0), a);
  g = r.snapshot();
  EXPECT_EQ(g.entries[0].state, FlightState::kStarted);
  EXPECT_EQ(g.entries[0].dtype, "int64");
  EXPECT_EQ(g.entries[0].reduceOp, "");  // broadcast does not reduce
  EXPECT_EQ(g.entries[0].root, 2);
  EXPECT_EQ(g.entries[0].bytes, 64u);  // issue's size kept
  EXPECT_GE(g.entries[0].startNs, g.entries[0].issueNs);
  r.finish(a, "chain");

  r.start(b, 1, "allreduce", DataType::kFloat32, true, ReduceOp::kMax, -1, 0);
  r.fail(b, "ringx: allreduce #1 timed out");
  g = r.snapshot();
  EXPECT_EQ(g.entries[0].state, FlightState::kFinished);
  EXPECT_EQ(g.entries[0].algorithm, "chain");
  EXPECT_GE(g.entries[0].endNs, g.entries[0].startNs);
  EXPECT_EQ(g.entries[1].state, FlightState::kFailed);
  EXPECT_EQ(g.entries[1].reduceOp, "MAX");  // reduceOpName()
  EXPECT_EQ(g.entries[1].error, "ringx: allreduce #1 timed out");
  // abandon() leaves a call that started alone: its own failure says more.
  r.abandon(b, "later");
  EXPECT_EQ(r.snapshot().entries[1].error, "ringx: allreduce #1 timed out");
}

// AVG and PREMUL_SUM run as a SUM (the c10d layer scales around it): the entry names the op
// the caller asked, PREMUL_SUM with its factor, and a dump carries both through.
TEST(FlightRecorder, AnEntryNamesTheReduceOpAsAskedNotTheSumThatRanIt) {
  FlightRecorder r("world", "id", 0, 2, 16);
  r.finish(
      r.start(0, 0, "reduce_scatter", DataType::kFloat32, true, AskedReduce::average(), -1, 64),
      "ring");
  r.finish(r.start(0, 1, "reduce_scatter", DataType::kFloat32, true,
                   AskedReduce::premultiplied(0.5), -1, 64),
           "ring");
  r.finish(r.start(0, 2, "allreduce", DataType::kFloat32, true, ReduceOp::kSum, -1, 64), "ring");
  trace::FlightDump dump;
  dump.groups.push_back(r.snapshot());
  const std::vector<trace::FlightEntry>& e = dump.groups[0].entries;
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].reduceOp, "AVG");
  EXPECT_FALSE(e[0].premultiplies());
  EXPECT_EQ(e[1].reduceOp, "PREMUL_SUM");
  EXPECT_EQ(e[1].premulFactor, 0.5);
  EXPECT_EQ(e[2].reduceOp, "SUM");
  EXPECT_EQ(trace::reduceOpText(e[1]), "PREMUL_SUM(0.5)");
  EXPECT_EQ(trace::reduceOpText(e[0]), "AVG");

  const std::string text = trace::formatFlightDump(dump);
  EXPECT_NE(text.find("\"reduce_op\": \"PREMUL_SUM\""), std::string::npos) << text;
  const trace::FlightDump back = trace::parseFlightDump(text, "dump");
  const std::vector<trace::FlightEntry>& b = back.groups[0].entries;
  EXPECT_EQ(b[0].reduceOp, "AVG");
  EXPECT_EQ(b[1].reduceOp, "PREMUL_SUM");
  EXPECT_EQ(b[1].premulFactor, 0.5);
  EXPECT_EQ(text.find("premul_factor", text.find("\"seq\": 2")), std::string::npos)
      << "only PREMUL_SUM has a factor";
}

TEST(FlightRecorder, APredictionThatWasWrongIsCorrectedForTheCallsAfterIt) {
  FlightRecorder r("world", "id", 0, 2, 16);
  const auto coalesced = r.issue("reduce_scatter", 0, /*runs=*/3);  // seqs 0, 1, 2
  const auto failed = r.issue("allreduce", 8);                      // predicted 3
  const auto next = r.issue("allreduce", 8);                        // predicted 4
  const auto e0 =
      r.start(coalesced, 0, "reduce_scatter", DataType::kFloat32, true, ReduceOp::kSum, -1, 0);
  r.finish(e0, "ring");
  for (int64_t seq = 1; seq < 3; ++seq) {  // the coalesced call's later collectives: new entries
    const auto e =
        r.start(0, seq, "reduce_scatter", DataType::kFloat32, true, ReduceOp::kSum, -1, 0);
    EXPECT_NE(e, 0u);
    r.finish(e, "ring");
  }
  // The next call's job fails before it starts a collective: seq 3 goes to the one after.
  r.abandon(failed, "staging failed");
  r.start(next, 3, "allreduce", DataType::kFloat32, true, ReduceOp::kSum, -1, 0);
  const auto later = r.issue("barrier", 0);
  const trace::FlightGroup g = r.snapshot();
  ASSERT_EQ(g.entries.size(), 6u);
  EXPECT_EQ(g.entries[1].state, FlightState::kFailed);
  EXPECT_EQ(g.entries[1].error, "staging failed");
  EXPECT_EQ(g.entries[1].seq, -1);  // it never started a collective
  EXPECT_EQ(g.entries[2].seq, 3);   // not the 4 its place in the issue order said
  EXPECT_EQ(g.entries[5].id, later);
  EXPECT_EQ(g.entries[5].seq, 4);  // predicted right again
}

TEST(FlightRecorder, ACallThatRunsAheadOfQueuedOnesLeavesTheirPredictionsRight) {
  // A Future callback's collective runs in place, before calls queued earlier.
  FlightRecorder r("world", "id", 0, 2, 16);
  runOne(r, 0);
  const auto queued = r.issue("allreduce", 8);  // behind the running job
  const auto next = r.issue("barrier", 0);
  auto g = r.snapshot();
  EXPECT_EQ(g.entries[1].seq, 1);
  EXPECT_EQ(g.entries[2].seq, 2);
  const auto inPlace = r.issue("allreduce", 8, 1, /*ahead=*/true);
  r.finish(r.start(inPlace, 1, "allreduce", DataType::kFloat32, true, ReduceOp::kSum, -1, 0),
           "ring");
  g = r.snapshot();
  ASSERT_EQ(g.entries.size(), 4u);
  EXPECT_EQ(g.entries[3].seq, 1);  // ran first
  EXPECT_EQ(g.entries[1].state, FlightState::kIssued);
  EXPECT_EQ(g.entries[1].seq, 2);  // moved back by the one that ran ahead
  EXPECT_EQ(g.entries[2].seq, 3);
  r.start(queued, 2, "allreduce", DataType::kFloat32, true, ReduceOp::kSum, -1, 0);
  g = r.snapshot();
  EXPECT_EQ(g.entries[1].seq, 2);
  EXPECT_EQ(g.entries[2].id, next);
  EXPECT_EQ(g.entries[2].seq, 3);
}

TEST(FlightRecorder, ASnapshotWhileAnotherThreadRecordsSeesOnlyWholeEntries) {
  FlightRecorder r("world", "id", 0, 2, 64);
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int64_t seq = 0; seq < 200000; ++seq) {
      const auto e = r.issue("allreduce", uint64_t(seq) * 4);
      r.start(e, seq, "allreduce", DataType::kFloat32, true, ReduceOp::kSum, -1, 0);
      if (seq % 7 == 0)
        r.fail(e, "boom");
      else
        r.finish(e, "ring");
    }
    done = true;
  });
  uint64_t snapshots = 0, entries = 0;
  while (!done || snapshots < 10) {
    const trace::FlightGroup g = r.snapshot();
    ++snapshots;
    for (size_t i = 0; i < g.entries.size(); ++i) {
      const trace::FlightEntry& e = g.entries[i];
      ++entries;
      // Every field from one write: the seq, size and id belong together.
      ASSERT_EQ(e.seq, int64_t(e.id) - 1);
      ASSERT_EQ(e.bytes, uint64_t(e.seq) * 4);
      ASSERT_EQ(e.op, "allreduce");
      if (i > 0) {
        ASSERT_GT(e.id, g.entries[i - 1].id);
      }
      if (e.state == FlightState::kFinished || e.state == FlightState::kFailed) {
        ASSERT_EQ(e.state == FlightState::kFailed, e.seq % 7 == 0);
        ASSERT_GE(e.endNs, e.startNs);
      }
      if (e.state != FlightState::kIssued) {
        ASSERT_GE(e.startNs, e.issueNs);
      }
    }
  }
  writer.join();
  EXPECT_GT(entries, 0u);
  const trace::FlightGroup last = r.snapshot();
  ASSERT_EQ(last.entries.size(), 64u);
  EXPECT_EQ(last.entries.back().seq, 199999);
}

TEST(FlightRecorder, EntriesFromTheEnvironmentAreACount) {
  ::setenv("RINGX_FLIGHT_RECORDER_ENTRIES", "16", 1);
  EXPECT_EQ(FlightRecorder::entriesFromEnvironment(), 16u);
  ::setenv("RINGX_FLIGHT_RECORDER_ENTRIES", "lots", 1);
  EXPECT_THROW(FlightRecorder::entriesFromEnvironment(), InvalidArgument);
  ::unsetenv("RINGX_FLIGHT_RECORDER_ENTRIES");
  EXPECT_EQ(FlightRecorder::entriesFromEnvironment(), FlightRecorder::kDefaultEntries);
}

TEST(FlightRecorder, AGroupRecordsItsCollectivesAndDumpsWhenOneTimesOut) {
  trace::fixture::TempDir dir;
  ::setenv("RINGX_DUMP_DIR", dir.path().c_str(), 1);
  auto store = std::make_shared<InMemoryStore>();
  std::string message;
  std::atomic<bool> done{false};
  testing::runThreads(2, [&](int rank) {
    Group group(testing::testOptions(rank, 2, store));
    ASSERT_NE(group.flightRecorder(), nullptr);
    std::vector<float> data(1000, 1.0f);
    for (int i = 0; i < 3; ++i) allreduceFloats(group, data, std::chrono::seconds(30));
    if (rank == 1) {  // never calls the fourth, stays alive
      while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return;
    }
    try {
      allreduceFloats(group, data, std::chrono::milliseconds(300));
    } catch (const std::exception& e) {
      message = e.what();
    }
    done = true;
  });
  ::unsetenv("RINGX_DUMP_DIR");
  EXPECT_NE(message.find("timed out"), std::string::npos) << message;
  EXPECT_NE(message.find("flight recorder written to " + dir.path()), std::string::npos) << message;
  EXPECT_NE(message.find("ringx-trace why " + dir.path()), std::string::npos) << message;
  const trace::FlightDumpSet set = trace::readFlightDumps(dir.path());
  ASSERT_FALSE(set.dumps.empty()) << "no dump in " << dir.path();
  // Both ranks are threads of this process: the dump holds both groups.
  const trace::FlightDump& d = set.dumps.front();
  const trace::FlightGroup* failing = nullptr;
  for (const auto& g : d.groups)
    if (g.rank == 0) failing = &g;
  ASSERT_NE(failing, nullptr);
  ASSERT_EQ(failing->entries.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(failing->entries[i].state, FlightState::kFinished);
    EXPECT_EQ(failing->entries[i].seq, i);
    EXPECT_EQ(failing->entries[i].op, "allreduce");
    EXPECT_EQ(failing->entries[i].dtype, "float32");
    EXPECT_FALSE(failing->entries[i].algorithm.empty());
  }
  EXPECT_EQ(failing->entries[3].state, FlightState::kFailed);
  EXPECT_NE(failing->entries[3].error.find("timed out"), std::string::npos);
}

TEST(FlightRecorder, ZeroEntriesTurnItOff) {
  auto store = std::make_shared<InMemoryStore>();
  testing::runGroup(
      2,
      [&](Group& group) {
        EXPECT_EQ(group.flightRecorder(), nullptr);
        std::vector<float> data(10, 1.0f);
        allreduceFloats(group, data, std::chrono::seconds(30));
      },
      [](GroupOptions& options) { options.flightRecorderEntries = 0; });
}

}  // namespace
}  // namespace ringx
