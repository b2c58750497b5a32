// The live trace server and client over real loopback sockets: identical streams
// for several clients (late ones get the backlog), clients that vanish, a slow
// client that loses events and is told how many, tokens, the directory, and
// requests that are not the protocol.
//
// Every wait is on a condition with a generous deadline, never a fixed sleep, so
// the tests hold on a loaded machine.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "trace/format/live_protocol.h"
#include "trace/read/live_client.h"
#include "trace/record/live_server.h"

namespace ringx::trace {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto kPatience = 60s;

// A synthetic rank-0 stream: the preamble, then batches of numbered spans. Event
// i begins at i * 1000 ns and carries its number in its "bytes" argument.
class StreamBuilder {
 public:
  StreamBuilder() {
    Encoder enc;
    enc.magic();
    StreamHeader h;
    h.rank = 0;
    h.worldSize = 2;
    h.pid = 1234;
    h.host = "test-host";
    enc.header(h);
    enc.string(1, "comm:world");
    enc.string(2, "allreduce");
    enc.string(3, arg::kBytes);
    preamble_ = enc.bytes();
  }

  const std::string& preamble() const { return preamble_; }

  // `count` spans; with `newString`, they are named by a string defined in this
  // batch; with `clockSync`, a clock-sync record comes first.
  Batch batch(int count, bool newString = false, bool clockSync = false) {
    Batch b;
    uint32_t name = 2;
    if (newString) {
      Encoder strings;
      name = nextString_++;
      strings.string(name, "op" + std::to_string(name));
      b.strings = strings.bytes();
    }
    Encoder records;
    if (clockSync) {
      records.clockSync(ClockSync{nextEvent_ * 1000, -5000 - clockSyncs_, 100});
      ++clockSyncs_;
    }
    for (int i = 0; i < count; ++i, ++nextEvent_) {
      Event e;
      e.kind = EventKind::kSpan;
      e.category = Category::kCollective;
      e.track = 1;
      e.name = name;
      e.beginNs = nextEvent_ * 1000;
      e.endNs = e.beginNs + 500;
      e.argCount = 1;
      Arg bytes;
      bytes.key = 3;
      bytes.intValue = nextEvent_;
      records.event(e, &bytes);
    }
    b.records = records.bytes();
    b.events = static_cast<uint64_t>(count);
    return b;
  }

  int64_t eventsWritten() const { return nextEvent_; }
  uint32_t stringsDefined() const { return nextString_ - 1; }
  int64_t clockSyncsWritten() const { return clockSyncs_; }

 private:
  std::string preamble_;
  uint32_t nextString_ = 4;
  int64_t nextEvent_ = 0;
  int64_t clockSyncs_ = 0;
};

// Everything a client decoded, as text: two clients saw the same stream when
// these are equal (and a mismatch prints readably).
std::string describe(const RankTrace& t) {
  std::string out = strCat("rank ", t.header.rank, " of ", t.header.worldSize, " on ",
                           t.header.host, "\nstrings:");
  for (const std::string& s : t.strings) out += " " + s;
  out += "\n";
  for (const ClockSync& c : t.clockSyncs) out += strCat("sync ", c.localNs, " ", c.offsetNs, "\n");
  for (const Event& e : t.events) {
    out += strCat(t.str(e.name), " ", e.beginNs, " ", e.endNs, " ", t.intArg(e, arg::kBytes), "\n");
  }
  return out + strCat("dropped ", t.dropped, "\n");
}

// Polls the streams until `done()` holds; false after kPatience.
template <typename Done>
bool pumpUntil(const std::vector<LiveStream*>& streams, Done done) {
  const auto deadline = Clock::now() + kPatience;
  while (!done()) {
    if (Clock::now() > deadline) return false;
    for (LiveStream* s : streams) s->poll(10);
  }
  return true;
}

template <typename Done>
bool waitUntil(Done done) {
  const auto deadline = Clock::now() + kPatience;
  while (!done()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Sends raw bytes to the server and returns all it answers until it closes.
std::string rawExchange(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_GE(fd, 0);
  timeval patience{60, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof(patience));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  if (!request.empty()) {
    EXPECT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(request.size()));
  }
  std::string reply;
  char chunk[4096];
  ssize_t n;
  while ((n = ::recv(fd, chunk, sizeof(chunk), 0)) > 0) reply.append(chunk, n);
  ::close(fd);
  return reply;
}

TEST(LiveServer, TwoClientsSeeTheSameStreamIncludingALateOnesBacklog) {
  LiveServer server(LiveServer::Options{});
  StreamBuilder s;
  server.begin(s.preamble());
  server.write(s.batch(100, /*newString=*/false, /*clockSync=*/true));
  LiveStream early("127.0.0.1", server.port(), "");
  server.write(s.batch(100, /*newString=*/true));
  LiveStream late("127.0.0.1", server.port(), "");
  server.write(s.batch(100, /*newString=*/true));

  ASSERT_TRUE(pumpUntil({&early, &late}, [&] {
    return early.trace().events.size() >= 300 && late.trace().events.size() >= 300;
  }));
  EXPECT_EQ(describe(early.trace()), describe(late.trace()));
  const RankTrace& t = early.trace();
  ASSERT_EQ(t.events.size(), 300u);
  for (size_t i = 0; i < t.events.size(); ++i) {
    ASSERT_EQ(t.events[i].beginNs, static_cast<int64_t>(i) * 1000);
    ASSERT_EQ(t.intArg(t.events[i], arg::kBytes), static_cast<int64_t>(i));
  }
  EXPECT_EQ(t.header.host, "test-host");
  EXPECT_EQ(t.str(t.events[299].name), "op5");
  EXPECT_EQ(t.clockSyncs.size(), 1u);
  EXPECT_EQ(t.dropped, 0u);
  const LiveServer::Stats stats = server.stats();
  EXPECT_EQ(stats.streamClients, 2);
  EXPECT_EQ(stats.streamsServed, 2u);
  EXPECT_EQ(stats.eventsDropped, 0u);
}

TEST(LiveServer, TheBacklogKeepsRecentWholeRecordsAndTheLastClockSync) {
  LiveServer::Options options;
  options.backlogBytes = 4096;
  LiveServer server(options);
  StreamBuilder s;
  server.begin(s.preamble());
  server.write(s.batch(10, /*newString=*/false, /*clockSync=*/true));
  for (int i = 0; i < 50; ++i) server.write(s.batch(20, /*newString=*/i % 10 == 0));

  LiveStream late("127.0.0.1", server.port(), "");
  server.write(s.batch(1));
  const int64_t last = s.eventsWritten() - 1;
  ASSERT_TRUE(pumpUntil({&late}, [&] {
    return !late.trace().events.empty() && late.trace().events.back().beginNs == last * 1000;
  }));
  const RankTrace& t = late.trace();
  // Only recent history, but all of it, from some event on to the last one.
  EXPECT_GT(t.events.size(), 10u);
  EXPECT_LT(t.events.size(), static_cast<size_t>(s.eventsWritten()));
  const int64_t first = t.intArg(t.events.front(), arg::kBytes);
  for (size_t i = 0; i < t.events.size(); ++i) {
    ASSERT_EQ(t.intArg(t.events[i], arg::kBytes), first + static_cast<int64_t>(i));
  }
  // The clock sync fell out of the backlog but still came first; every string came.
  ASSERT_EQ(t.clockSyncs.size(), 1u);
  EXPECT_EQ(t.clockSyncs[0].offsetNs, -5000);
  EXPECT_EQ(t.strings.size(), s.stringsDefined() + 1u);
}

TEST(LiveServer, AClientThatVanishesDoesNotDisturbTheOthers) {
  LiveServer server(LiveServer::Options{});
  StreamBuilder s;
  server.begin(s.preamble());
  auto leaver = std::make_unique<LiveStream>("127.0.0.1", server.port(), "");
  LiveStream stayer("127.0.0.1", server.port(), "");
  server.write(s.batch(100));
  ASSERT_TRUE(pumpUntil({leaver.get(), &stayer}, [&] {
    return leaver->trace().events.size() == 100 && stayer.trace().events.size() == 100;
  }));

  // The leaver goes with data unread in its socket (a reset, not a clean close)
  // while the server still has megabytes for it.
  for (int i = 0; i < 20; ++i) server.write(s.batch(1000, /*newString=*/true));
  leaver.reset();
  for (int i = 0; i < 20; ++i) {
    server.write(s.batch(1000));
    stayer.poll(0);
  }
  ASSERT_TRUE(pumpUntil({&stayer}, [&] { return server.stats().streamClients == 1; }));
  ASSERT_TRUE(pumpUntil({&stayer},
                        [&] { return stayer.trace().events.size() == size_t(s.eventsWritten()); }));
  EXPECT_TRUE(stayer.connected());
  EXPECT_EQ(stayer.trace().dropped, 0u);

  // And the server still takes new clients.
  LiveStream newcomer("127.0.0.1", server.port(), "");
  server.write(s.batch(1));
  const int64_t last = s.eventsWritten() - 1;
  ASSERT_TRUE(pumpUntil({&newcomer, &stayer}, [&] {
    return !newcomer.trace().events.empty() &&
           newcomer.trace().events.back().beginNs == last * 1000 &&
           stayer.trace().events.size() == size_t(s.eventsWritten());
  }));
  EXPECT_EQ(server.stats().streamClients, 2);
  EXPECT_EQ(server.stats().streamsServed, 3u);
}

TEST(LiveServer, ASlowClientLosesEventsButNotStringsAndIsToldHowMany) {
  LiveServer::Options options;
  options.clientQueueBytes = 64 << 10;
  options.backlogBytes = 0;
  LiveServer server(options);
  StreamBuilder s;
  server.begin(s.preamble());
  LiveStream slow("127.0.0.1", server.port(), "");

  // Write while the client reads nothing, until the kernel's socket buffers and
  // the client's queue are full and the server sheds events; then some more.
  auto slowest = Clock::duration::zero();
  int batchesAfterDrops = 0;
  for (int i = 0; batchesAfterDrops < 20; ++i) {
    ASSERT_LT(i, 20000) << "the server never dropped an event for a client that does not read";
    const Batch batch = s.batch(1000, /*newString=*/i % 10 == 0, /*clockSync=*/i % 10 == 5);
    const auto start = Clock::now();
    server.write(batch);
    slowest = std::max(slowest, Clock::now() - start);
    if (server.stats().eventsDropped > 0) ++batchesAfterDrops;
  }
  // Only a sanity bound: write() appends to memory and never waits for the client.
  EXPECT_LT(slowest, 2s);

  // Reading again, the client is told what it lost once its queue has drained.
  ASSERT_TRUE(pumpUntil({&slow}, [&] { return slow.trace().dropped > 0; }));
  // (Every drop: the queue may have drained and filled again while writing.)
  ASSERT_TRUE(
      pumpUntil({&slow}, [&] { return slow.trace().dropped == server.stats().eventsDropped; }));
  server.write(s.batch(1, /*newString=*/true));
  const int64_t last = s.eventsWritten() - 1;
  ASSERT_TRUE(pumpUntil({&slow}, [&] {
    return !slow.trace().events.empty() && slow.trace().events.back().beginNs == last * 1000;
  }));
  const RankTrace& t = slow.trace();
  EXPECT_EQ(t.events.size() + t.dropped, static_cast<uint64_t>(s.eventsWritten()));
  EXPECT_EQ(t.dropped, server.stats().eventsDropped);
  EXPECT_EQ(t.strings.size(), s.stringsDefined() + 1u);
  EXPECT_EQ(static_cast<int64_t>(t.clockSyncs.size()), s.clockSyncsWritten());
  for (size_t i = 1; i < t.events.size(); ++i)
    ASSERT_LT(t.events[i - 1].beginNs, t.events[i].beginNs);
}

TEST(LiveServer, OffLoopbackNeedsAToken) {
  LiveServer::Options open;
  open.host = "0.0.0.0";
  try {
    LiveServer server(open);
    FAIL() << "listening on 0.0.0.0 without a token must be refused";
  } catch (const InvalidArgument& e) {
    EXPECT_TRUE(contains(e.what(), "RINGX_TRACE_TOKEN")) << e.what();
  }
  // Loopback needs none.
  for (const char* host : {"localhost", "127.0.0.2"}) {
    LiveServer::Options loopback;
    loopback.host = host;
    EXPECT_NO_THROW(LiveServer server(loopback)) << host;
  }

  LiveServer::Options guarded = open;
  guarded.token = "s3cret-token";
  LiveServer server(guarded);
  StreamBuilder s;
  server.begin(s.preamble());
  server.setDirectory({{0, "127.0.0.1", server.port()}});
  LiveStream ok("127.0.0.1", server.port(), "s3cret-token");
  server.write(s.batch(5));
  ASSERT_TRUE(pumpUntil({&ok}, [&] { return ok.trace().events.size() == 5; }));
  EXPECT_EQ(fetchDirectory("127.0.0.1", server.port(), "s3cret-token").size(), 1u);

  try {
    LiveStream wrong("127.0.0.1", server.port(), "guess");
    FAIL() << "a wrong token must be refused";
  } catch (const PeerError& e) {
    EXPECT_TRUE(contains(e.what(), "invalid token")) << e.what();
  }
  try {
    LiveStream missing("127.0.0.1", server.port(), "");
    FAIL() << "a missing token must be refused";
  } catch (const PeerError& e) {
    EXPECT_TRUE(contains(e.what(), "requires a token")) << e.what();
  }
  EXPECT_THROW(fetchDirectory("127.0.0.1", server.port(), "guess"), PeerError);
  EXPECT_EQ(server.stats().streamClients, 1);

  // A token set on loopback is required too.
  LiveServer::Options local;
  local.token = "local-token";
  LiveServer localServer(local);
  EXPECT_THROW(LiveStream("127.0.0.1", localServer.port(), ""), PeerError);
  EXPECT_NO_THROW(LiveStream("127.0.0.1", localServer.port(), "local-token"));

  LiveServer::Options spaced;
  spaced.token = "two words";
  EXPECT_THROW(LiveServer bad(spaced), InvalidArgument);
}

TEST(LiveServer, DirectoryRoundTrip) {
  LiveServer server(LiveServer::Options{});
  try {
    fetchDirectory("127.0.0.1", server.port(), "");
    FAIL() << "an unset directory must be refused";
  } catch (const PeerError& e) {
    EXPECT_TRUE(contains(e.what(), "directory not ready")) << e.what();
  }

  server.setDirectory({{1, "node-b", 29501}, {0, "127.0.0.1", server.port()}});
  server.addDirectoryEntry({2, "node-c", 29502});
  server.addDirectoryEntry({1, "node-b2", 29511});  // rank 1 moved
  const std::vector<DirectoryEntry> expected = {
      {0, "127.0.0.1", server.port()}, {1, "node-b2", 29511}, {2, "node-c", 29502}};
  EXPECT_EQ(fetchDirectory("127.0.0.1", server.port(), ""), expected);
  EXPECT_EQ(fetchDirectory("localhost", server.port(), "", 30s), expected);

  server.setDirectory({{7, "fe80::1", 1}});
  EXPECT_EQ(fetchDirectory("127.0.0.1", server.port(), ""),
            (std::vector<DirectoryEntry>{{7, "fe80::1", 1}}));
  EXPECT_THROW(server.addDirectoryEntry({3, "two words", 1}), InvalidArgument);
  EXPECT_THROW(server.addDirectoryEntry({3, "node", 0}), InvalidArgument);
}

TEST(LiveServer, RequestsThatAreNotTheProtocolAreRejectedAndTheServerCarriesOn) {
  LiveServer server(LiveServer::Options{});
  StreamBuilder s;
  server.begin(s.preamble());
  const int port = server.port();

  EXPECT_TRUE(contains(rawExchange(port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
                       "ERR not a ringx live trace request"));
  EXPECT_TRUE(contains(rawExchange(port, std::string(10000, 'A')), "ERR request line longer than"));
  EXPECT_TRUE(contains(rawExchange(port, std::string("\0\x01\xff\n", 4)), "ERR not a ringx"));
  EXPECT_TRUE(contains(rawExchange(port, "RINGX-LIVE 2 - STREAM\n"), "ERR protocol version 2"));
  EXPECT_TRUE(contains(rawExchange(port, "RINGX-LIVE 1 - FETCH\n"), "ERR unknown request"));
  const std::string reply = rawExchange(port, "RINGX-LIVE 1 - DIRECTORY\n");
  EXPECT_EQ(reply, "ERR directory not ready\n");
  // Clients that go away before finishing their request line.
  for (const char* partial : {"", "RINGX-LI"}) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ::send(fd, partial, std::strlen(partial), MSG_NOSIGNAL);
    ::close(fd);
  }

  LiveStream good("127.0.0.1", port, "");
  server.write(s.batch(3));
  ASSERT_TRUE(pumpUntil({&good}, [&] { return good.trace().events.size() == 3; }));
  ASSERT_TRUE(waitUntil([&] { return server.stats().connections == 1; }));
  EXPECT_GE(server.stats().requestsRejected, 6u);
  EXPECT_EQ(server.stats().streamsServed, 1u);
}

TEST(LiveServer, AClientThatSaysNothingIsTurnedAway) {
  LiveServer::Options options;
  options.handshakeTimeoutMs = 200;
  LiveServer server(options);
  EXPECT_EQ(rawExchange(server.port(), ""), "ERR no request line within 200 ms\n");
  ASSERT_TRUE(waitUntil([&] { return server.stats().connections == 0; }));
  EXPECT_EQ(server.stats().requestsRejected, 1u);
}

TEST(LiveServer, CloseDeliversWhatWasQueuedAndEndsTheStreams) {
  LiveServer server(LiveServer::Options{});
  // A client that connects before begin() gets the preamble when it comes.
  LiveStream client("127.0.0.1", server.port(), "");
  StreamBuilder s;
  server.begin(s.preamble());
  for (int i = 0; i < 3; ++i) server.write(s.batch(100, /*newString=*/true));
  server.close();
  server.write(s.batch(100));  // after close: ignored, harmless

  ASSERT_TRUE(pumpUntil({&client}, [&] { return !client.connected(); }));
  EXPECT_EQ(client.trace().events.size(), 300u);
  EXPECT_EQ(client.trace().strings.size(), 7u);
  EXPECT_EQ(client.closeReason(), "the server closed the stream");
  EXPECT_FALSE(client.poll(0));
  EXPECT_THROW(LiveStream("127.0.0.1", server.port(), "", 5s), IoError);
}

// A batch of every kind of event a rank records, strings 4 to 9 defined in it (or
// not, for a second batch): two collective spans, one compute span (user category),
// one step span, two memory counters, and a clock sync.
Batch mixedBatch(int64_t at, bool defineStrings) {
  Batch b;
  if (defineStrings) {
    Encoder strings;
    strings.string(4, "compute");
    strings.string(5, "forward");
    strings.string(6, "steps");
    strings.string(7, "step");
    strings.string(8, "memory");
    strings.string(9, "rss");
    b.strings = strings.bytes();
  }
  Encoder records;
  records.clockSync(ClockSync{at, -7000, 100});
  auto add = [&](EventKind kind, Category category, uint32_t track, uint32_t name, int64_t begin,
                 int64_t end, double value = 0) {
    Event e;
    e.kind = kind;
    e.category = category;
    e.track = track;
    e.name = name;
    e.beginNs = begin;
    e.endNs = end;
    e.value = value;
    records.event(e, nullptr);
    ++b.events;
  };
  add(EventKind::kSpan, Category::kStep, 6, 7, at, at + 9000);
  add(EventKind::kSpan, Category::kUser, 4, 5, at + 100, at + 4000);
  add(EventKind::kCounter, Category::kMemory, 8, 9, at + 200, at + 200, 1e9);
  add(EventKind::kSpan, Category::kCollective, 1, 2, at + 4000, at + 6000);
  add(EventKind::kCounter, Category::kMemory, 8, 9, at + 5000, at + 5000, 2e9);
  add(EventKind::kSpan, Category::kCollective, 1, 2, at + 6000, at + 8000);
  b.records = records.bytes();
  return b;
}

int countCategory(const RankTrace& t, Category category) {
  int n = 0;
  for (const Event& e : t.events) n += e.category == category;
  return n;
}

TEST(LiveServer, ASummaryStreamHasCollectivesAndStepsButNoComputeOrCounters) {
  LiveServer server(LiveServer::Options{});
  StreamBuilder s;
  server.begin(s.preamble());
  server.write(mixedBatch(0, /*defineStrings=*/true));  // in the backlog for both clients
  LiveStream full("127.0.0.1", server.port(), "");
  LiveStream summary("127.0.0.1", server.port(), "", kLiveDefaultTimeout, LiveStreamKind::kSummary);
  server.write(mixedBatch(100000, /*defineStrings=*/false));  // through both clients' queues

  ASSERT_TRUE(pumpUntil({&full, &summary}, [&] {
    return full.trace().events.size() >= 12 && summary.trace().events.size() >= 6;
  }));
  EXPECT_EQ(full.trace().events.size(), 12u);
  EXPECT_EQ(countCategory(full.trace(), Category::kUser), 2);
  EXPECT_EQ(countCategory(full.trace(), Category::kMemory), 4);

  const RankTrace& t = summary.trace();
  EXPECT_EQ(t.events.size(), 6u);
  EXPECT_EQ(countCategory(t, Category::kCollective), 4);
  EXPECT_EQ(countCategory(t, Category::kStep), 2);
  for (const Event& e : t.events) EXPECT_NE(e.kind, EventKind::kCounter);
  // Everything but the events is the full stream's: the header, every string (later
  // events may use any), every clock sync (the viewer aligns the rank with them).
  EXPECT_EQ(t.header.host, "test-host");
  EXPECT_EQ(t.strings, full.trace().strings);
  EXPECT_EQ(t.clockSyncs.size(), 2u);
  EXPECT_EQ(t.str(t.events.back().name), "allreduce");
  EXPECT_EQ(t.events.back().beginNs, 106000);
  EXPECT_LT(summary.bytesReceived(), full.bytesReceived());

  const LiveServer::Stats stats = server.stats();
  EXPECT_EQ(stats.streamsServed, 1u);
  EXPECT_EQ(stats.summariesServed, 1u);
  EXPECT_EQ(stats.streamClients, 2);
}

TEST(LiveServer, ASummaryNeedsTheTokenAndAnOlderServerIsReportedAsSuch) {
  LiveServer::Options options;
  options.token = "s3cret-token";
  LiveServer server(options);
  StreamBuilder s;
  server.begin(s.preamble());
  server.write(mixedBatch(0, /*defineStrings=*/true));
  for (const char* token : {"guess", ""}) {
    try {
      LiveStream wrong("127.0.0.1", server.port(), token, kLiveDefaultTimeout,
                       LiveStreamKind::kSummary);
      FAIL() << "a summary with token '" << token << "' must be refused";
    } catch (const PeerError& e) {
      EXPECT_TRUE(contains(e.what(), "refused the SUMMARY request")) << e.what();
      EXPECT_TRUE(contains(e.what(), *token ? "invalid token" : "requires a token")) << e.what();
    }
  }
  LiveStream right("127.0.0.1", server.port(), "s3cret-token", kLiveDefaultTimeout,
                   LiveStreamKind::kSummary);
  ASSERT_TRUE(pumpUntil({&right}, [&] { return right.trace().events.size() >= 3; }));
  EXPECT_EQ(server.stats().summariesServed, 1u);

  // A server from before SUMMARY answered an unknown request word thus (its own
  // usage text); the client says the job's ringx is too old rather than quote it.
  try {
    parseLiveStatus(
        "ERR unknown request 'SUMMARY'; expected 'RINGX-LIVE 1 <token or -> STREAM|DIRECTORY'",
        "node-a:9100", "SUMMARY");
    FAIL() << "an old server's refusal must throw";
  } catch (const PeerError& e) {
    EXPECT_TRUE(contains(e.what(), "node-a:9100 does not know the SUMMARY request")) << e.what();
    EXPECT_TRUE(contains(e.what(), "older ringx")) << e.what();
  }
  // Other refusals keep the server's words.
  try {
    parseLiveStatus("ERR invalid token: x", "node-a:9100", "SUMMARY");
    FAIL();
  } catch (const PeerError& e) {
    EXPECT_TRUE(contains(e.what(), "refused the SUMMARY request: invalid token")) << e.what();
  }
}

TEST(LiveServer, SummaryRecordFilterLooksAtKindAndCategoryOnly) {
  auto record = [](EventKind kind, Category category) {
    Encoder enc;
    Event e;
    e.kind = kind;
    e.category = category;
    e.endNs = kind == EventKind::kSpan ? 10 : 0;
    enc.event(e, nullptr);
    return enc.bytes();
  };
  EXPECT_TRUE(isSummaryEventRecord(record(EventKind::kSpan, Category::kCollective)));
  EXPECT_TRUE(isSummaryEventRecord(record(EventKind::kInstant, Category::kCollective)));
  EXPECT_TRUE(isSummaryEventRecord(record(EventKind::kSpan, Category::kStep)));
  EXPECT_FALSE(isSummaryEventRecord(record(EventKind::kCounter, Category::kCollective)));
  for (Category c : {Category::kDdp, Category::kFsdp, Category::kMemory, Category::kUser})
    EXPECT_FALSE(isSummaryEventRecord(record(EventKind::kSpan, c)));
  Encoder sync;
  sync.clockSync(ClockSync{1, 2, 3});
  EXPECT_FALSE(isSummaryEventRecord(sync.bytes()));
  EXPECT_FALSE(isSummaryEventRecord(std::string("\x03\0\0\0\x03", 5)));
}

TEST(LiveHostPort, ParsesHostsPortsAndSaysWhatIsWrong) {
  auto parsed = [](const char* text) {
    const HostPort hp = parseHostPort(text);
    return hp.host + " " + std::to_string(hp.port);
  };
  EXPECT_EQ(parsed("127.0.0.1:9100"), "127.0.0.1 9100");
  EXPECT_EQ(parsed("node-a:0"), "node-a 0");
  EXPECT_EQ(parsed("[::1]:65535"), "::1 65535");
  EXPECT_EQ(parsed("9100"), "127.0.0.1 9100");
  EXPECT_EQ(parsed(":9100"), "127.0.0.1 9100");
  for (const char* bad : {"", "node:", "node:http", "node:70000", "node:-1", "::1:9100",
                          "[::1]9100", "[::1", "[]:1", "a b:1", "node:9100 "}) {
    try {
      parseHostPort(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InvalidArgument& e) {
      EXPECT_TRUE(contains(e.what(), "expected HOST:PORT")) << e.what();
    }
  }
}

}  // namespace
}  // namespace ringx::trace
