// The shared-memory transport with ranks as real processes: ring wrap-around,
// odd sizes, many collectives back to back, mixed hosts, clean-up, dead peers.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>

#include "backend/group/group.h"
#include "tests/cpp/process_ranks.h"

namespace ringx {
namespace {

using algorithms::Collective;
using algorithms::CollectiveKind;
using testing::processOptions;
using testing::runProcesses;

void expect(bool condition, const std::string& what) {
  if (!condition) throw std::runtime_error(what);
}

void allreduceInts(Group& group, std::vector<int64_t>& data) {
  group.run(CollectiveKind::kAllreduce, DataType::kInt64, ReduceOp::kSum, -1, {},
            [&](Collective& c) {
              algorithms::allreduce(c, data.data(), data.size(), DataType::kInt64, ReduceOp::kSum,
                                    group.tuning());
            });
}

TEST(SharedMemory, WrapAroundOddSizesManyCollectivesBackToBack) {
  auto errors = runProcesses(3, [](int rank, std::shared_ptr<Store> store) {
    GroupOptions options = processOptions(rank, 3, store);
    options.mesh.shmCapacity = 4099;  // tiny and odd: every transfer wraps around the ring
    options.tuning.segmentBytes = 1000;
    Group group(options);
    for (int round = 0; round < 200; ++round) {
      size_t count = (round * 7919) % 20011;  // 0, odd, prime-ish, up to 160 KB
      std::vector<int64_t> data(count);
      for (size_t i = 0; i < count; ++i) data[i] = rank * 1000 + static_cast<int64_t>(i) + round;
      allreduceInts(group, data);
      for (size_t i = 0; i < count; ++i) {
        int64_t want = 3 * (static_cast<int64_t>(i) + round) + 3000;
        if (data[i] != want) {
          throw std::runtime_error(
              strCat("round ", round, " element ", i, ": ", data[i], " != ", want));
        }
      }
      std::vector<char> bytes(count % 5000, static_cast<char>(rank == round % 3 ? round : 0));
      group.run(CollectiveKind::kBroadcast, DataType::kUInt8, ReduceOp::kSum, round % 3, {},
                [&](Collective& c) {
                  algorithms::chainBroadcast(c, bytes.data(), bytes.size(), round % 3, 700);
                });
      for (char b : bytes) expect(b == static_cast<char>(round), "broadcast result");
      // Connections are made on demand: after the first collective, to every peer (of three).
      for (int peer = 0; peer < 3; ++peer) {
        if (peer != rank) expect(group.transports()[peer] == "shm", "expected shm to every peer");
      }
    }
  });
  for (auto& e : errors) EXPECT_EQ(e, "");
}

// Final results placed with streaming stores (reduce/copy.h), forced on for
// every size: misaligned buffers, odd sizes, all three algorithms that use them.
TEST(SharedMemory, StreamingPlacementGivesTheSameResults) {
  auto errors = runProcesses(3, [](int rank, std::shared_ptr<Store> store) {
    ::setenv("RINGX_STREAMING_MIN_BYTES", "0", 1);
    GroupOptions options = processOptions(rank, 3, store);
    options.tuning.segmentBytes = 4096;
    Group group(options);
    for (size_t count : {size_t{0}, size_t{1}, size_t{4097}, size_t{100003}}) {
      // One int64 of padding in front: the data starts 8 bytes off any 16-byte boundary.
      std::vector<int64_t> storage(count + 1);
      int64_t* data = storage.data() + 1;
      for (size_t i = 0; i < count; ++i) data[i] = rank + 3 * static_cast<int64_t>(i);
      group.run(CollectiveKind::kAllreduce, DataType::kInt64, ReduceOp::kSum, -1, {},
                [&](Collective& c) {
                  algorithms::ringAllreduce(c, data, count, DataType::kInt64, ReduceOp::kSum,
                                            options.tuning.segmentBytes);
                });
      for (size_t i = 0; i < count; ++i) {
        expect(data[i] == 3 + 9 * static_cast<int64_t>(i), strCat("allreduce element ", i));
      }
      const size_t bytes = count + 3;  // odd byte counts
      std::vector<char> input(bytes, static_cast<char>('a' + rank)), output(3 * bytes + 1);
      group.run(CollectiveKind::kAllgather, DataType::kUInt8, ReduceOp::kSum, -1, {},
                [&](Collective& c) {
                  algorithms::ringAllgather(c, input.data(), output.data() + 1, bytes, 4096);
                });
      for (size_t i = 0; i < 3 * bytes; ++i) {
        expect(output[1 + i] == static_cast<char>('a' + i / bytes), strCat("all-gather byte ", i));
      }
      std::vector<char> broadcast(bytes + 1, static_cast<char>(rank == 1 ? 'x' : 0));
      group.run(CollectiveKind::kBroadcast, DataType::kUInt8, ReduceOp::kSum, 1, {},
                [&](Collective& c) {
                  algorithms::chainBroadcast(c, broadcast.data() + 1, bytes, 1, 4096);
                });
      for (size_t i = 1; i <= bytes; ++i) expect(broadcast[i] == 'x', "broadcast byte");
    }
  });
  for (auto& e : errors) EXPECT_EQ(e, "");
}

TEST(SharedMemory, TrafficCountsWhatTheRingMoved) {
  // The same account as Traffic.RingAllreduceSendsEachChunkTwiceAroundTheRing, over shm.
  auto errors = runProcesses(3, [](int rank, std::shared_ptr<Store> store) {
    Group group(processOptions(rank, 3, store));
    const size_t count = 30000;
    std::vector<int64_t> data(count, rank);
    const std::vector<ConnectionTraffic> before = group.traffic();
    group.run(
        CollectiveKind::kAllreduce, DataType::kInt64, ReduceOp::kSum, -1, {}, [&](Collective& c) {
          algorithms::ringAllreduce(c, data.data(), count, DataType::kInt64, ReduceOp::kSum, 4096);
        });
    const std::vector<ConnectionTraffic> after = group.traffic();
    const uint64_t header = sizeof(algorithms::CollectiveHeader);
    for (size_t i = 0; i < after.size(); ++i) {
      const ConnectionTraffic& a = after[i];
      const bool collective = a.channel == "collective";
      expect(a.transport == (collective ? "shm" : "tcp"), strCat("transport ", a.transport));
      const uint64_t sent = a.sent - before[i].sent;
      // To the right neighbour: 2 chunks of count/3 and a header; to the left: a header.
      const uint64_t expected = !collective                ? 0
                                : a.peer == (rank + 1) % 3 ? 2 * 2 * (count / 3) * 8 + header
                                                           : header;
      expect(sent == expected, strCat("rank ", rank, " sent ", sent, " bytes to ", a.peer, " on ",
                                      a.channel, ", expected ", expected));
    }
  });
  for (auto& e : errors) EXPECT_EQ(e, "");
}

TEST(SharedMemory, MixedHostsUseTcpBetweenAndShmWithin) {
  auto errors = runProcesses(4, [](int rank, std::shared_ptr<Store> store) {
    ::setenv("RINGX_HOST_ID", rank < 2 ? "host-a" : "host-b", 1);
    Group group(processOptions(rank, 4, store));
    std::vector<int64_t> data(300001, rank + 1);
    allreduceInts(group, data);
    for (auto v : data) expect(v == 10, "mixed-transport allreduce result");
    // The ring connected each rank to its two neighbours only, one on each kind of edge.
    auto transports = group.transports();
    for (int peer = 0; peer < 4; ++peer) {
      if (peer == rank) continue;
      const bool sameHost = (peer < 2) == (rank < 2);
      const bool neighbour = peer == (rank + 1) % 4 || peer == (rank + 3) % 4;
      const std::string want = !neighbour ? "none" : sameHost ? "shm" : "tcp";
      expect(transports[peer] == want,
             strCat("rank ", rank, " to ", peer, " uses ", transports[peer], ", expected ", want));
    }
  });
  for (auto& e : errors) EXPECT_EQ(e, "");
}

TEST(SharedMemory, NoSegmentNamesRemainWhileTheGroupRuns) {
  auto errors = runProcesses(2, [](int rank, std::shared_ptr<Store> store) {
    Group group(processOptions(rank, 2, store));
    std::vector<int64_t> data(10, 1);
    allreduceInts(group, data);  // both ranks are past set-up here
    for (const auto& name : testing::ringxShmEntries()) {
      expect(name.find("-" + std::to_string(::getpid()) + "-") == std::string::npos &&
                 name.rfind("ringx-" + std::to_string(::getpid()) + "-", 0) != 0,
             "segment name left in /dev/shm: " + name);
    }
  });
  for (auto& e : errors) EXPECT_EQ(e, "");
}

TEST(SharedMemory, TcpOnlyWhenSharedMemoryIsOff) {
  auto errors = runProcesses(2, [](int rank, std::shared_ptr<Store> store) {
    GroupOptions options = processOptions(rank, 2, store);
    options.mesh.sharedMemory = false;
    Group group(options);
    std::vector<int64_t> data(10, 1);
    allreduceInts(group, data);  // connects the two
    expect(group.transports()[1 - rank] == "tcp", "expected tcp");
  });
  for (auto& e : errors) EXPECT_EQ(e, "");
}

TEST(SharedMemory, KilledPeerIsNamedWithinTheTimeout) {
  std::vector<pid_t> ranks;
  auto errors = runProcesses(
      3,
      [](int rank, std::shared_ptr<Store> store) {
        GroupOptions options = processOptions(rank, 3, store);
        options.timeout = std::chrono::seconds(10);
        Group group(options);
        std::vector<int64_t> data(1 << 20, 1);
        allreduceInts(group, data);
        if (rank == 2) std::raise(SIGKILL);
        auto start = std::chrono::steady_clock::now();
        try {
          allreduceInts(group, data);
        } catch (const PeerError& e) {
          std::string text = e.what();
          expect(text.find("rank 2") != std::string::npos, "error does not name rank 2: " + text);
          expect(text.find("allreduce #1") != std::string::npos, "error does not name the call");
          expect(std::chrono::steady_clock::now() - start < std::chrono::seconds(10),
                 "took longer than the timeout");
          return;
        }
        throw std::runtime_error("no error after the peer died");
      },
      &ranks);
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(errors[2], "killed by signal 9");
  EXPECT_TRUE(testing::ringxShmEntries(ranks).empty());
}

}  // namespace
}  // namespace ringx
