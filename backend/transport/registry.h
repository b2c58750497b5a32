// The transport kinds, and which one joins an edge.
//
// As NCCL's transport list (ncclTransport: canConnect, then setup and connect, in priority order),
// each kind says whether it can join the two ends of an edge from what both ends said of
// themselves (their Introductions), and joins them. The kinds are tried in priority order; the
// first that can and does wins. Shared memory comes first, TCP last: it can join any two ranks,
// so every edge ends with a pair. A new kind (CUDA IPC next) is one more folder beside tcp/ and
// shm/ with the same files (pair.h for its Pair, kind.cc for its TransportKind) and one more
// line in registry.cc.
//
// Every edge starts as an authenticated socket (bootstrap/connector.h); the Introductions and
// every kind's own set-up messages travel over it, and the kind that joins the edge takes it
// (TCP sends its data there; shared memory keeps it to notice a dead peer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/transport/pair.h"
#include "base/deadline.h"

namespace ringx::transport {

constexpr size_t kTcpSendBatchBytes = 256 << 10;

struct MeshOptions {
  // Use shared memory for same-host peers (RINGX_TRANSPORT=tcp turns it off).
  bool sharedMemory = true;
  // Bytes per direction of each shared-memory pair (RINGX_SHM_BYTES); 0: kShmCapacity, or
  // kShmCapacityOversubscribed where the host runs more of the group's ranks than it has cores
  // (shm/kind.cc says why).
  size_t shmCapacity = 0;
  // Bytes one progress() of a TCP pair sends at most before it turns to receiving
  // (RINGX_TCP_SEND_BATCH_BYTES); 0: it sends until the socket is full (tcp/pair.cc says why not).
  size_t tcpSendBatchBytes = kTcpSendBatchBytes;
};
constexpr size_t kShmCapacity = 4 << 20;
constexpr size_t kShmCapacityOversubscribed = 1 << 20;
MeshOptions meshOptionsFromEnvironment();

// The first message of each end of a collective edge: what the kinds decide from.
struct Introduction {
  char magic[4];
  uint8_t sharedMemory;  // this end can and may use shared memory
  uint8_t reserved[3];
  uint64_t hostHash;  // of the sender's host identity (bootstrap/host_identity.h)
};

// One edge being joined, as each kind sees it.
struct Edge {
  int peer = 0;
  int fd = -1;  // the edge's socket; the kind that makes the pair takes it (leaves -1)
  Deadline deadline;
  Introduction mine{};
  Introduction theirs{};
};

// Sends `message` over the edge's socket and receives the peer's of the same type (both ends
// write first, so neither waits for the other). Throws PeerError naming the peer.
void exchangeBytes(const Edge& edge, const void* mine, void* theirs, size_t bytes);
template <typename T>
void exchange(const Edge& edge, const T& mine, T* theirs) {
  exchangeBytes(edge, &mine, theirs, sizeof(T));
}

class TransportKind {
 public:
  virtual ~TransportKind() = default;
  // "shm", "tcp": as Pair::transportName() says it.
  virtual const char* name() const = 0;
  // Whether this kind can join the edge. Both ends decide from the same two Introductions, so
  // they agree.
  virtual bool canConnect(const Introduction& mine, const Introduction& theirs) const = 0;
  // Joins the edge (both ends call it at the same time), or returns null when its set-up failed
  // at either end (both ends learn that alike): the next kind is then tried on the same socket.
  virtual std::unique_ptr<Pair> connect(Edge& edge) = 0;
  // How many of the group's ranks run on this host, this one included, as far as the group
  // knows yet (mesh.h's PairMaker::setLocalRanks). A kind may size the work it does at set-up
  // by it; called from any thread, also while pairs are being made.
  virtual void setLocalRanks(int localRanks) { (void)localRanks; }
};

// One group's kinds for `rank`, in priority order. `channel` and `token` name what the kinds
// create (shared-memory segments).
std::vector<std::unique_ptr<TransportKind>> makeTransportKinds(int rank, const std::string& token,
                                                               const std::string& channel,
                                                               const MeshOptions& options);

// Each kind's maker, defined in its own folder (kind.cc); registry.cc lists them in order.
std::unique_ptr<TransportKind> makeShmKind(int rank, const std::string& token,
                                           const std::string& channel, const MeshOptions& options);
std::unique_ptr<TransportKind> makeTcpKind(const MeshOptions& options);

// The pair point-to-point traffic (send/recv) uses: TCP over the edge's socket itself, since a
// message may be of any size and its peer's buffer is not known ahead (tcp/kind.cc).
std::unique_ptr<Pair> pointToPointPair(int peer, int fd, const MeshOptions& options);

}  // namespace ringx::transport
