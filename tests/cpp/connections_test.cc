// Connections on demand (bootstrap/connector.h): a rank connects only to the peers its
// algorithms use, pairs that never talk never connect, simultaneous dials make one
// connection, and a peer that is gone is an error naming it, never a hang.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "tests/cpp/rank_threads.h"

namespace ringx {
namespace {

using algorithms::Collective;
using algorithms::CollectiveKind;
using testing::messageOf;
using testing::runGroup;
using testing::runThreads;
using testing::testOptions;

// Whether `peer` is at distance 2^k from `rank` around a ring of `size` (either way).
bool atPowerOfTwoDistance(int rank, int peer, int size) {
  for (int distance = 1; distance < size; distance *= 2) {
    if ((rank + distance) % size == peer || (peer + distance) % size == rank) return true;
  }
  return false;
}

void ringAllreduce(Group& group, std::vector<int32_t>& data) {
  group.run(CollectiveKind::kAllreduce, DataType::kInt32, ReduceOp::kSum, -1, {},
            [&](Collective& c) {
              algorithms::ringAllreduce(c, data.data(), data.size(), DataType::kInt32,
                                        ReduceOp::kSum, 4096);
            });
}

// 64 ranks (threads) that only run ring allreduce connect to their two ring neighbours and to
// nobody else, on both channels; a (recursive-doubling) barrier then adds only its log2(64) = 6
// partners, at distance 2^k.
TEST(Connections, RingAllreduceAt64RanksConnectsOnlyRingNeighbours) {
  const int size = 64;
  std::vector<std::vector<int>> afterRing(size), p2pAfterRing(size), afterBarrier(size);
  // Every rank looks at its connections between the ring and the barrier, while no rank has
  // started the barrier yet (the test's own rendezvous, outside ringx).
  std::atomic<int> ringDone{0}, looked{0};
  auto waitFor = [&](std::atomic<int>& count) {
    ++count;
    while (count < size) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  runGroup(
      size,
      [&](Group& group) {
        const int r = group.rank();
        EXPECT_TRUE(group.collectivePeers().empty()) << "rank " << r << " connected at start";
        std::vector<int32_t> data(size * 3, r);
        ringAllreduce(group, data);
        // EXPECT, not ASSERT: a rank that returned early would leave the others waiting.
        EXPECT_EQ(data, std::vector<int32_t>(data.size(), size * (size - 1) / 2)) << "rank " << r;
        waitFor(ringDone);
        afterRing[r] = group.collectivePeers();
        p2pAfterRing[r] = group.pointToPointPeers();
        waitFor(looked);
        group.run(CollectiveKind::kBarrier, DataType::kUInt8, ReduceOp::kSum, -1, {},
                  [&](Collective& c) { algorithms::barrier(c, group.tuning()); });
        afterBarrier[r] = group.collectivePeers();
      },
      [](GroupOptions& options) { options.mesh.sharedMemory = false; });
  for (int r = 0; r < size; ++r) {
    std::vector<int> neighbours = {(r + size - 1) % size, (r + 1) % size};
    std::sort(neighbours.begin(), neighbours.end());
    EXPECT_EQ(afterRing[r], neighbours) << "rank " << r;
    EXPECT_EQ(p2pAfterRing[r], neighbours) << "rank " << r << " (point-to-point)";
    EXPECT_LE(afterBarrier[r].size(), 8u) << "rank " << r;
    for (int peer : afterBarrier[r]) {
      EXPECT_TRUE(atPowerOfTwoDistance(r, peer, size)) << "rank " << r << " talked to " << peer;
    }
  }
  // Connections are symmetric: a pair that exists exists at both ends.
  for (int r = 0; r < size; ++r) {
    for (int peer : afterBarrier[r]) {
      EXPECT_TRUE(std::count(afterBarrier[peer].begin(), afterBarrier[peer].end(), r) == 1)
          << r << " holds a connection to " << peer << " that " << peer << " does not";
    }
  }
}

// 64 ranks faked as 8 hosts of 8 (the host layout; transports stay TCP): a hierarchical
// allreduce, small (direct within hosts and among leaders) and large (chains within hosts, the
// leaders' ring), and a small hierarchical broadcast connect a non-leader only to ranks of its
// own host, and a leader across hosts only to other leaders, on both channels.
TEST(Connections, HierarchicalAllreduceKeepsNonLeadersOnTheirHost) {
  const int size = 64, perHost = 8;
  std::vector<std::vector<int>> collective(size), p2p(size);
  std::vector<std::string> algorithms(size);
  std::atomic<int> done{0};
  runGroup(
      size,
      [&](Group& group) {
        const int r = group.rank();
        for (size_t count : {size_t{1024}, size_t{64 * 1024}}) {
          std::vector<int32_t> data(count, r);
          group.run(CollectiveKind::kAllreduce, DataType::kInt32, ReduceOp::kSum, -1, {},
                    [&](Collective& c) {
                      algorithms::allreduce(c, data.data(), data.size(), DataType::kInt32,
                                            ReduceOp::kSum, group.tuning());
                      algorithms[r] += std::string(c.algorithm()) + " ";
                    });
          EXPECT_EQ(data, std::vector<int32_t>(count, size * (size - 1) / 2)) << "rank " << r;
        }
        // A small broadcast from a rank that leads no host: within its host, then the leaders.
        std::vector<int32_t> data(1024, r == 13 ? 7 : 0);
        group.run(CollectiveKind::kBroadcast, DataType::kInt32, ReduceOp::kSum, 13, {},
                  [&](Collective& c) {
                    algorithms::broadcast(c, data.data(), data.size() * sizeof(int32_t), 13,
                                          group.tuning());
                    algorithms[r] += c.algorithm();
                  });
        EXPECT_EQ(data, std::vector<int32_t>(1024, 7)) << "rank " << r;
        // Everyone looks once every rank is done: no connection is still being made.
        ++done;
        while (done < size) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        collective[r] = group.collectivePeers();
        p2p[r] = group.pointToPointPeers();
      },
      [](GroupOptions& options) {
        options.mesh.sharedMemory = false;
        options.fakeHosts.resize(64);
        for (int r = 0; r < 64; ++r) options.fakeHosts[r] = r / 8;
      });
  auto hostOf = [&](int rank) { return rank / perHost; };
  auto isLeader = [&](int rank) { return rank % perHost == 0; };
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(algorithms[r], "hierarchical+direct hierarchical+ring hierarchical") << "rank " << r;
    EXPECT_EQ(collective[r], p2p[r]) << "rank " << r;
    EXPECT_FALSE(collective[r].empty()) << "rank " << r;
    for (int peer : collective[r]) {
      if (hostOf(peer) == hostOf(r)) continue;
      EXPECT_TRUE(isLeader(r) && isLeader(peer))
          << "rank " << r << " talked across hosts to rank " << peer;
    }
  }
}

// A first point-to-point message connects exactly its two ranks.
TEST(Connections, PointToPointConnectsOnlyItsTwoRanks) {
  const int size = 6;
  std::vector<std::vector<int>> p2pPeers(size), collectivePeers(size);
  std::atomic<int> done{0};
  runGroup(size, [&](Group& group) {
    const int r = group.rank();
    int value = 0;
    std::mutex mutex;
    std::condition_variable finished;
    std::string error = "pending";
    auto callback = [&](std::exception_ptr e, int) {
      std::lock_guard<std::mutex> lock(mutex);
      error = "";
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          error = ex.what();
        }
      }
      finished.notify_all();
    };
    if (r == 1 || r == 4) {
      value = 42;
      if (r == 1) group.p2p().send(4, 7, &value, sizeof(value), callback);
      if (r == 4) group.p2p().recv(1, 7, &value, sizeof(value), callback);
      std::unique_lock<std::mutex> lock(mutex);
      finished.wait(lock, [&] { return error != "pending"; });
      EXPECT_EQ(error, "");
      EXPECT_EQ(value, 42);
    }
    // Everyone looks only after the message went through.
    ++done;
    while (done < size) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    p2pPeers[r] = group.pointToPointPeers();
    collectivePeers[r] = group.collectivePeers();
  });
  for (int r = 0; r < size; ++r) {
    const std::vector<int> want = r == 1   ? std::vector<int>{4}
                                  : r == 4 ? std::vector<int>{1}
                                           : std::vector<int>{};
    EXPECT_EQ(p2pPeers[r], want) << "rank " << r;
    EXPECT_TRUE(collectivePeers[r].empty()) << "rank " << r;
  }
}

// Every rank dials every other at the same moment (alltoall, repeated over fresh groups):
// one connection per pair results, and the data is right.
TEST(Connections, SimultaneousDialsMakeOneConnectionPerPair) {
  const int size = 12;
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::vector<std::vector<int>> peers(size);
    runGroup(size, [&](Group& group) {
      const int r = group.rank();
      std::vector<size_t> offsets, bytes;
      for (int p = 0; p < size; ++p) {
        offsets.push_back(p * 4);
        bytes.push_back(4);
      }
      std::vector<int32_t> input(size), output(size, -1);
      for (int p = 0; p < size; ++p) input[p] = r * 100 + p;
      group.run(
          CollectiveKind::kAlltoall, DataType::kUInt8, ReduceOp::kSum, -1, {}, [&](Collective& c) {
            algorithms::alltoall(c, input.data(), offsets, bytes, output.data(), offsets, bytes);
          });
      for (int p = 0; p < size; ++p) ASSERT_EQ(output[p], p * 100 + r);
      peers[r] = group.collectivePeers();
    });
    for (int r = 0; r < size; ++r) EXPECT_EQ(peers[r].size(), static_cast<size_t>(size - 1));
  }
}

// A peer whose group is gone before anyone connected to it: the first collective that needs
// it fails at once on the ranks that need it, naming the collective and the peer.
TEST(Connections, APeerGoneBeforeTheFirstConnectionIsNamed) {
  auto store = std::make_shared<InMemoryStore>();
  const int size = 3;
  std::vector<std::string> messages(size);
  std::atomic<int> constructed{0};
  std::atomic<bool> gone{false};
  runThreads(size, [&](int rank) {
    auto group = std::make_unique<Group>(testOptions(rank, size, store));
    ++constructed;
    while (constructed < size) std::this_thread::yield();
    if (rank == 2) {
      group.reset();
      gone = true;
      return;
    }
    while (!gone) std::this_thread::yield();
    std::vector<int32_t> data(10, 1);
    const auto start = std::chrono::steady_clock::now();
    messages[rank] = messageOf([&] {
      group->run(CollectiveKind::kAllreduce, DataType::kInt32, ReduceOp::kSum, -1, {},
                 [&](Collective& c) {
                   algorithms::allreduce(c, data.data(), data.size(), DataType::kInt32,
                                         ReduceOp::kSum, group->tuning());
                 });
    });
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  });
  for (int rank : {0, 1}) {
    EXPECT_NE(messages[rank].find("allreduce #0"), std::string::npos) << messages[rank];
    EXPECT_NE(messages[rank].find("rank 2"), std::string::npos) << messages[rank];
  }
}

}  // namespace
}  // namespace ringx
