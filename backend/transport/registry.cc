#include "backend/transport/registry.h"

#include <cstdlib>

#include "backend/bootstrap/sockets.h"
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

namespace {

// The byte count in environment variable `name`, or `fallback` where it is unset.
size_t bytesFromEnvironment(const char* name, unsigned long long minimum, size_t fallback) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  unsigned long long value = std::strtoull(text, &end, 10);
  RINGX_CHECK(end && *end == '\0' && value >= minimum, "ringx: ", name, "='", text,
              "' must be a byte count of at least ", minimum);
  return static_cast<size_t>(value);
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
  options.shmCapacity = bytesFromEnvironment("RINGX_SHM_BYTES", 4096, options.shmCapacity);
  options.tcpSendBatchBytes =
      bytesFromEnvironment("RINGX_TCP_SEND_BATCH_BYTES", 0, options.tcpSendBatchBytes);
  return options;
}

}  // namespace ringx::transport
