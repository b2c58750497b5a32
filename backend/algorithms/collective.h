// One collective call as seen by the algorithms: the peers' pairs, the deadline,
// and the handshake that catches mismatched calls.
//
// Every collective opens with a small header on each connection it uses, sent
// ahead of the data and checked before any data is trusted: sequence number,
// kind, dtype, reduce op, root, and the byte count the sender is about to send.
// When two ranks disagree (one calls allreduce on 4 KiB, the other on 8 KiB, or
// one has skipped a call) both sides raise a MismatchError that shows both
// calls, instead of reducing garbage or hanging.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/algorithms/workspace.h"
#include "backend/transport/context.h"
#include "base/error.h"
#include "base/types.h"

namespace ringx::algorithms {

enum class CollectiveKind : uint8_t {
  kAllreduce,
  kBroadcast,
  kReduce,
  kAllgather,
  kReduceScatter,
  kGather,
  kScatter,
  kAlltoall,
  kBarrier,
};
const char* collectiveName(CollectiveKind kind);

// Two ranks called different collectives, or the same one with other arguments.
class MismatchError : public Error {
 public:
  using Error::Error;
};

// What this rank believes the call is; compared field by field with each peer.
struct CallSignature {
  CollectiveKind kind = CollectiveKind::kBarrier;
  uint64_t seq = 0;
  DataType dtype = DataType::kUInt8;
  ReduceOp op = ReduceOp::kSum;
  int32_t root = -1;
};

// The header on the wire (fixed layout: it is part of the protocol).
struct CollectiveHeader {
  uint32_t magic;
  uint8_t kind;
  uint8_t dtype;
  uint8_t op;
  uint8_t version;
  int32_t root;
  uint32_t reserved;
  uint64_t seq;
  uint64_t bytes;  // what the sender will send to the receiver in this call
};
static_assert(sizeof(CollectiveHeader) == 32, "CollectiveHeader is part of the wire format");

// The header that announces `bytes` to a peer in `call`.
CollectiveHeader collectiveHeader(const CallSignature& call, uint64_t bytes);

// Checks the header `peer` sent (any 32 bytes may arrive) against the one this rank expects
// from it; throws MismatchError naming both calls, or saying the bytes are not a header.
void checkPeerHeader(const CollectiveHeader& theirs, const CollectiveHeader& ours, int rank,
                     int peer);

// Views: an algorithm that works on part of the group (the ranks of one host, one leader per
// host) runs an existing algorithm on a view, a Collective over `members` of its parent, in
// which rank(), size(), hosts() and every peer argument are numbered within the view. A view
// shares its parent's call, deadline and scratch, and has its own handshake: each view sends
// its own headers, so that the phases of one call (say, a reduce and then a broadcast between
// the same two ranks) each check theirs in turn. The peers a view talks to are recorded in the
// outermost Collective, for traces.
class Collective {
 public:
  // `workspace` (optional) lends scratch memory that outlives the call.
  Collective(transport::Context& context, const CallSignature& call, Deadline deadline,
             Workspace* workspace = nullptr);
  // A view of `parent` over `members` (ranks in the parent's numbering, this rank among them);
  // member i is rank i of the view. The parent must outlive the view.
  Collective(Collective& parent, const std::vector<int>& members);
  Collective(const Collective&) = delete;
  Collective& operator=(const Collective&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // The host of every rank of this Collective (a view's ranks in its numbering).
  const bootstrap::HostLayout& hosts() const;
  const CallSignature& call() const { return call_; }
  Deadline deadline() const { return deadline_; }
  // Uninitialised scratch of `bytes` (slot 0 or 1), from the group's workspace.
  char* scratch(size_t bytes, int slot = 0) { return workspace_->get(bytes, slot); }

  // Handshake: tell `peer` how many bytes we will send it; record how many we
  // expect from it. Call both before posting data for that peer.
  void announce(int peer, uint64_t bytes);
  void expect(int peer, uint64_t bytes);

  uint64_t send(int peer, const void* data, size_t bytes);
  // `streaming`: see Pair::postRecv (for final results of large buffers).
  uint64_t recv(int peer, void* data, size_t bytes, bool streaming = false);
  // Receive `count` elements and combine them into data (see Pair::postRecvReduce).
  uint64_t recvReduce(int peer, void* data, size_t count, DataType dtype, ReduceOp op,
                      const void* accumulate = nullptr, double divideBy = 0);
  // Progress until the receive ending at `offset` (from recv()) has arrived;
  // checks `peer`'s header first.
  void waitRecv(int peer, uint64_t offset);
  void waitSend(int peer, uint64_t offset);
  // Waits for everything queued and checks every expected header.
  void finish();

  // For traces: the algorithm that ran ("ring", "chain", ...; a static string),
  // set by the algorithm, and the peers this rank exchanged headers with.
  void setAlgorithm(const char* name) { algorithm_ = name; }
  const char* algorithm() const { return algorithm_; }
  // When a device ran the collective's own work (a CUDA stream's kernel, on the host's steady
  // clock in ns), for its trace: 0, 0 when it ran on the host.
  void setDeviceSpan(int64_t beginNs, int64_t endNs) {
    deviceBeginNs_ = beginNs;
    deviceEndNs_ = endNs;
  }
  int64_t deviceBeginNs() const { return deviceBeginNs_; }
  int64_t deviceEndNs() const { return deviceEndNs_; }
  std::vector<int> peers() const;

 private:
  void checkHeader(int peer);
  // The group rank of `peer` (a rank of this Collective), and a check that it is one.
  int global(int peer) const;

  transport::Context& context_;
  Collective* const outermost_;  // this, or the Collective this view (of a view...) is part of
  std::vector<int> members_;     // group rank of each rank of a view; empty for the whole group
  int rank_;
  int size_;
  // A view's layout, made when first asked for (the algorithms run on views seldom need it).
  mutable std::unique_ptr<bootstrap::HostLayout> viewHosts_;
  Workspace ownWorkspace_;  // used when the caller lends none
  Workspace* workspace_;
  const CallSignature call_;
  const Deadline deadline_;
  // One header per peer in each direction: they must stay in place until the
  // transport has sent or filled them.
  std::vector<CollectiveHeader> outgoing_;
  std::vector<CollectiveHeader> incoming_;
  std::vector<uint64_t> expectedBytes_;
  std::vector<uint64_t> headerEnd_;  // recv offset at which the peer's header is complete
  std::vector<char> headerState_;    // 0 none, 1 expected, 2 checked
  // Outermost only, by group rank: a header went to or came from this peer (any view).
  std::vector<char> touched_;
  const char* algorithm_ = "none";
  int64_t deviceBeginNs_ = 0, deviceEndNs_ = 0;
};

}  // namespace ringx::algorithms
