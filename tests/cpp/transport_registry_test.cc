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
#include "base/error.h"

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

// This process's mappings whose path holds `name`: their bytes (smaps' Size) and how many of
// those are in memory (Rss).
struct Mapped {
  size_t bytes = 0;
  size_t resident = 0;
};
Mapped mappingsOf(const std::string& name) {
  std::ifstream smaps("/proc/self/smaps");
  Mapped kib;
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    std::istringstream fields(line);
    std::string first;
    fields >> first;
    size_t value = 0;
    if (first.find('-') != std::string::npos && first.back() != ':') {
      inside = line.find(name) != std::string::npos;  // a mapping's header line
    } else if (inside && first == "Size:" && fields >> value) {
      kib.bytes += value;
    } else if (inside && first == "Rss:" && fields >> value) {
      kib.resident += value;
    }
  }
  return {kib.bytes * 1024, kib.resident * 1024};
}

// Rank 0 and rank 1 of one process make their shared-memory pair over a socket pair (told
// `localRanks` share the host, unless 0); returns the pair segment's two mappings (one per
// end) right after.
Mapped afterMakingAPair(const std::string& token, size_t capacity, int localRanks) {
  MeshOptions options;
  options.shmCapacity = capacity;
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
  return mappingsOf(token.substr(0, 12) + "-coll-0-1");
}

// Both ends' mappings of a segment for rings of `capacity`, in whole pages.
size_t twoMappings(size_t capacity) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return 2 * ((shm::pairSegmentBytes(capacity) + page - 1) / page * page);
}

TEST(TransportRegistry, SharedMemoryPairsAreMadeCheaperWhereTheHostIsOversubscribed) {
  // A host of its own, or no more ranks than cores: 4 MiB rings, every page mapped by both
  // ends at set-up, so that the first pass through the rings takes no page faults.
  for (const auto& [token, localRanks] :
       {std::pair<std::string, int>{"aaaaaaaaaaaa-own", 0}, {"bbbbbbbbbbbb-fit", usableCores()}}) {
    const Mapped mapped = afterMakingAPair(token, 0, localRanks);
    EXPECT_EQ(mapped.bytes, twoMappings(kShmCapacity)) << token;
    EXPECT_EQ(mapped.resident, mapped.bytes) << token;
  }
  // More ranks than cores: 1 MiB rings, pages mapped as they are touched, and set-up touches
  // none (they are still reserved in /dev/shm: a full /dev/shm is an error at set-up).
  const Mapped over = afterMakingAPair("cccccccccccc-over", 0, usableCores() + 1);
  EXPECT_EQ(over.bytes, twoMappings(kShmCapacityOversubscribed));
  EXPECT_LT(over.resident, over.bytes / 16);
  // RINGX_SHM_BYTES (a capacity given) holds either way.
  EXPECT_EQ(afterMakingAPair("dddddddddddd-given", 3 << 20, usableCores() + 1).bytes,
            twoMappings(3 << 20));
}

TEST(TransportRegistry, TcpSendBatchComesFromTheEnvironment) {
  EXPECT_EQ(meshOptionsFromEnvironment().tcpSendBatchBytes, kTcpSendBatchBytes);
  ::setenv("RINGX_TCP_SEND_BATCH_BYTES", "0", 1);  // sends until the socket is full
  EXPECT_EQ(meshOptionsFromEnvironment().tcpSendBatchBytes, 0u);
  ::setenv("RINGX_TCP_SEND_BATCH_BYTES", "1048576", 1);
  EXPECT_EQ(meshOptionsFromEnvironment().tcpSendBatchBytes, 1u << 20);
  ::setenv("RINGX_TCP_SEND_BATCH_BYTES", "1M", 1);
  EXPECT_THROW(meshOptionsFromEnvironment(), Error);
  ::unsetenv("RINGX_TCP_SEND_BATCH_BYTES");
}

}  // namespace
}  // namespace ringx::transport
