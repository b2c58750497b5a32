#include "backend/transport/mesh.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>

#include "backend/common/error.h"
#include "backend/transport/doorbell.h"
#include "backend/transport/host_identity.h"
#include "backend/transport/shm/pair.h"
#include "backend/transport/shm/segment.h"
#include "backend/transport/tcp/mesh.h"
#include "backend/transport/tcp/pair.h"

namespace ringx::transport {
namespace {

// The first message of each end of a collective edge.
struct Introduction {
  char magic[4];
  uint8_t sharedMemory;  // this end can and may use shared memory
  uint8_t reserved[3];
  uint64_t hostHash;  // of the sender's host identity
};

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

uint64_t hashOf(const std::string& text) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Sends `message` and receives the peer's of the same type (both ends write first, so neither
// waits for the other).
template <typename T>
void exchange(int fd, const T& message, T* theirs, int peer, Deadline deadline) {
  if (!tcp::writeFull(fd, &message, sizeof(T)) || !tcp::readFull(fd, theirs, sizeof(T), deadline)) {
    RINGX_THROW_PEER(peer, "rank ", peer,
                     " dropped the connection or did not answer while setting it up");
  }
}

}  // namespace

MeshOptions meshOptionsFromEnvironment() {
  MeshOptions options;
  if (const char* transport = std::getenv("RINGX_TRANSPORT"); transport && *transport) {
    std::string value = transport;
    RINGX_CHECK(value == "tcp" || value == "auto", "ringx: RINGX_TRANSPORT='", value,
                "' is not understood; use 'auto' (shared memory within a host, TCP between "
                "hosts) or 'tcp'");
    options.sharedMemory = value == "auto";
  }
  if (const char* bytes = std::getenv("RINGX_SHM_BYTES"); bytes && *bytes) {
    char* end = nullptr;
    unsigned long long value = std::strtoull(bytes, &end, 10);
    RINGX_CHECK(end && *end == '\0' && value >= 4096, "ringx: RINGX_SHM_BYTES='", bytes,
                "' must be a byte count of at least 4096");
    options.shmCapacity = static_cast<size_t>(value);
  }
  return options;
}

// Falling back to TCP is the right thing to do, but silently it would cost users their
// intra-host speed without a word: say it once per process.
static void warnNoSharedMemory(const char* why) {
  static std::once_flag once;
  std::call_once(once, [&] {
    std::fprintf(
        stderr, "ringx: no shared memory, so ranks on this host talk over TCP (slower): %s\n", why);
  });
}

PairMaker::PairMaker(int rank, std::string token, std::string channel, MeshOptions options)
    : rank_(rank),
      token_(std::move(token)),
      channel_(std::move(channel)),
      options_(options),
      host_(hostIdentity()) {}

PairMaker::~PairMaker() = default;

std::shared_ptr<shm::Segment> PairMaker::doorbell() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (triedDoorbell_) return bell_;
  triedDoorbell_ = true;
  shm::removeStaleSegments();
  try {
    // Without a name: peers open it through /proc while this process lives (segment.h).
    bell_ = std::make_shared<shm::Segment>(shm::Segment::createUnnamed(sizeof(Doorbell)));
    new (bell_->data()) Doorbell();
  } catch (const std::exception& e) {
    bell_.reset();  // no usable shared memory here: TCP for everyone
    warnNoSharedMemory(e.what());
  }
  return bell_;
}

std::unique_ptr<Pair> PairMaker::makePair(int peer, int fd, Deadline deadline) {
  // Closes the socket if anything below throws; released into the pair at the end.
  struct Owned {
    int fd;
    ~Owned() {
      if (fd >= 0) ::close(fd);
    }
  } socket{fd};
  Introduction mine{};
  std::memcpy(mine.magic, "RINT", 4);
  mine.sharedMemory = options_.sharedMemory;
  mine.hostHash = hashOf(host_);
  Introduction theirs{};
  exchange(fd, mine, &theirs, peer, deadline);
  if (std::memcmp(theirs.magic, "RINT", 4) != 0) {
    RINGX_THROW_PEER(peer, "rank ", peer, " sent no valid introduction on a new connection");
  }
  const bool sameHost =
      mine.sharedMemory && theirs.sharedMemory && mine.hostHash == theirs.hostHash;
  if (!sameHost) return std::make_unique<tcp::TcpPair>(peer, std::exchange(socket.fd, -1));

  // Offer shared memory: our doorbell, and the pair segment when we are the lower rank.
  std::shared_ptr<shm::Segment> bell = doorbell();
  shm::Segment created;
  ShmOffer offer{};
  std::memcpy(offer.magic, "RSHM", 4);
  offer.ok = bell != nullptr;
  offer.capacity = options_.shmCapacity;
  if (bell) copyName(offer.bell, bell->procPath());
  if (bell && rank_ < peer) {
    try {
      created =
          shm::Segment::create(shm::segmentName(token_, strCat(channel_, "-", rank_, "-", peer)),
                               shm::pairSegmentBytes(options_.shmCapacity));
      copyName(offer.pair, created.name());
    } catch (const std::exception& e) {
      offer.ok = 0;
      warnNoSharedMemory(e.what());
    }
  }
  ShmOffer their{};
  exchange(fd, offer, &their, peer, deadline);
  if (std::memcmp(their.magic, "RSHM", 4) != 0) {
    RINGX_THROW_PEER(peer, "rank ", peer, " did not complete shared-memory set-up");
  }
  // Map what the peer offered, and tell it whether that worked.
  const size_t capacity = rank_ < peer ? options_.shmCapacity : their.capacity;
  bool ok = bell && their.ok;
  shm::Segment peerBell, opened;
  if (ok) {
    try {
      peerBell = shm::Segment::openPath(their.bell, sizeof(Doorbell));
      if (peer < rank_) opened = shm::Segment::open(their.pair, shm::pairSegmentBytes(capacity));
    } catch (const std::exception& e) {
      ok = false;
      warnNoSharedMemory(e.what());
    }
  }
  char mapped = ok ? 'M' : 'X', theirMapped = 0;
  exchange(fd, mapped, &theirMapped, peer, deadline);
  // Both ends have mapped the pair segment (or given up): its name can go.
  created.unlink();
  if (mapped != 'M' || theirMapped != 'M') {
    return std::make_unique<tcp::TcpPair>(peer, std::exchange(socket.fd, -1));
  }
  shm::Segment segment = rank_ < peer ? std::move(created) : std::move(opened);
  return std::make_unique<shm::ShmPair>(peer, rank_ < peer, std::exchange(socket.fd, -1),
                                        std::move(segment), capacity, bell, std::move(peerBell));
}

}  // namespace ringx::transport
