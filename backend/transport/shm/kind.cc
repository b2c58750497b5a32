// The shared-memory kind: joins two ranks of one host that both can map shared memory.
//
// Both ends have said in their Introductions whether they may use shared memory and which host
// they are on (host identity, bootstrap/host_identity.h, never LOCAL_WORLD_SIZE). Over the
// edge's socket they then offer what they made: the lower rank creates the pair's segment, both
// map it and each other's doorbell, and each tells the other whether that worked. Any failure
// at either end returns null at both, and the edge goes to TCP; the socket stays beside the
// shared memory to notice a dead peer (pair.h).
//
// A rank's doorbell (one per group, shared by its shared-memory pairs) has no name: a same-host
// peer may connect at any time, so it maps the doorbell through this process's /proc entry
// (segment.h). Pair segments lose their names as soon as both ends mapped them, so nothing stays
// in /dev/shm however a process ends.
//
// Where the host runs more of the group's ranks than it has cores, a pair costs less to make.
// Where the cores are the ranks' own, a pair's rings hold 4 MiB each way and its segment is
// mapped whole at set-up, so that the first pass through the rings takes no page fault per
// page. Oversubscribed, the rings hold 1 MiB each way (unless RINGX_SHM_BYTES says otherwise)
// and each end maps a page at its first touch. Reserving 8 MiB in /dev/shm (posix_fallocate)
// and mapping it whole cost ~7 ms of CPU per pair (both ends), and 32 ranks on 2 cores, each
// making the pairs of a recursive doubling for their first collective, waited ~0.2 s for that;
// and there a sender cannot run far ahead of a receiver that waits for a core anyway (3 ranks
// on 2 cores moved 16 and 64 MiB allreduces as fast through 1 MiB rings as through 4 MiB).
// The pages are reserved in /dev/shm either way, so a full /dev/shm is an error at set-up.
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <utility>

#include "backend/transport/core_contention.h"
#include "backend/transport/doorbell.h"
#include "backend/transport/registry.h"
#include "backend/transport/shm/pair.h"
#include "backend/transport/shm/segment.h"
#include "base/error.h"

namespace ringx::transport::shm {
namespace {

// Sent by each end of a same-host edge over its TCP socket.
struct ShmOffer {
  char magic[4];
  uint8_t ok;  // this end can do shared memory
  uint8_t reserved[3];
  uint64_t capacity;  // bytes per direction (the lower rank's value is used)
  char bell[96];      // the sender's doorbell segment
  char pair[96];      // the pair segment (sent by the lower rank only)
};

void copyName(char (&to)[96], const std::string& from) {
  std::memset(to, 0, sizeof(to));
  std::memcpy(to, from.data(), std::min(from.size(), sizeof(to) - 1));
}

// Falling back to TCP is the right thing to do, but silently it would cost users their
// intra-host speed without a word: say it once per process.
void warnNoSharedMemory(const char* why) {
  static std::once_flag once;
  std::call_once(once, [&] {
    std::fprintf(
        stderr, "ringx: no shared memory, so ranks on this host talk over TCP (slower): %s\n", why);
  });
}

class ShmKind final : public TransportKind {
 public:
  ShmKind(int rank, std::string token, std::string channel, const MeshOptions& options)
      : rank_(rank), token_(std::move(token)), channel_(std::move(channel)), options_(options) {}

  const char* name() const override { return "shm"; }

  bool canConnect(const Introduction& mine, const Introduction& theirs) const override {
    return mine.sharedMemory && theirs.sharedMemory && mine.hostHash == theirs.hostHash;
  }

  std::unique_ptr<Pair> connect(Edge& edge) override;

  void setLocalRanks(int localRanks) override {
    oversubscribed_.store(localRanks > cores_, std::memory_order_relaxed);
  }

 private:
  // This rank's doorbell, created at the first shared-memory edge; null when shared memory
  // cannot be had here. Thread-safe: the connector's listener and the collective thread make
  // pairs at the same time.
  std::shared_ptr<Segment> doorbell();

  const int rank_;
  const std::string token_;
  const std::string channel_;
  const MeshOptions options_;
  const int cores_ = usableCores();
  // More of the group's ranks on this host than cores: smaller rings, mapped as touched (see
  // the top of this file).
  std::atomic<bool> oversubscribed_{false};
  std::mutex mutex_;
  bool triedDoorbell_ = false;
  std::shared_ptr<Segment> bell_;
};

std::shared_ptr<Segment> ShmKind::doorbell() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (triedDoorbell_) return bell_;
  triedDoorbell_ = true;
  removeStaleSegments();
  try {
    // Without a name: peers open it through /proc while this process lives (segment.h).
    bell_ = std::make_shared<Segment>(Segment::createUnnamed(sizeof(Doorbell)));
    new (bell_->data()) Doorbell();
  } catch (const std::exception& e) {
    bell_.reset();  // no usable shared memory here: TCP for everyone
    warnNoSharedMemory(e.what());
  }
  return bell_;
}

std::unique_ptr<Pair> ShmKind::connect(Edge& edge) {
  // Offer shared memory: our doorbell, and the pair segment when we are the lower rank.
  std::shared_ptr<Segment> bell = doorbell();
  const bool oversubscribed = oversubscribed_.load(std::memory_order_relaxed);
  const Segment::Mapping mapping =
      oversubscribed ? Segment::Mapping::kOnTouch : Segment::Mapping::kNow;
  const size_t myCapacity = options_.shmCapacity > 0 ? options_.shmCapacity
                            : oversubscribed         ? kShmCapacityOversubscribed
                                                     : kShmCapacity;
  Segment created;
  ShmOffer offer{};
  std::memcpy(offer.magic, "RSHM", 4);
  offer.ok = bell != nullptr;
  offer.capacity = myCapacity;
  if (bell) copyName(offer.bell, bell->procPath());
  if (bell && rank_ < edge.peer) {
    try {
      created = Segment::create(segmentName(token_, strCat(channel_, "-", rank_, "-", edge.peer)),
                                pairSegmentBytes(myCapacity), mapping);
      copyName(offer.pair, created.name());
    } catch (const std::exception& e) {
      offer.ok = 0;
      warnNoSharedMemory(e.what());
    }
  }
  ShmOffer their{};
  exchange(edge, offer, &their);
  if (std::memcmp(their.magic, "RSHM", 4) != 0) {
    RINGX_THROW_PEER(edge.peer, "rank ", edge.peer, " did not complete shared-memory set-up");
  }
  // Map what the peer offered, and tell it whether that worked.
  const size_t capacity = rank_ < edge.peer ? myCapacity : their.capacity;
  bool ok = bell && their.ok;
  Segment peerBell, opened;
  if (ok) {
    try {
      peerBell = Segment::openPath(their.bell, sizeof(Doorbell));
      if (edge.peer < rank_) {
        opened = Segment::open(their.pair, pairSegmentBytes(capacity), mapping);
      }
    } catch (const std::exception& e) {
      ok = false;
      warnNoSharedMemory(e.what());
    }
  }
  char mapped = ok ? 'M' : 'X', theirMapped = 0;
  exchange(edge, mapped, &theirMapped);
  // Both ends have mapped the pair segment (or given up): its name can go.
  created.unlink();
  if (mapped != 'M' || theirMapped != 'M') return nullptr;  // TCP, next in line
  Segment segment = rank_ < edge.peer ? std::move(created) : std::move(opened);
  return std::make_unique<ShmPair>(edge.peer, rank_ < edge.peer, std::exchange(edge.fd, -1),
                                   std::move(segment), capacity, bell, std::move(peerBell));
}

}  // namespace
}  // namespace ringx::transport::shm

namespace ringx::transport {

std::unique_ptr<TransportKind> makeShmKind(int rank, const std::string& token,
                                           const std::string& channel, const MeshOptions& options) {
  return std::make_unique<shm::ShmKind>(rank, token, channel, options);
}

}  // namespace ringx::transport
