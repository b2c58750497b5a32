// The registry of transport kinds (transport/registry.h): the order they are tried in and what
// each can join, decided from both ends' introductions alike.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "backend/transport/registry.h"

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

}  // namespace
}  // namespace ringx::transport
