// Connects one rank to every other rank of a group and picks, per edge, the
// transport for it: shared memory when both ends are on one host, TCP otherwise.
// A job spanning hosts therefore uses both at once, and the algorithms cannot
// tell the difference.
//
// Locality comes from facts each rank publishes through the Store (host
// identity: hostname + boot id, see host_identity.h) and from both ends being
// able to create and map shared memory, never from LOCAL_WORLD_SIZE.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/store/store.h"
#include "backend/transport/context.h"

namespace ringx::transport {

struct MeshOptions {
  // Use shared memory for same-host peers (RINGX_TRANSPORT=tcp turns it off).
  bool sharedMemory = true;
  // Bytes per direction of each shared-memory pair (RINGX_SHM_BYTES).
  size_t shmCapacity = 4 << 20;
};

MeshOptions meshOptionsFromEnvironment();

// Returns pairs[peer] for every peer (pairs[rank] is null).
std::vector<std::unique_ptr<Pair>> connectMesh(Store& store, int rank, int size,
                                               const std::string& channel, const std::string& token,
                                               Deadline deadline, const MeshOptions& options);

}  // namespace ringx::transport
