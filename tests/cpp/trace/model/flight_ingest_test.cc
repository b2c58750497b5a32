// Flight recorder dumps in the viewer: a dump directory (or one dump file) is
// recognised, each rank's entries become collective spans, and the collectives
// analysis lines them up: the rank that never arrived is missing from the hung
// collective and is the hang suspect; stuck and queued calls keep their state.
#include "trace/model/flight_ingest.h"

#include <gtest/gtest.h>

#include "analysis/trace_analyses.h"
#include "tests/cpp/trace/trace_fixture.h"
#include "trace/format/flight_dump.h"
#include "trace/model/loader.h"

namespace ringx::model {
namespace {

namespace fx = trace::fixture;
using trace::FlightState;

using fx::kMs;

trace::FlightEntry entry(int64_t seq, FlightState state) {
  trace::FlightEntry e;
  e.id = static_cast<uint64_t>(seq) + 1;
  e.seq = seq;
  e.op = "allreduce";
  e.state = state;
  e.bytes = 4096;
  e.dtype = "float32";
  e.reduceOp = "sum";
  e.issueNs = (100 + seq * 10) * kMs;
  if (state != FlightState::kIssued) e.startNs = e.issueNs + kMs;
  if (state == FlightState::kFinished || state == FlightState::kFailed) e.endNs = e.startNs + kMs;
  if (state == FlightState::kFailed) e.error = "ringx: allreduce #5 timed out";
  return e;
}

// Ranks 0 and 1 finished seqs 0..4; rank 0 failed seq 5, rank 1 is stuck in it
// with seq 6 queued behind; rank 2 never issued seq 5.
void writeHungJob(const fx::TempDir& dir) {
  for (int32_t r = 0; r < 3; ++r) {
    trace::FlightDump d;
    d.job = "job";
    d.rank = r;
    d.worldSize = 3;
    d.host = "h";
    d.steadyNs = 1000 * kMs;
    d.wallNs = 1'700'000'000'000 * kMs + r * kMs;  // the ranks' clocks differ slightly
    trace::FlightGroup g;
    g.name = "world";
    g.id = "job";
    g.rank = r;
    g.size = 3;
    for (int64_t seq = 0; seq < 5; ++seq) g.entries.push_back(entry(seq, FlightState::kFinished));
    if (r == 0) g.entries.push_back(entry(5, FlightState::kFailed));
    if (r == 1) {
      g.entries.push_back(entry(5, FlightState::kStarted));
      g.entries.push_back(entry(6, FlightState::kIssued));
    }
    d.groups.push_back(g);
    trace::writeFlightDump(d, dir.file(trace::flightDumpFileName(r)));
  }
}

const analysis::CollectiveRow* rowOf(const std::vector<analysis::CollectiveRow>& rows,
                                     int64_t seq) {
  for (const analysis::CollectiveRow& r : rows)
    if (r.seq == seq) return &r;
  return nullptr;
}

TEST(FlightIngest, ADumpDirectoryOpensAndNamesTheRankThatNeverArrived) {
  fx::TempDir dir;
  writeHungJob(dir);
  EXPECT_EQ(detectFormat(dir.path()), TraceFormat::kFlightDump);
  TraceStore store;
  loadTraces(store, {dir.path()});
  ASSERT_EQ(store.ranks().size(), 3u);
  EXPECT_EQ(store.eventCount(), 6u + 7 + 5);  // ranks 0, 1, 2
  const std::vector<analysis::CollectiveRow> rows = analysis::matchCollectives(store);
  const analysis::CollectiveRow* hung = rowOf(rows, 5);
  ASSERT_NE(hung, nullptr);
  EXPECT_EQ(hung->op, "allreduce");
  EXPECT_EQ(hung->bytes, 4096);
  EXPECT_TRUE(hung->failed);
  ASSERT_EQ(hung->ranks.size(), 2u);
  EXPECT_EQ(hung->missingRanks, std::vector<int32_t>{2});
  const analysis::CollectiveRow* done = rowOf(rows, 4);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(done->ranks.size(), 3u);
  EXPECT_FALSE(done->failed);
  const analysis::CollectiveOverview overview = analysis::overviewOf(rows);
  bool named = false;
  for (const analysis::HangSuspect& h : overview.hangSuspects)
    named |= h.rank == 2 && h.missingSeq == 5 && h.lastSeq == 4;
  EXPECT_TRUE(named);
  // The stuck collective ends at its rank's dump, and says it had only started.
  const RankData* rank1 = store.findRank(1);
  ASSERT_NE(rank1, nullptr);
  const uint32_t stateKey = store.strings().find(kFlightStateArg);
  ASSERT_NE(stateKey, 0u);
  int started = 0, issued = 0;
  for (const Track& track : rank1->tracks)
    for (const auto& level : track.levels)
      for (const Span& span : level) {
        const ArgList args(*rank1, span);  // outlives the pointer find() returns
        if (const ArgValue* a = args.find(stateKey)) {
          started += store.str(a->stringId) == "started";
          issued += store.str(a->stringId) == "issued";
        }
      }
  EXPECT_EQ(started, 1);
  EXPECT_EQ(issued, 1);
}

TEST(FlightIngest, OneDumpFileOpensOnItsOwn) {
  fx::TempDir dir;
  writeHungJob(dir);
  const std::string file = dir.file(trace::flightDumpFileName(0));
  EXPECT_EQ(detectFormat(file), TraceFormat::kFlightDump);
  TraceStore store;
  loadTraces(store, {file});
  ASSERT_EQ(store.ranks().size(), 1u);
  EXPECT_EQ(store.ranks()[0].rank, 0);
  EXPECT_EQ(store.eventCount(), 6u);
}

TEST(FlightIngest, ADirectoryWithoutReadableDumpsIsAnError) {
  fx::TempDir dir;
  fx::writeFile(dir.file("flight-rank-0.json"), "{\"format\": \"ringx-flight-recorder\"");
  EXPECT_EQ(detectFormat(dir.path()), TraceFormat::kFlightDump);
  TraceStore store;
  EXPECT_THROW(loadTraces(store, {dir.path()}), trace::FormatError);
}

}  // namespace
}  // namespace ringx::model
