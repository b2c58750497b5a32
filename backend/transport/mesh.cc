#include "backend/transport/mesh.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "backend/common/error.h"
#include "backend/transport/doorbell.h"
#include "backend/transport/host_identity.h"
#include "backend/transport/shm/pair.h"
#include "backend/transport/shm/segment.h"
#include "backend/transport/tcp/mesh.h"
#include "backend/transport/tcp/pair.h"

namespace ringx::transport {
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

std::vector<std::unique_ptr<Pair>> connectMesh(Store& store, int rank, int size,
                                               const std::string& channel, const std::string& token,
                                               Deadline deadline, const MeshOptions& options) {
  std::vector<tcp::Socket> sockets =
      tcp::connectSockets(store, rank, size, channel, token, deadline);
  std::vector<std::unique_ptr<Pair>> pairs(size);
  const std::string myHost = hostIdentity();
  std::vector<int> local;
  for (int peer = 0; peer < size; ++peer) {
    if (peer != rank && options.sharedMemory && sockets[peer].host == myHost) local.push_back(peer);
  }

  // Offer shared memory to every same-host peer: our doorbell, and for peers
  // above us the pair segment we created.
  std::shared_ptr<shm::Segment> bell;
  std::vector<shm::Segment> created(size);
  if (!local.empty()) {
    shm::removeStaleSegments();
    try {
      bell = std::make_shared<shm::Segment>(
          shm::Segment::create(shm::segmentName(token, channel + "-bell"), sizeof(Doorbell)));
      new (bell->data()) Doorbell();
    } catch (const std::exception& e) {
      bell.reset();  // no usable shared memory here: TCP for everyone
      warnNoSharedMemory(e.what());
    }
  }
  for (int peer : local) {
    ShmOffer offer{};
    std::memcpy(offer.magic, "RSHM", 4);
    offer.ok = bell != nullptr;
    offer.capacity = options.shmCapacity;
    if (bell) copyName(offer.bell, bell->name());
    if (bell && rank < peer) {
      try {
        created[peer] =
            shm::Segment::create(shm::segmentName(token, strCat(channel, "-", rank, "-", peer)),
                                 shm::pairSegmentBytes(options.shmCapacity));
        copyName(offer.pair, created[peer].name());
      } catch (const std::exception& e) {
        offer.ok = 0;
        warnNoSharedMemory(e.what());
      }
    }
    if (!tcp::writeFull(sockets[peer].fd, &offer, sizeof(offer))) {
      RINGX_THROW(PeerError, "rank ", peer, " dropped the connection during shared-memory set-up");
    }
  }
  // Map what the peers offered, and tell them whether that worked.
  std::vector<shm::Segment> peerBells(size), opened(size);
  std::vector<size_t> capacity(size, 0);
  std::vector<char> mapped(size, 0);
  for (int peer : local) {
    ShmOffer theirs{};
    if (!tcp::readFull(sockets[peer].fd, &theirs, sizeof(theirs), deadline) ||
        std::memcmp(theirs.magic, "RSHM", 4) != 0) {
      RINGX_THROW(PeerError, "rank ", peer, " did not complete shared-memory set-up");
    }
    bool ok = bell && theirs.ok;
    capacity[peer] = rank < peer ? options.shmCapacity : theirs.capacity;
    if (ok) {
      try {
        peerBells[peer] = shm::Segment::open(theirs.bell, sizeof(Doorbell));
        if (peer < rank) {
          opened[peer] = shm::Segment::open(theirs.pair, shm::pairSegmentBytes(capacity[peer]));
        }
      } catch (const std::exception&) {
        ok = false;
      }
    }
    mapped[peer] = ok ? 'M' : 'X';
    if (!tcp::writeFull(sockets[peer].fd, &mapped[peer], 1)) {
      RINGX_THROW(PeerError, "rank ", peer, " dropped the connection during shared-memory set-up");
    }
  }
  for (int peer : local) {
    char theirs = 0;
    if (!tcp::readFull(sockets[peer].fd, &theirs, 1, deadline)) {
      RINGX_THROW(PeerError, "rank ", peer, " did not complete shared-memory set-up");
    }
    if (theirs != 'M') mapped[peer] = 'X';
  }
  // Everyone who needed our segments has mapped them: remove the names now, so
  // that nothing is left in /dev/shm however this process ends.
  if (bell) bell->unlink();
  for (auto& segment : created) segment.unlink();

  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    if (mapped[peer] == 'M') {
      shm::Segment segment = rank < peer ? std::move(created[peer]) : std::move(opened[peer]);
      pairs[peer] =
          std::make_unique<shm::ShmPair>(peer, rank < peer, sockets[peer].fd, std::move(segment),
                                         capacity[peer], bell, std::move(peerBells[peer]));
    } else {
      pairs[peer] = std::make_unique<tcp::TcpPair>(peer, sockets[peer].fd);
    }
  }
  return pairs;
}

}  // namespace ringx::transport
