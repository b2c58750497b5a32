#include "backend/transport/tcp/pair.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "backend/bootstrap/sockets.h"
#include "base/error.h"

namespace ringx::transport::tcp {

TcpPair::TcpPair(int peer, int fd) : Pair(peer), fd_(fd) {
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

bool TcpPair::progressSends() {
  bool moved = false;
  while (!sends_.empty()) {
    Op& op = sends_.front();
    ssize_t n = ::send(fd_, op.data + op.done, op.size - op.done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
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
  for (int peer : everyone) pairs[peer] = std::make_unique<TcpPair>(peer, sockets[peer].fd);
  return pairs;
}

}  // namespace ringx::transport::tcp
