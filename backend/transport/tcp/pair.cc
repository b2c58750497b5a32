#include "backend/transport/tcp/pair.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "backend/bootstrap/sockets.h"
#include "backend/transport/registry.h"
#include "base/error.h"

namespace ringx::transport::tcp {

TcpPair::TcpPair(int peer, int fd, size_t sendBatchBytes)
    : Pair(peer), fd_(fd), sendBatchBytes_(sendBatchBytes) {
  int flags = ::fcntl(fd_, F_GETFL, 0);
  RINGX_SYSCHECK(::fcntl(fd_, F_SETFL, flags | O_NONBLOCK), "fcntl(O_NONBLOCK)");
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

TcpPair::~TcpPair() {
  if (fd_ >= 0) ::close(fd_);
}

void TcpPair::shutdown() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

bool TcpPair::progress() {
  bool moved = progressSends();
  moved |= progressRecvs();
  return moved;
}

// Sends at most sendBatchBytes_, then lets progress() receive. Sending until the socket is full
// starves the other direction while both are busy (every step of a ring at 2 ranks): the peer's
// receive window grows over a long transfer (tcp_rmem allows 32 MiB), so one burst could push
// megabytes while what the peer sent us waited, until the peer's own sends stalled on our full
// window and it slept. Between two hosts on 2 cores (bench/tcp_line_rate.py) the ranks' cores were
// busy 92-97% of an allreduce at 16 MiB but 77-82% at 256 MiB; with 256 KiB batches, 89-96% at
// every size. In runs alternating both (5-10 of each, medians), ringx / iperf3 --bidir went from
// 0.85-1.04 to 1.21-1.38 at 16 MiB, 0.74-0.98 to 1.21-1.31 at 64 MiB and 0.75-0.91 to 1.15-1.42 at
// 256 MiB; 4 MiB did not lose (0.84-1.33 to 1.04-1.31). 1 MiB was lower in all five such runs
// (1.13-1.24 to 0.89-1.12), because unbatched jobs now and then ran 2-3x faster than the link,
// which batched ones rarely did; a 1 MiB batch, which splits none of a 1 MiB allreduce's sends, did
// the same there (1.33 to 1.13), and it is not understood. 128 KiB batches were worse below 64 MiB;
// 512 KiB and 1 MiB gained less from 16 MiB up; bounding receives too, or 1-4 MiB socket buffers,
// did not help.
bool TcpPair::progressSends() {
  bool moved = false;
  size_t budget = sendBatchBytes_ > 0 ? sendBatchBytes_ : SIZE_MAX;
  while (!sends_.empty() && budget > 0) {
    Op& op = sends_.front();
    const size_t want = std::min(op.size - op.done, budget);
    ssize_t n = ::send(fd_, op.data + op.done, want, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      budget -= static_cast<size_t>(n);
      advanceSend(static_cast<size_t>(n));
      moved = true;
      continue;
    }
    if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n == -1 && errno == EINTR) continue;
    RINGX_THROW_PEER(peer(), "connection to rank ", peer(), " broke while sending (",
                     std::strerror(errno), "); rank ", peer(), " probably exited or crashed");
  }
  return moved;
}

bool TcpPair::progressRecvs() {
  bool moved = false;
  while (!recvs_.empty()) {
    Op& op = recvs_.front();
    if (op.reduce && scratch_.empty()) scratch_.resize(256 << 10);
    // A reducing receive lands in scratch first; whole elements are then
    // combined into place and a split element waits there for its rest.
    char* into = op.reduce ? scratch_.data() + scratchHeld_ : op.data + op.done;
    size_t want = op.size - op.done - scratchHeld_;
    if (op.reduce) want = std::min(want, scratch_.size() - scratchHeld_);
    ssize_t n = ::recv(fd_, into, want, MSG_DONTWAIT);
    if (n > 0) {
      moved = true;
      if (!op.reduce) {
        advanceRecv(static_cast<size_t>(n));
        continue;
      }
      const size_t held = scratchHeld_ + static_cast<size_t>(n);
      const size_t whole = held - held % op.elementSize;
      scratchHeld_ = held - whole;
      if (whole > 0) deliver(scratch_.data(), whole);
      std::memmove(scratch_.data(), scratch_.data() + whole, scratchHeld_);
      continue;
    }
    if (n == 0) {
      RINGX_THROW_PEER(peer(), "rank ", peer(),
                       " closed its connection (the process exited, crashed or aborted)");
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    if (errno == EINTR) continue;
    RINGX_THROW_PEER(peer(), "connection to rank ", peer(), " broke while receiving (",
                     std::strerror(errno), "); rank ", peer(), " probably exited or crashed");
  }
  return moved;
}

std::vector<std::unique_ptr<Pair>> connectMesh(Store& store, int rank, int size,
                                               const std::string& channel, const std::string& token,
                                               Deadline deadline) {
  std::vector<int> everyone;
  for (int peer = 0; peer < size; ++peer) {
    if (peer != rank) everyone.push_back(peer);
  }
  std::vector<std::unique_ptr<Pair>> pairs(size);
  auto sockets = bootstrap::connectSockets(store, rank, size, channel, token, deadline, everyone);
  for (int peer : everyone) {
    pairs[peer] = std::make_unique<TcpPair>(peer, sockets[peer].fd, kTcpSendBatchBytes);
  }
  return pairs;
}

}  // namespace ringx::transport::tcp
