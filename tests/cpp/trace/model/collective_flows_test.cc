// Collectives joined across ranks by flow arrows: the viewer's ringx ingest
// chains each collective's spans from the first rank to arrive to the last (on
// the aligned clock), the Chrome export writes the same chains as flow events,
// and reading that export back gives the same arrows; a live job's collective
// gets its arrow once every rank of its group has sent its span.
#include <gtest/gtest.h>

#include <chrono>
#include <sstream>
#include <thread>

#include "tests/cpp/trace/live_job.h"
#include "tests/cpp/trace/trace_fixture.h"
#include "trace/export/chrome_export.h"
#include "trace/model/chrome_ingest.h"
#include "trace/model/live_source.h"
#include "trace/model/ringx_ingest.h"
#include "trace/read/trace_dir.h"

namespace ringx::model {
namespace {

using trace::Category;
namespace fx = trace::fixture;
using fx::kMs;

// Three ranks, rank 1's clock 5 ms ahead. World allreduce seq 0 begins on rank
// 2 at 1 ms, rank 0 at 2 ms, rank 1 at 2 ms + 500 ns (aligned); seq 1 on ranks
// 0 and 1 only (rank 2 never arrived); a subgroup broadcast; a send with a seq
// (point to point: not joined).
trace::TraceSet threeRanks(const fx::TempDir& dir) {
  fx::RankStream r0(0, 3, "node-a");
  r0.collective("allreduce", 0, 2 * kMs, 3 * kMs, 64, 3)
      .collective("allreduce", 1, 4 * kMs, 5 * kMs, 64, 3)
      .collective("broadcast", 0, 6 * kMs, 7 * kMs, 64, 2, "pair")
      .collective("send", 7, 8 * kMs, 9 * kMs, 64, 3);
  r0.writeTo(dir.file("rank-0.ringx"));
  fx::RankStream r1(1, 3, "node-b");
  r1.clockSync(1 * kMs, -5 * kMs, 100)
      .collective("allreduce", 0, 7 * kMs + 500, 8 * kMs, 64, 3)
      .collective("allreduce", 1, 9 * kMs + 7, 10 * kMs, 64, 3)
      .collective("broadcast", 0, 11 * kMs + 1, 12 * kMs, 64, 2, "pair")
      .collective("send", 7, 13 * kMs, 14 * kMs, 64, 3);
  r1.writeTo(dir.file("rank-1.ringx"));
  fx::RankStream r2(2, 3, "node-a");
  r2.collective("allreduce", 0, 1 * kMs, 3 * kMs, 64, 3);
  r2.writeTo(dir.file("rank-2.ringx"));
  return trace::readTrace(dir.path());
}

// "rank:track@time>rank:track@time name" per flow, times shifted by `shift`.
std::vector<std::string> describeFlows(const TraceStore& store, int64_t shift = 0) {
  std::vector<std::string> out;
  for (const Flow& f : store.flows())
    out.push_back(strCat(f.from.rank, ":", store.str(f.from.track), "@", f.from.time + shift, ">",
                         f.to.rank, ":", store.str(f.to.track), "@", f.to.time + shift, " ",
                         store.str(f.name)));
  return out;
}

TEST(CollectiveFlows, RingxIngestChainsEachCollectiveFromTheFirstRankToArriveToTheLast) {
  fx::TempDir dir;
  TraceStore store;
  ingestTraceSet(store, threeRanks(dir));
  const std::vector<std::string> want = {
      // seq 0: rank 2, then rank 0, then rank 1 (the one everybody waited for).
      strCat("2:comm:world@", 1 * kMs, ">0:comm:world@", 2 * kMs, " allreduce"),
      strCat("0:comm:world@", 2 * kMs, ">1:comm:world@", 2 * kMs + 500, " allreduce"),
      // seq 1 without rank 2: the ranks that arrived are still joined.
      strCat("0:comm:world@", 4 * kMs, ">1:comm:world@", 4 * kMs + 7, " allreduce"),
      strCat("0:comm:pair@", 6 * kMs, ">1:comm:pair@", 6 * kMs + 1, " broadcast"),
  };
  EXPECT_EQ(describeFlows(store), want);
}

TEST(CollectiveFlows, TheChromeExportReadsBackAsTheSameArrows) {
  fx::TempDir dir;
  const trace::TraceSet set = threeRanks(dir);
  TraceStore direct;
  ingestTraceSet(direct, set);
  std::ostringstream json;
  const trace::ExportStats stats = trace::writeChromeTrace(set, json);
  EXPECT_EQ(stats.flows, direct.flows().size());
  TraceStore chrome;
  ingestChromeTraceText(chrome, json.str(), "export.json");
  chrome.finalize();
  EXPECT_TRUE(chrome.warnings().empty()) << chrome.warnings()[0];
  ASSERT_EQ(direct.flows().size(), 4u);
  // Chrome times count from the export's origin; ringx's are rank 0's clock.
  EXPECT_EQ(describeFlows(chrome, stats.originNs), describeFlows(direct));
}

TEST(CollectiveFlows, ChainsAreCompleteOnceEveryMemberArrivedAndBoundedWhileWaiting) {
  trace::CollectiveChains chains(/*maxOpen=*/2);
  chains.add("world", 0, 2, {0, 1, 1, 100});
  EXPECT_TRUE(chains.takeComplete().empty());
  chains.add("world", 0, 2, {0, 1, 1, 50});  // the same rank again: its first span stands
  EXPECT_TRUE(chains.takeComplete().empty());
  chains.add("world", 0, 2, {1, 1, 1, 90});
  std::vector<trace::CollectiveChain> done = chains.takeComplete();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(done[0].complete);
  ASSERT_EQ(done[0].arrivals.size(), 2u);
  EXPECT_EQ(done[0].arrivals[0].rank, 1);  // 90 ns before rank 0's 100
  EXPECT_EQ(done[0].arrivals[1].beginNs, 100);
  // Rank 1 gone: seqs 1..3 wait for it; past two waiting the oldest goes out as it is.
  for (int64_t seq = 1; seq <= 3; ++seq) {
    chains.add("world", seq, 3, {0, 1, 1, seq * 1000});
    chains.add("world", seq, 3, {2, 1, 1, seq * 1000 + 5});
  }
  EXPECT_EQ(chains.openCount(), 2u);
  done = chains.takeComplete();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_FALSE(done[0].complete);
  EXPECT_EQ(done[0].seq, 1);
  EXPECT_EQ(chains.takeAll().size(), 2u);
  EXPECT_EQ(chains.openCount(), 0u);
}

TEST(CollectiveFlows, ALiveCollectiveGetsItsArrowOnceEveryRankSentItsSpan) {
  trace::testing::Job job;
  job.feeds[0].span("comm:world", "allreduce", 1 * kMs, 2 * kMs, 64, 0);
  job.feeds[0].span("comm:world", "allreduce", 3 * kMs, 4 * kMs, 64, 1);
  job.write(0);
  LiveSource source(job.address(), "");
  TraceStore store;
  auto drainUntil = [&](uint64_t events) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (store.eventCount() < events && std::chrono::steady_clock::now() < deadline) {
      source.drainInto(store);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return store.eventCount() >= events;
  };
  ASSERT_TRUE(drainUntil(2)) << source.stateText();
  EXPECT_TRUE(store.flows().empty());  // rank 1 has not arrived yet
  job.feeds[1].span("comm:world", "allreduce", 1 * kMs + 300, 2 * kMs, 64, 0);
  job.write(1);
  ASSERT_TRUE(drainUntil(3)) << source.stateText();
  ASSERT_EQ(store.flows().size(), 1u);
  const Flow& f = store.flows()[0];
  EXPECT_EQ(f.from.rank, 0);
  EXPECT_EQ(f.to.rank, 1);
  EXPECT_EQ(f.to.time - f.from.time, 300);
  EXPECT_EQ(store.str(f.to.track), "comm:world");
}

}  // namespace
}  // namespace ringx::model
