// Picks, per edge, the transport for a collective connection: shared memory when both ends are
// on one host, TCP otherwise. A job spanning hosts therefore uses both at once, and the
// algorithms cannot tell the difference.
//
// An edge starts as an authenticated TCP socket (made on demand, see connector.h). Both ends then
// exchange an introduction (host identity, whether they can do shared memory); when they share a
// host, the lower rank creates the pair's segment, both map it and each other's doorbell, and
// the socket stays beside the shared memory to notice a dead peer (shm/pair.h). Locality comes
// from host identity (host_identity.h) and from both ends being able to create and map shared
// memory, never from LOCAL_WORLD_SIZE.
//
// A rank's doorbell (one per group, shared by its shared-memory pairs) has no name: a same-host
// peer may connect at any time, so it maps the doorbell through this process's /proc entry
// (shm/segment.h). Pair segments lose their names as soon as both ends mapped them, so nothing
// stays in /dev/shm however a process ends.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "backend/transport/context.h"

namespace ringx::transport {

namespace shm {
class Segment;
}

struct MeshOptions {
  // Use shared memory for same-host peers (RINGX_TRANSPORT=tcp turns it off).
  bool sharedMemory = true;
  // Bytes per direction of each shared-memory pair (RINGX_SHM_BYTES).
  size_t shmCapacity = 4 << 20;
};

MeshOptions meshOptionsFromEnvironment();

// Makes one rank's collective pairs of one group, each over a socket that is already
// authenticated; owns the rank's doorbell. Thread-safe: the connector's listener and the
// collective thread make pairs at the same time.
class PairMaker {
 public:
  PairMaker(int rank, std::string token, std::string channel, MeshOptions options);
  ~PairMaker();
  PairMaker(const PairMaker&) = delete;
  PairMaker& operator=(const PairMaker&) = delete;

  // Takes ownership of `fd` (also on error). Both ends call this at the same time.
  std::unique_ptr<Pair> makePair(int peer, int fd, Deadline deadline);

 private:
  // This rank's doorbell, created at the first shared-memory edge; null when shared memory
  // cannot be had here.
  std::shared_ptr<shm::Segment> doorbell();

  const int rank_;
  const std::string token_;
  const std::string channel_;
  const MeshOptions options_;
  const std::string host_;
  std::mutex mutex_;
  bool triedDoorbell_ = false;
  std::shared_ptr<shm::Segment> bell_;
};

}  // namespace ringx::transport
