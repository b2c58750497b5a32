#include "backend/algorithms/collective.h"

namespace ringx::algorithms {
namespace {
constexpr uint32_t kHeaderMagic = 0x52475843;  // "RGXC"
constexpr uint8_t kProtocolVersion = 1;

std::string describe(const CollectiveHeader& h) {
  auto kind = static_cast<CollectiveKind>(h.kind);
  std::string text = strCat(collectiveName(kind), " #", h.seq);
  if (kind != CollectiveKind::kBarrier) {
    text += strCat(" (", h.bytes, " bytes to send, ", dataTypeName(static_cast<DataType>(h.dtype)));
    if (kind == CollectiveKind::kAllreduce || kind == CollectiveKind::kReduce ||
        kind == CollectiveKind::kReduceScatter) {
      text += strCat(", ", reduceOpName(static_cast<ReduceOp>(h.op)));
    }
    if (h.root >= 0) text += strCat(", root ", h.root);
    text += ")";
  }
  return text;
}
}  // namespace

const char* collectiveName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllreduce:
      return "allreduce";
    case CollectiveKind::kBroadcast:
      return "broadcast";
    case CollectiveKind::kReduce:
      return "reduce";
    case CollectiveKind::kAllgather:
      return "allgather";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kGather:
      return "gather";
    case CollectiveKind::kScatter:
      return "scatter";
    case CollectiveKind::kAlltoall:
      return "alltoall";
    case CollectiveKind::kBarrier:
      return "barrier";
  }
  return "unknown";
}

Collective::Collective(transport::Context& context, const CallSignature& call, Deadline deadline,
                       Workspace* workspace)
    : context_(context),
      workspace_(workspace ? workspace : &ownWorkspace_),
      call_(call),
      deadline_(deadline),
      outgoing_(context.size()),
      incoming_(context.size()),
      expectedBytes_(context.size(), 0),
      headerEnd_(context.size(), 0),
      headerState_(context.size(), 0),
      announced_(context.size(), 0) {}

std::vector<int> Collective::peers() const {
  std::vector<int> out;
  for (int p = 0; p < size(); ++p) {
    if (announced_[p] || headerState_[p] != 0) out.push_back(p);
  }
  return out;
}

void Collective::announce(int peer, uint64_t bytes) {
  CollectiveHeader& h = outgoing_[peer];
  h = collectiveHeader(call_, bytes);
  announced_[peer] = 1;
  context_.pair(peer, deadline_).postSend(&h, sizeof(h));
}

void Collective::expect(int peer, uint64_t bytes) {
  RINGX_ENFORCE_EQ(static_cast<int>(headerState_[peer]), 0);
  expectedBytes_[peer] = bytes;
  headerEnd_[peer] =
      context_.pair(peer, deadline_).postRecv(&incoming_[peer], sizeof(CollectiveHeader));
  headerState_[peer] = 1;
}

uint64_t Collective::send(int peer, const void* data, size_t bytes) {
  return context_.pair(peer, deadline_).postSend(data, bytes);
}

uint64_t Collective::recv(int peer, void* data, size_t bytes, bool streaming) {
  return context_.pair(peer, deadline_).postRecv(data, bytes, streaming);
}

uint64_t Collective::recvReduce(int peer, void* data, size_t count, DataType dtype, ReduceOp op,
                                const void* accumulate) {
  return context_.pair(peer, deadline_).postRecvReduce(data, count, dtype, op, accumulate);
}

void Collective::checkHeader(int peer) {
  if (headerState_[peer] != 1) return;
  context_.waitRecv(peer, headerEnd_[peer], deadline_);
  headerState_[peer] = 2;
  const CollectiveHeader& theirs = incoming_[peer];
  // What we expect rank `peer` to have announced to us: this call, and the bytes we expect.
  const CollectiveHeader ours = collectiveHeader(call_, expectedBytes_[peer]);
  checkPeerHeader(theirs, ours, rank(), peer);
}

CollectiveHeader collectiveHeader(const CallSignature& call, uint64_t bytes) {
  return CollectiveHeader{kHeaderMagic,
                          static_cast<uint8_t>(call.kind),
                          static_cast<uint8_t>(call.dtype),
                          static_cast<uint8_t>(call.op),
                          kProtocolVersion,
                          call.root,
                          0,
                          call.seq,
                          bytes};
}

void checkPeerHeader(const CollectiveHeader& theirs, const CollectiveHeader& ours, int rank,
                     int peer) {
  if (theirs.magic != kHeaderMagic || theirs.version != kProtocolVersion || theirs.reserved != 0) {
    RINGX_THROW(MismatchError, "rank ", peer,
                " sent bytes that are not a ringx collective "
                "header (different ringx versions, or the stream got out of step after an "
                "earlier error)");
  }
  bool same = theirs.kind == ours.kind && theirs.seq == ours.seq && theirs.dtype == ours.dtype &&
              theirs.op == ours.op && theirs.root == ours.root && theirs.bytes == ours.bytes;
  if (!same) {
    RINGX_THROW(MismatchError, "collective mismatch between rank ", rank, " and rank ", peer,
                ": rank ", rank, " expected ", describe(ours), " but rank ", peer, " is running ",
                describe(theirs),
                ". Every rank of a group must issue the same collectives in the same order "
                "with matching sizes and dtypes");
  }
}

void Collective::waitRecv(int peer, uint64_t offset) {
  checkHeader(peer);
  context_.waitRecv(peer, offset, deadline_);
}

void Collective::waitSend(int peer, uint64_t offset) { context_.waitSend(peer, offset, deadline_); }

void Collective::finish() {
  for (int peer = 0; peer < size(); ++peer) {
    if (peer != rank()) checkHeader(peer);
  }
  context_.waitAll(deadline_);
}

}  // namespace ringx::algorithms
