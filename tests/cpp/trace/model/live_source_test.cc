// The viewer's live attach against real live trace servers on loopback, one per
// rank as a job runs them (rank 0's also serves the directory): events reach
// the store on the right ranks and tracks, aligned with the clock syncs; a rank
// whose server goes away is marked disconnected while the others stream on, and
// its replayed backlog is not counted twice when it comes back; what was
// received saves as a trace directory readTrace() reads; refusals and bad
// addresses say what is wrong.
//
// Every wait is on a condition with a generous deadline, never a fixed sleep, so
// the tests hold on a loaded machine.
#include "trace/model/live_source.h"

#include "tests/cpp/trace/live_job.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/cpp/trace/trace_fixture.h"
#include "trace/model/aggregate_lanes.h"
#include "trace/model/ringx_ingest.h"
#include "trace/read/trace_dir.h"
#include "trace/record/live_server.h"

namespace ringx::model {
namespace {

using namespace std::chrono_literals;
using trace::LiveServer;
using trace::testing::Job;
using trace::testing::RankFeed;
namespace fx = trace::fixture;

constexpr auto kPatience = 20s;

template <typename Done>
bool waitUntil(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

const Track* findTrack(const TraceStore& store, int32_t rank, const std::string& name) {
  const RankData* data = store.findRank(rank);
  if (data == nullptr) return nullptr;
  const int t = data->findTrack(store.strings().find(name));
  return t < 0 ? nullptr : &data->tracks[t];
}

// Drains until the store holds `events` events (false after kPatience).
bool drainUntil(LiveSource& source, TraceStore& store, uint64_t events) {
  return waitUntil([&] {
    source.drainInto(store);
    return store.eventCount() >= events;
  });
}

LiveRankStatus rankStatus(const LiveSource& source, int rank) {
  for (const LiveRankStatus& s : source.status()) {
    if (s.rank == rank) return s;
  }
  return LiveRankStatus{};
}

TEST(LiveSource, StreamsEveryRankIntoTheStoreOnItsTracksAndAligned) {
  Job job;
  job.feeds[0].span("comm:world", "allreduce", 10000, 11000, 64);
  job.feeds[0].span("comm:world", "allreduce", 20000, 21000, 128);
  job.write(0);
  // Rank 1's clock runs 5000 ns behind rank 0's.
  job.feeds[1].clockSync(0, 5000).span("compute", "forward", 5000, 6000, 7);
  job.write(1);

  LiveSource source(job.address(), "");
  TraceStore store;
  ASSERT_TRUE(drainUntil(source, store, 3)) << source.stateText();

  // Later batches arrive through the same streams.
  job.feeds[0].span("comm:world", "broadcast", 30000, 31000, 256);
  job.write(0);
  job.feeds[1].span("compute", "backward", 7000, 9000, 8);
  job.write(1);
  ASSERT_TRUE(drainUntil(source, store, 5)) << source.stateText();
  EXPECT_EQ(store.eventCount(), 5u);

  const Track* comm = findTrack(store, 0, "comm:world");
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(comm->spanCount, 3u);
  ASSERT_FALSE(comm->levels.empty());
  const Span& last = comm->levels[0].back();
  EXPECT_EQ(store.str(last.name), "broadcast");
  EXPECT_EQ(last.begin, 30000);
  EXPECT_EQ(store.intArg(*store.findRank(0), last, trace::arg::kBytes), 256);
  EXPECT_EQ(store.stringArg(*store.findRank(0), last, trace::arg::kGroup), "world");
  EXPECT_EQ(findTrack(store, 0, "compute"), nullptr);

  const Track* compute = findTrack(store, 1, "compute");
  ASSERT_NE(compute, nullptr);
  ASSERT_EQ(compute->spanCount, 2u);
  EXPECT_EQ(compute->levels[0][0].begin, 10000);  // 5000 local + 5000 offset
  EXPECT_EQ(compute->levels[0][1].begin, 12000);
  EXPECT_EQ(store.str(compute->levels[0][1].name), "backward");
  const RankData* rank1 = store.findRank(1);
  EXPECT_EQ(rank1->host, "node-1");
  EXPECT_EQ(rank1->pid, 4001);
  EXPECT_TRUE(rank1->clockAligned);
  EXPECT_EQ(rank1->source, "127.0.0.1:" + std::to_string(job.servers[1]->port()));

  ASSERT_TRUE(waitUntil([&] { return source.state() == LiveRankStatus::kConnected; }));
  EXPECT_EQ(source.stateText(), "connected to 2/2 ranks");
  const std::vector<LiveRankStatus> status = source.status();
  ASSERT_EQ(status.size(), 2u);
  EXPECT_EQ(status[0].events, 3u);
  EXPECT_EQ(status[1].events, 2u);
  EXPECT_GT(status[1].bytes, 0u);
  EXPECT_EQ(status[1].reconnects, 0);
  EXPECT_TRUE(status[1].message.empty()) << status[1].message;

  // Nothing new: a drain changes nothing.
  source.drainInto(store);
  const uint64_t generation = store.generation();
  EXPECT_FALSE(source.drainInto(store));
  EXPECT_EQ(store.generation(), generation);

  // A second store gets everything from the start.
  TraceStore other;
  source.restartDrain();
  EXPECT_TRUE(source.drainInto(other));
  EXPECT_EQ(other.eventCount(), 5u);
}

// A subset of ranks (ringx-viewer --attach ... --ranks 1): only their servers
// are connected to; a subset the job does not have is refused with a message.
TEST(LiveSource, FollowsOnlyTheRanksAsked) {
  Job job;
  job.feeds[0].span("comm:world", "allreduce", 10000, 11000, 64);
  job.write(0);
  job.feeds[1].span("compute", "forward", 5000, 6000, 7);
  job.write(1);

  LiveSource source(job.address(), "", {1});
  TraceStore store;
  ASSERT_TRUE(drainUntil(source, store, 1)) << source.stateText();
  ASSERT_TRUE(waitUntil([&] { return source.state() == LiveRankStatus::kConnected; }));
  EXPECT_EQ(source.stateText(), "connected to 1/1 ranks");
  ASSERT_EQ(source.status().size(), 1u);
  EXPECT_EQ(source.status()[0].rank, 1);
  EXPECT_EQ(store.findRank(0), nullptr);
  EXPECT_NE(findTrack(store, 1, "compute"), nullptr);
  EXPECT_EQ(job.servers[0]->stats().streamsServed, 0u);  // rank 0 served the directory only

  LiveSource none(job.address(), "", {5, 6, 7});
  ASSERT_TRUE(waitUntil([&] { return none.state() == LiveRankStatus::kFailed; }));
  EXPECT_TRUE(contains(none.stateText(), "has none of ranks 5-7")) << none.stateText();
}

// --ranks 0 --summary-others on a 4-rank job of two hosts (ranks 0-1 on node-0, 2-3
// on node-1): rank 0 streams in full, the others send their collectives only, and the
// aggregate lanes of the store show both hosts' comm and node-1's straggler.
TEST(LiveSource, FollowsASubsetInFullAndEveryOtherRanksCollectives) {
  Job job("", /*ranks=*/4, /*ranksPerHost=*/2);
  for (int r = 0; r < 4; ++r) {
    job.feeds[r]
        .event(trace::Category::kUser, trace::EventKind::kSpan, "compute", "forward", 1000, 9000)
        .event(trace::Category::kMemory, trace::EventKind::kCounter, "memory", "rss", 2000, 0, 1e9)
        // Rank 3 arrives last at the allreduce (seq 0).
        .span("comm:world", "allreduce", 10000 + r * 1000, 20000, 64, /*seq=*/0);
    job.write(r);
  }

  LiveSource source(job.address(), "", {0}, /*summarizeOthers=*/true);
  TraceStore store;
  ASSERT_TRUE(waitUntil([&] {
    source.drainInto(store);
    for (int r = 0; r < 4; ++r)
      if (findTrack(store, r, "comm:world") == nullptr) return false;
    return findTrack(store, 0, "compute") != nullptr;
  })) << source.stateText();
  ASSERT_TRUE(waitUntil([&] { return source.state() == LiveRankStatus::kConnected; }));
  EXPECT_EQ(source.stateText(), "connected to 1/1 ranks, summaries from 3/3");
  ASSERT_EQ(source.status().size(), 4u);
  for (const LiveRankStatus& s : source.status()) EXPECT_EQ(s.summary, s.rank != 0) << s.rank;
  EXPECT_EQ(job.servers[0]->stats().streamsServed, 1u);
  EXPECT_EQ(job.servers[0]->stats().summariesServed, 0u);
  for (int r = 1; r < 4; ++r) {
    EXPECT_EQ(job.servers[r]->stats().summariesServed, 1u) << r;
    EXPECT_EQ(job.servers[r]->stats().streamsServed, 0u) << r;
  }

  // The subset has everything; the others only their collectives.
  const RankData* rank0 = store.findRank(0);
  ASSERT_NE(rank0, nullptr);
  EXPECT_FALSE(rank0->summaryOnly);
  EXPECT_NE(rank0->findCounter(store.strings().find("rss")), nullptr);
  for (int r = 1; r < 4; ++r) {
    const RankData* rank = store.findRank(r);
    ASSERT_NE(rank, nullptr);
    EXPECT_TRUE(rank->summaryOnly) << r;
    EXPECT_EQ(findTrack(store, r, "compute"), nullptr) << r;
    EXPECT_TRUE(rank->counters.empty()) << r;
    for (const Track& t : rank->tracks) EXPECT_EQ(t.kind, TrackKind::kComm) << r;
    EXPECT_EQ(rank->host, strCat("node-", r / 2));
  }

  const AggregateLanes lanes(store);
  ASSERT_EQ(lanes.groups().size(), 2u);
  EXPECT_EQ(lanes.groups()[0].label, "node-0");
  EXPECT_EQ(lanes.groups()[1].label, "node-1");
  EXPECT_EQ(lanes.computeRanks(0), 1);  // rank 1 sent no compute
  EXPECT_EQ(lanes.computeRanks(1), 0);
  float share = 0;
  for (size_t g = 0; g < 2; ++g) {
    // [10000, 20000): rank 2r's and 2r+1's allreduce cover all or most of it.
    lanes.busyShares(g, AggregateLanes::kComm, 10000, 20000, 1, &share);
    EXPECT_GT(share, 0.5f) << g;
  }
  // Rank 0's forward over [1000, 9000) is node-0's whole known compute; node-1 has none.
  lanes.busyShares(0, AggregateLanes::kCompute, 1000, 9000, 1, &share);
  EXPECT_NEAR(share, 1.0f, 0.05f);  // buckets blur the edges a little
  lanes.busyShares(1, AggregateLanes::kCompute, 1000, 9000, 1, &share);
  EXPECT_EQ(share, 0.0f);
  // The allreduce's last arrival is rank 3, on node-1.
  EXPECT_TRUE(lanes.groups()[0].marks.empty());
  ASSERT_EQ(lanes.groups()[1].marks.size(), 1u);
  EXPECT_EQ(lanes.groups()[1].marks[0].rank, 3);
  EXPECT_EQ(lanes.groups()[1].marks[0].skewNs, 3000);

  // Without --summary-others the subset is all there is.
  LiveSource subset(job.address(), "", {0});
  ASSERT_TRUE(waitUntil([&] { return subset.state() == LiveRankStatus::kConnected; }));
  EXPECT_EQ(subset.stateText(), "connected to 1/1 ranks");
}

TEST(LiveSource, ARankWhoseServerGoesAwayIsDisconnectedAndItsReplayIsNotCountedTwice) {
  Job job;
  job.feeds[0].span("comm:world", "allreduce", 1000, 2000, 1);
  job.write(0);
  job.feeds[1].clockSync(0, 0);
  job.feeds[1].span("comm:world", "allreduce", 1000, 2000, 1);
  job.feeds[1].span("comm:world", "allreduce", 3000, 4000, 2);
  job.feeds[1].dropped(3);
  std::vector<trace::Batch> rank1History = {job.feeds[1].take()};
  job.servers[1]->write(rank1History[0]);

  LiveSource source(job.address(), "");
  TraceStore store;
  ASSERT_TRUE(drainUntil(source, store, 3)) << source.stateText();
  ASSERT_TRUE(waitUntil([&] { return source.state() == LiveRankStatus::kConnected; }));

  // Rank 1's server goes away (the process died, or its recorder stopped).
  const int port1 = job.servers[1]->port();
  job.servers[1].reset();
  ASSERT_TRUE(waitUntil([&] {
    return rankStatus(source, 1).state == LiveRankStatus::kDisconnected;
  })) << source.stateText();
  const LiveRankStatus gone = rankStatus(source, 1);
  EXPECT_TRUE(contains(gone.message, "closed")) << gone.message;
  EXPECT_EQ(rankStatus(source, 0).state, LiveRankStatus::kConnected);
  EXPECT_EQ(source.state(), LiveRankStatus::kDisconnected);
  EXPECT_TRUE(contains(source.stateText(), "connected to 1/2 ranks; rank 1 disconnected"))
      << source.stateText();

  // Rank 0 streams on.
  job.feeds[0].span("comm:world", "allreduce", 5000, 6000, 2);
  job.write(0);
  ASSERT_TRUE(drainUntil(source, store, 4)) << source.stateText();
  // What rank 1 sent is kept.
  EXPECT_EQ(findTrack(store, 1, "comm:world")->spanCount, 2u);

  // It comes back on the same port and replays its history first (as a server's
  // backlog repeats what an earlier client already had), then new events.
  LiveServer::Options options;
  options.port = port1;
  job.servers[1] = std::make_unique<LiveServer>(options);
  job.servers[1]->begin(job.feeds[1].preamble());
  for (const trace::Batch& b : rank1History) job.servers[1]->write(b);
  job.feeds[1].span("comm:world", "allreduce", 7000, 8000, 3);
  job.feeds[1].span("comm:world", "allreduce", 9000, 10000, 4);
  job.write(1);

  ASSERT_TRUE(drainUntil(source, store, 6)) << source.stateText();
  ASSERT_TRUE(waitUntil([&] { return rankStatus(source, 1).state == LiveRankStatus::kConnected; }));
  source.drainInto(store);
  // The last event arrived, so the replay before it did too: counted once.
  EXPECT_EQ(store.eventCount(), 6u);
  const Track* comm1 = findTrack(store, 1, "comm:world");
  ASSERT_NE(comm1, nullptr);
  EXPECT_EQ(comm1->spanCount, 4u);
  const LiveRankStatus back = rankStatus(source, 1);
  EXPECT_EQ(back.reconnects, 1);
  EXPECT_EQ(back.events, 4u);
  EXPECT_EQ(store.findRank(1)->dropped, 3u);  // the replayed Dropped record too
  EXPECT_EQ(source.stateText(), "connected to 2/2 ranks");
}

TEST(LiveSource, SavesWhatItReceivedAsATraceDirectory) {
  Job job;
  job.feeds[0].span("comm:world", "allreduce", 1000, 2000, 11);
  job.feeds[0].span("steps", "step", 500, 2500, 0);
  job.write(0);
  job.feeds[1].clockSync(100, -300).span("comm:world", "allreduce", 1200, 2100, 11);
  job.feeds[1].dropped(2);
  job.write(1);

  LiveSource source(job.address(), "");
  TraceStore live;
  ASSERT_TRUE(drainUntil(source, live, 3)) << source.stateText();
  ASSERT_TRUE(waitUntil([&] {
    source.drainInto(live);
    return live.findRank(1) != nullptr && live.findRank(1)->dropped == 2;
  }));

  fx::TempDir dir;
  source.saveTo(dir.path() + "/saved");
  const trace::TraceSet set = trace::readTrace(dir.path() + "/saved");
  EXPECT_TRUE(set.warnings.empty()) << set.warnings.front();
  ASSERT_TRUE(set.manifest.has_value());
  EXPECT_EQ(set.manifest->worldSize, 2);
  ASSERT_EQ(set.manifest->ranks.size(), 2u);
  EXPECT_EQ(set.manifest->ranks[1].host, "node-1");
  ASSERT_EQ(set.ranks.size(), 2u);

  const trace::RankTrace& r0 = set.ranks[0];
  EXPECT_EQ(r0.header.rank, 0);
  EXPECT_EQ(r0.header.pid, 4000);
  ASSERT_EQ(r0.events.size(), 2u);
  EXPECT_EQ(r0.str(r0.events[0].track), "comm:world");
  EXPECT_EQ(r0.str(r0.events[0].name), "allreduce");
  EXPECT_EQ(r0.events[0].beginNs, 1000);
  EXPECT_EQ(r0.events[0].endNs, 2000);
  EXPECT_EQ(r0.intArg(r0.events[0], trace::arg::kBytes), 11);
  EXPECT_EQ(r0.stringArg(r0.events[0], trace::arg::kGroup), "world");
  EXPECT_EQ(r0.str(r0.events[1].track), "steps");

  const trace::RankTrace& r1 = set.ranks[1];
  EXPECT_EQ(r1.header.host, "node-1");
  ASSERT_EQ(r1.events.size(), 1u);
  EXPECT_EQ(r1.events[0].beginNs, 1200);
  ASSERT_EQ(r1.clockSyncs.size(), 1u);
  EXPECT_EQ(r1.clockSyncs[0].offsetNs, -300);
  EXPECT_EQ(r1.dropped, 2u);

  // The saved trace opens as the live one looked.
  TraceStore reopened;
  ingestTraceSet(reopened, set);
  EXPECT_EQ(reopened.eventCount(), live.eventCount());
  EXPECT_EQ(reopened.beginNs(), live.beginNs());
  EXPECT_EQ(reopened.endNs(), live.endNs());
}

TEST(LiveSource, WaitsForAJobThatIsNotReadyYet) {
  // Rank 0's server is up but the ranks have not published their endpoints.
  Job job;
  LiveServer::Options options;
  LiveServer early(options);
  LiveSource source("127.0.0.1:" + std::to_string(early.port()), "");
  ASSERT_TRUE(waitUntil([&] { return contains(source.stateText(), "directory not ready"); }))
      << source.stateText();
  EXPECT_EQ(source.state(), LiveRankStatus::kConnecting);
  EXPECT_TRUE(contains(source.stateText(), "fetching the directory from 127.0.0.1:"))
      << source.stateText();
  EXPECT_TRUE(source.status().empty());

  early.setDirectory(
      {{0, "127.0.0.1", job.servers[0]->port()}, {1, "127.0.0.1", job.servers[1]->port()}});
  job.feeds[1].span("compute", "forward", 100, 200, 1);
  job.write(1);
  TraceStore store;
  ASSERT_TRUE(drainUntil(source, store, 1)) << source.stateText();
  EXPECT_NE(findTrack(store, 1, "compute"), nullptr);
}

TEST(LiveSource, AWrongTokenFailsWithTheServersMessageWithoutHammeringIt) {
  Job job("right-token");
  LiveSource source(job.address(), "wrong-token");
  ASSERT_TRUE(waitUntil([&] { return source.state() == LiveRankStatus::kFailed; }))
      << source.stateText();
  EXPECT_TRUE(contains(source.stateText(), "invalid token")) << source.stateText();
  EXPECT_FALSE(contains(source.stateText(), ".cc:")) << source.stateText();
  // Backing off: a second or so brings a couple of requests, not a busy loop's thousands.
  const uint64_t before = job.servers[0]->stats().requestsRejected;
  std::this_thread::sleep_for(1s);
  EXPECT_LT(job.servers[0]->stats().requestsRejected - before, 10u);

  // The right token streams.
  LiveSource good(job.address(), "right-token");
  job.feeds[0].span("compute", "forward", 100, 200, 1);
  job.write(0);
  TraceStore store;
  ASSERT_TRUE(drainUntil(good, store, 1)) << good.stateText();
}

TEST(LiveSource, ABadAddressOrTokenThrowsAtOnce) {
  for (const char* bad : {"", "node:", "node:http", "node:70000", "::1:9100", "127.0.0.1:0"}) {
    EXPECT_THROW(LiveSource(bad, ""), InvalidArgument) << bad;
  }
  EXPECT_THROW(LiveSource("127.0.0.1:9100", "two words"), InvalidArgument);
}

TEST(LiveSource, StopsAtOnceWhileNothingAnswers) {
  // Nothing listens there (a port just freed): the source keeps trying until
  // destroyed, and the destructor does not wait for the retries.
  int port = 0;
  { port = LiveServer(LiveServer::Options{}).port(); }
  auto refused = std::make_unique<LiveSource>("127.0.0.1:" + std::to_string(port), "");
  ASSERT_TRUE(waitUntil([&] { return contains(refused->stateText(), "last try"); }))
      << refused->stateText();
  EXPECT_EQ(refused->state(), LiveRankStatus::kConnecting);
  refused.reset();

  // A server that accepts connections and never answers holds a handshake for
  // its whole timeout (10 s); stopping must not wait for it.
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(listener, 16), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  auto silent =
      std::make_unique<LiveSource>("127.0.0.1:" + std::to_string(ntohs(addr.sin_port)), "");
  std::this_thread::sleep_for(100ms);  // let the attempt connect and wait for the reply
  EXPECT_EQ(silent->state(), LiveRankStatus::kConnecting);
  const auto start = std::chrono::steady_clock::now();
  silent.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);  // not the 10 s handshake
  ::close(listener);
}

}  // namespace
}  // namespace ringx::model
