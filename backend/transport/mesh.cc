#include "backend/transport/mesh.h"

#include <unistd.h>

#include <cstring>
#include <utility>

#include "backend/bootstrap/host_identity.h"
#include "base/error.h"

namespace ringx::transport {
namespace {

uint64_t hashOf(const std::string& text) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

PairMaker::PairMaker(int rank, std::string token, std::string channel, MeshOptions options)
    : rank_(rank),
      options_(options),
      hostHash_(hashOf(bootstrap::hostIdentity())),
      kinds_(makeTransportKinds(rank, token, channel, options)) {}

PairMaker::~PairMaker() = default;

std::unique_ptr<Pair> PairMaker::makePair(int peer, int fd, Deadline deadline) {
  Edge edge;
  edge.peer = peer;
  edge.fd = fd;
  edge.deadline = deadline;
  // Closes the socket if anything below throws, or no kind took it.
  struct Owned {
    Edge& edge;
    ~Owned() {
      if (edge.fd >= 0) ::close(edge.fd);
    }
  } owned{edge};
  std::memcpy(edge.mine.magic, "RINT", 4);
  edge.mine.sharedMemory = options_.sharedMemory;
  edge.mine.hostHash = hostHash_;
  exchange(edge, edge.mine, &edge.theirs);
  if (std::memcmp(edge.theirs.magic, "RINT", 4) != 0) {
    RINGX_THROW_PEER(peer, "rank ", peer, " sent no valid introduction on a new connection");
  }
  for (const auto& kind : kinds_) {
    if (!kind->canConnect(edge.mine, edge.theirs)) continue;
    if (std::unique_ptr<Pair> pair = kind->connect(edge)) return pair;
  }
  RINGX_THROW_PEER(peer, "no transport could join rank ", rank_, " and rank ", peer);
}

void PairMaker::setLocalRanks(int localRanks) {
  for (const auto& kind : kinds_) kind->setLocalRanks(localRanks);
}

}  // namespace ringx::transport
