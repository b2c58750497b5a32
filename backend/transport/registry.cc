#include "backend/transport/registry.h"

#include <cstdlib>

#include "backend/bootstrap/sockets.h"
#include "base/environment.h"
#include "base/error.h"

namespace ringx::transport {

std::vector<std::unique_ptr<TransportKind>> makeTransportKinds(int rank, const std::string& token,
                                                               const std::string& channel,
                                                               const MeshOptions& options) {
  std::vector<std::unique_ptr<TransportKind>> kinds;
  kinds.push_back(makeShmKind(rank, token, channel, options));
  kinds.push_back(makeTcpKind(options));  // last: it joins any edge
  return kinds;
}

void exchangeBytes(const Edge& edge, const void* mine, void* theirs, size_t bytes) {
  if (!bootstrap::writeFull(edge.fd, mine, bytes) ||
      !bootstrap::readFull(edge.fd, theirs, bytes, edge.deadline)) {
    RINGX_THROW_PEER(edge.peer, "rank ", edge.peer,
                     " dropped the connection or did not answer while setting it up");
  }
}

MeshOptions meshOptionsFromEnvironment() {
  MeshOptions options;
  if (const char* transport = std::getenv("RINGX_TRANSPORT"); transport && *transport) {
    std::string value = transport;
    RINGX_CHECK(value == "tcp" || value == "auto", "ringx: RINGX_TRANSPORT='", value,
                "' is not understood; use 'auto' (shared memory within a host, TCP between "
                "hosts) or 'tcp'");
    options.sharedMemory = value == "auto";
  }
  options.shmCapacity = sizeFromEnvironment("RINGX_SHM_BYTES", options.shmCapacity, 4096);
  options.tcpSendBatchBytes =
      sizeFromEnvironment("RINGX_TCP_SEND_BATCH_BYTES", options.tcpSendBatchBytes);
  return options;
}

}  // namespace ringx::transport
