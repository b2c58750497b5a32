#include "backend/transport/shm/pair.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "base/error.h"

namespace ringx::transport::shm {
namespace {
// Publish progress at least this often, so the peer works on one chunk while we
// fill the next (and the chunk stays in cache between the two copies).
constexpr size_t kChunkBytes = 256 << 10;
}  // namespace

ShmPair::ShmPair(int peer, bool lowerRank, int socketFd, Segment segment, size_t capacity,
                 std::shared_ptr<Segment> localBell, Segment peerBell)
    : Pair(peer),
      segment_(std::move(segment)),
      localBellSegment_(std::move(localBell)),
      peerBellSegment_(std::move(peerBell)),
      capacity_(capacity),
      out_(lowerRank ? 0 : 1),
      in_(lowerRank ? 1 : 0),
      socketFd_(socketFd),
      localBell_(static_cast<Doorbell*>(localBellSegment_->data())),
      peerBell_(static_cast<Doorbell*>(peerBellSegment_.data())) {}

ShmPair::~ShmPair() {
  if (socketFd_ >= 0) ::close(socketFd_);
}

ChannelHeader* ShmPair::channel(int index) const {
  char* base = static_cast<char*>(segment_.data()) + index * channelStrideBytes(capacity_);
  return reinterpret_cast<ChannelHeader*>(base);
}

char* ShmPair::ring(int index) const {
  return reinterpret_cast<char*>(channel(index)) + sizeof(ChannelHeader);
}

bool ShmPair::progress() {
  bool moved = false;
  ChannelHeader* out = channel(out_);
  // An end that aborts closes both channels. What it published before that is still ours to
  // take, as TCP delivers what was sent before a close: a rank that is still finishing the
  // collective the aborting rank had finished its part of must not fail it. Only what can no
  // longer complete is an error.
  const bool closed = out->closed.load(std::memory_order_acquire);
  auto shutDown = [&] {
    RINGX_THROW_PEER(peer(), "the connection to rank ", peer(),
                     " was shut down (one of the two ranks aborted the group)");
  };
  if (closed && hasPendingSend()) shutDown();
  char* outRing = ring(out_);
  while (!sends_.empty()) {
    Op& op = sends_.front();
    const uint64_t tail = out->tail.load(std::memory_order_relaxed);
    const uint64_t head = out->head.load(std::memory_order_acquire);
    const size_t space = capacity_ - static_cast<size_t>(tail - head);
    if (space == 0) break;
    const size_t n = std::min({space, op.size - op.done, kChunkBytes});
    const size_t at = static_cast<size_t>(tail % capacity_);
    const size_t first = std::min(n, capacity_ - at);
    std::memcpy(outRing + at, op.data + op.done, first);
    std::memcpy(outRing, op.data + op.done + first, n - first);
    out->tail.store(tail + n, std::memory_order_release);
    peerBell_->ring();
    advanceSend(n);
    moved = true;
  }
  ChannelHeader* in = channel(in_);
  char* inRing = ring(in_);
  while (!recvs_.empty()) {
    Op& op = recvs_.front();
    const bool reducing = op.reduce;
    const size_t element = op.elementSize;
    const uint64_t head = in->head.load(std::memory_order_relaxed);
    const uint64_t tail = in->tail.load(std::memory_order_acquire);
    const size_t available = static_cast<size_t>(tail - head);
    size_t n = std::min({available, op.size - op.done, kChunkBytes});
    if (reducing) n -= n % element;  // reduce whole elements only; the rest comes later
    if (n == 0) break;
    const size_t at = static_cast<size_t>(head % capacity_);
    const size_t first = std::min(n, capacity_ - at);
    if (!reducing || first % element == 0) {
      // Copies, or reduces straight out of the ring (no staging copy).
      deliver(inRing + at, first);
      if (n > first) deliver(inRing, n - first);
    } else {
      // One element straddles the end of the ring: combine it from a copy.
      const size_t whole = first - first % element;
      const size_t split = first - whole;
      if (whole > 0) deliver(inRing + at, whole);
      char straddler[16];
      std::memcpy(straddler, inRing + at + whole, split);
      std::memcpy(straddler + split, inRing, element - split);
      deliver(straddler, element);
      if (n > first + element - split)
        deliver(inRing + element - split, n - first - element + split);
    }
    in->head.store(head + n, std::memory_order_release);
    peerBell_->ring();
    moved = true;
  }
  if (closed && hasPendingRecv()) shutDown();  // the ring is drained: the rest never comes
  return moved;
}

void ShmPair::checkAlive() {
  pollfd pfd{socketFd_, POLLIN | POLLRDHUP, 0};
  if (::poll(&pfd, 1, 0) <= 0) return;
  if (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)) {
    // A peer that finished its part may exit with its last bytes still in the
    // ring (as TCP keeps them in the socket): take them before calling it dead.
    if (progress() || !hasPending()) return;
    RINGX_THROW_PEER(peer(), "rank ", peer(),
                     " is gone (its process exited, crashed or aborted; detected through its "
                     "connection while waiting on shared memory)");
  }
}

void ShmPair::shutdown() {
  // Both directions: the peer sees it at its next progress, whichever way it waits.
  channel(out_)->closed.store(1, std::memory_order_release);
  channel(in_)->closed.store(1, std::memory_order_release);
  peerBell_->ring();
  if (socketFd_ >= 0) ::shutdown(socketFd_, SHUT_RDWR);
}

}  // namespace ringx::transport::shm
