// Shared-memory implementation of transport::Pair, for two ranks on one host.
//
// The pair shares one segment holding two byte rings, one per direction. The
// sender copies into its outgoing ring and publishes the new tail; the receiver
// copies out and publishes the new head (release/acquire on the counters, which
// sit on cache lines of their own). Both sides ring the other's doorbell after
// moving bytes, so a waiting rank sleeps on a futex instead of spinning. Copies
// go in chunks that fit in cache, and each chunk is published at once, so the
// receiver drains one chunk while the sender fills the next.
//
// The TCP socket that set the pair up stays open beside it: shared memory gives
// no signal when a process dies, but the socket does (checkAlive), and shutting
// it down is how an aborting rank tells its peer.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "backend/transport/doorbell.h"
#include "backend/transport/pair.h"
#include "backend/transport/shm/segment.h"

namespace ringx::transport::shm {

// The shared layout: two channels, each a header followed by `capacity` bytes.
struct alignas(64) ChannelHeader {
  alignas(64) std::atomic<uint64_t> tail{0};    // bytes written by the sender
  alignas(64) std::atomic<uint64_t> head{0};    // bytes consumed by the receiver
  alignas(64) std::atomic<uint32_t> closed{0};  // set by an end that aborted
};
static_assert(sizeof(ChannelHeader) == 192, "ChannelHeader is shared between processes");

// One channel: its header, then its ring, padded so that the next channel's header (atomics
// that both processes use) is aligned whatever the ring's capacity.
inline size_t channelStrideBytes(size_t capacity) {
  constexpr size_t align = alignof(ChannelHeader);
  return sizeof(ChannelHeader) + (capacity + align - 1) / align * align;
}
inline size_t pairSegmentBytes(size_t capacity) { return 2 * channelStrideBytes(capacity); }

class ShmPair : public Pair {
 public:
  // `segment` holds both channels (the lower rank of the pair writes channel 0).
  // `localBell` holds this rank's doorbell (shared by all its shm pairs),
  // `peerBell` the peer's.
  ShmPair(int peer, bool lowerRank, int socketFd, Segment segment, size_t capacity,
          std::shared_ptr<Segment> localBell, Segment peerBell);
  ~ShmPair() override;

  bool progress() override;
  int pollFd() const override { return -1; }
  void shutdown() override;
  Doorbell* doorbell() const override { return localBell_; }
  void checkAlive() override;
  const char* transportName() const override { return "shm"; }

 private:
  ChannelHeader* channel(int index) const;
  char* ring(int index) const;

  Segment segment_;
  std::shared_ptr<Segment> localBellSegment_;
  Segment peerBellSegment_;
  const size_t capacity_;
  const int out_;  // channel index we write
  const int in_;   // channel index we read
  int socketFd_;
  Doorbell* localBell_;
  Doorbell* peerBell_;
};

}  // namespace ringx::transport::shm
