// The registry of transport kinds (transport/registry.h): the order they are tried in and what
// each can join, decided from both ends' introductions alike; how the shared-memory kind maps
// a pair's segment.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "backend/transport/core_contention.h"
#include "backend/transport/mesh.h"
#include "backend/transport/registry.h"
#include "backend/transport/shm/pair.h"

namespace ringx::transport {
namespace {

Introduction introduction(bool sharedMemory, uint64_t host) {
  Introduction i{};
  std::memcpy(i.magic, "RINT", 4);
  i.sharedMemory = sharedMemory;
  i.hostHash = host;
  return i;
}

TEST(TransportRegistry, SharedMemoryFirstAndTcpLast) {
  const auto kinds = makeTransportKinds(0, "token", "coll", MeshOptions{});
  ASSERT_EQ(kinds.size(), 2u);
  EXPECT_STREQ(kinds.front()->name(), "shm");
  EXPECT_STREQ(kinds.back()->name(), "tcp");
}

TEST(TransportRegistry, SharedMemoryJoinsOnlyTwoWillingEndsOfOneHost) {
  const auto kinds = makeTransportKinds(0, "token", "coll", MeshOptions{});
  const TransportKind& shm = *kinds.front();
  EXPECT_TRUE(shm.canConnect(introduction(true, 1), introduction(true, 1)));
  EXPECT_FALSE(shm.canConnect(introduction(true, 1), introduction(true, 2)));   // two hosts
  EXPECT_FALSE(shm.canConnect(introduction(true, 1), introduction(false, 1)));  // TCP asked for
  EXPECT_FALSE(shm.canConnect(introduction(false, 1), introduction(true, 1)));
}

TEST(TransportRegistry, TcpJoinsAnyEdge) {
  const auto kinds = makeTransportKinds(3, "token", "coll", MeshOptions{});
  const TransportKind& tcp = *kinds.back();
  EXPECT_TRUE(tcp.canConnect(introduction(true, 1), introduction(true, 2)));
  EXPECT_TRUE(tcp.canConnect(introduction(false, 1), introduction(false, 1)));
}

// Bytes of this process's mappings whose path holds `name`, now in memory (smaps' Rss).
size_t residentBytesOf(const std::string& name) {
  std::ifstream smaps("/proc/self/smaps");
  size_t kib = 0;
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    std::istringstream fields(line);
    std::string first;
    fields >> first;
    if (first.find('-') != std::string::npos && first.back() != ':') {
      inside = line.find(name) != std::string::npos;  // a mapping's header line
    } else if (inside && first == "Rss:") {
      size_t value = 0;
      fields >> value;
      kib += value;
    }
  }
  return kib * 1024;
}

// Rank 0 and rank 1 of one process make their shared-memory pair over a socket pair; returns
// how much of the pair segment's two mappings (one per end) is in memory right after.
size_t residentAfterMakingAPair(const std::string& token, int localRanks) {
  MeshOptions options;
  options.shmCapacity = 1 << 20;
  PairMaker low(0, token, "coll", options), high(1, token, "coll", options);
  if (localRanks > 0) {
    low.setLocalRanks(localRanks);
    high.setLocalRanks(localRanks);
  }
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  const Deadline deadline = Clock::now() + std::chrono::seconds(10);
  std::unique_ptr<Pair> lowPair, highPair;
  std::thread other([&] { highPair = high.makePair(0, fds[1], deadline); });
  lowPair = low.makePair(1, fds[0], deadline);
  other.join();
  EXPECT_STREQ(lowPair->transportName(), "shm");
  EXPECT_STREQ(highPair->transportName(), "shm");
  return residentBytesOf(token.substr(0, 12) + "-coll-0-1");
}

TEST(TransportRegistry, SharedMemoryMapsPairSegmentsWholeUnlessTheHostIsOversubscribed) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t segment = (shm::pairSegmentBytes(1 << 20) + page - 1) / page * page;
  // A host of its own, or no more ranks than cores: both ends map every page at set-up, so the
  // first pass through the rings takes no page faults.
  EXPECT_EQ(residentAfterMakingAPair("aaaaaaaaaaaa-own", 0), 2 * segment);
  EXPECT_EQ(residentAfterMakingAPair("bbbbbbbbbbbb-fit", usableCores()), 2 * segment);
  // More ranks than cores: pages are mapped as they are touched, and set-up touches none
  // (they are still reserved in /dev/shm: a full /dev/shm is an error at set-up either way).
  EXPECT_LT(residentAfterMakingAPair("cccccccccccc-over", usableCores() + 1), segment / 8);
}

}  // namespace
}  // namespace ringx::transport
