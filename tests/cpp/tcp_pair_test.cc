// The TCP pair's progress(): how much one call sends before it receives (tcp/pair.cc says why
// it is bounded), and that bounded sends still deliver every byte, reducing receives included.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <utility>
#include <vector>

#include "backend/algorithms/receive_kernels.h"
#include "backend/transport/tcp/pair.h"
#include "base/error.h"

namespace ringx {
namespace {

// Two ends of one loopback TCP connection. The second end's receive buffer is set to 1 MiB
// (before the connection is made, so that the window follows it): the kernel clamps that to
// rmem_max and doubles it, at least 416 KiB, so a send into it that is not bounded moves several
// times kBatch in one progress() call.
std::pair<int, int> loopbackConnection() {
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  RINGX_SYSCHECK(listener, "socket");
  int buffer = 1 << 20;
  ::setsockopt(listener, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  RINGX_SYSCHECK(::bind(listener, reinterpret_cast<sockaddr*>(&address), length), "bind");
  RINGX_SYSCHECK(::listen(listener, 1), "listen");
  RINGX_SYSCHECK(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length),
                 "getsockname");
  int dialed = ::socket(AF_INET, SOCK_STREAM, 0);
  RINGX_SYSCHECK(dialed, "socket");
  RINGX_SYSCHECK(::connect(dialed, reinterpret_cast<sockaddr*>(&address), length), "connect");
  int accepted = ::accept(listener, nullptr, nullptr);
  RINGX_SYSCHECK(accepted, "accept");
  ::close(listener);
  return {dialed, accepted};
}

constexpr size_t kBatch = 64 << 10;

// How many bytes a's first progress() sends while b sends a little back, with a's batch.
struct FirstProgress {
  uint64_t sent = 0;
  uint64_t received = 0;
};
FirstProgress firstProgress(size_t batch) {
  auto [dialed, accepted] = loopbackConnection();
  transport::tcp::TcpPair a(1, dialed, batch), b(0, accepted, batch);
  std::vector<char> big(8 << 20, 'a'), small(4096, 'b');
  std::vector<char> intoA(small.size()), intoB(big.size());
  a.postSend(big.data(), big.size());
  a.postRecv(intoA.data(), intoA.size());
  b.postSend(small.data(), small.size());
  b.postRecv(intoB.data(), intoB.size());
  b.progress();
  // Loopback delivers at once, unless the kernel defers it (a busy machine): wait until b's
  // 4 KiB wait in a's socket, so that what a's first progress() does depends on its batch alone.
  pollfd readable{a.pollFd(), POLLIN, 0};
  EXPECT_EQ(::poll(&readable, 1, 10000), 1);
  a.progress();
  FirstProgress first{a.sendCompleted(), a.recvCompleted()};
  while (a.hasPending() || b.hasPending()) {
    a.progress();
    b.progress();
  }
  EXPECT_EQ(intoB, big);
  EXPECT_EQ(intoA, small);
  return first;
}

TEST(TcpPair, OneProgressSendsAtMostItsBatchAndThenReceives) {
  FirstProgress first = firstProgress(kBatch);
  EXPECT_GT(first.sent, 0u);
  EXPECT_LE(first.sent, kBatch);
  EXPECT_EQ(first.received, 4096u);  // in the same call: the batch did not end the call's work
}

TEST(TcpPair, BatchZeroSendsUntilTheSocketIsFull) {
  // RINGX_TCP_SEND_BATCH_BYTES=0, the behaviour before issue 34: the first call fills the peer's
  // window, which is larger than a batch (see loopbackConnection), and then receives.
  FirstProgress first = firstProgress(0);
  EXPECT_GT(first.sent, kBatch);
  EXPECT_EQ(first.received, 4096u);
}

TEST(TcpPair, BatchesThatSplitElementsStillReduceEveryElement) {
  // Both directions busy at once, as in a ring's step, with a batch of 1000 bytes: every send
  // ends inside a float, and the reducing receive must put the halves back together.
  auto [dialed, accepted] = loopbackConnection();
  transport::tcp::TcpPair a(1, dialed, 1000), b(0, accepted, 1000);
  const size_t count = 1 << 20;
  std::vector<float> fromA(count), fromB(count), sums(count), copies(count);
  for (size_t i = 0; i < count; ++i) {
    fromA[i] = static_cast<float>(i % 1000);
    fromB[i] = static_cast<float>(i % 7) + 0.5f;
    sums[i] = static_cast<float>(i % 3);
  }
  a.postSend(fromA.data(), count * sizeof(float));
  b.postSend(fromB.data(), count * sizeof(float));
  a.postRecvReduce(sums.data(), count, algorithms::cpuReceiveKernels(), DataType::kFloat32,
                   ReduceOp::kSum);
  b.postRecv(copies.data(), count * sizeof(float));
  while (a.hasPending() || b.hasPending()) {
    a.progress();
    b.progress();
  }
  EXPECT_EQ(copies, fromA);
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(sums[i], static_cast<float>(i % 3) + fromB[i]) << "element " << i;
  }
}

}  // namespace
}  // namespace ringx
