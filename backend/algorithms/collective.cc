#include "backend/algorithms/collective.h"

#include "backend/algorithms/receive_kernels.h"

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
      outermost_(this),
      rank_(context.rank()),
      size_(context.size()),
      workspace_(workspace ? workspace : &ownWorkspace_),
      call_(call),
      deadline_(deadline),
      outgoing_(size_),
      incoming_(size_),
      expectedBytes_(size_, 0),
      headerEnd_(size_, 0),
      headerState_(size_, 0),
      touched_(size_, 0) {}

Collective::Collective(Collective& parent, const std::vector<int>& members)
    : context_(parent.context_),
      outermost_(parent.outermost_),
      rank_(-1),
      size_(static_cast<int>(members.size())),
      workspace_(parent.workspace_),
      call_(parent.call_),
      deadline_(parent.deadline_),
      outgoing_(size_),
      incoming_(size_),
      expectedBytes_(size_, 0),
      headerEnd_(size_, 0),
      headerState_(size_, 0) {
  members_.resize(size_);
  for (int i = 0; i < size_; ++i) {
    RINGX_ENFORCE(members[i] >= 0 && members[i] < parent.size());
    members_[i] = parent.members_.empty() ? members[i] : parent.members_[members[i]];
    if (members[i] == parent.rank()) rank_ = i;
  }
  RINGX_ENFORCE(rank_ >= 0);
}

const bootstrap::HostLayout& Collective::hosts() const {
  if (outermost_ == this) return context_.hosts();
  if (!viewHosts_) {
    std::vector<int> labels(size_);
    for (int i = 0; i < size_; ++i) labels[i] = context_.hosts().hostOf(members_[i]);
    viewHosts_ = std::make_unique<bootstrap::HostLayout>(labels);
  }
  return *viewHosts_;
}

int Collective::global(int peer) const {
  RINGX_ENFORCE(peer >= 0 && peer < size_ && peer != rank_);
  return members_.empty() ? peer : members_[peer];
}

std::vector<int> Collective::peers() const {
  std::vector<int> out;
  for (int p = 0; p < static_cast<int>(touched_.size()); ++p) {
    if (touched_[p]) out.push_back(p);
  }
  return out;
}

void Collective::announce(int peer, uint64_t bytes) {
  CollectiveHeader& h = outgoing_[peer];
  h = collectiveHeader(call_, bytes);
  const int to = global(peer);
  outermost_->touched_[to] = 1;
  context_.pair(to, deadline_).postSend(&h, sizeof(h));
}

void Collective::expect(int peer, uint64_t bytes) {
  RINGX_ENFORCE_EQ(static_cast<int>(headerState_[peer]), 0);
  const int from = global(peer);
  outermost_->touched_[from] = 1;
  expectedBytes_[peer] = bytes;
  headerEnd_[peer] =
      context_.pair(from, deadline_).postRecv(&incoming_[peer], sizeof(CollectiveHeader));
  headerState_[peer] = 1;
}

uint64_t Collective::send(int peer, const void* data, size_t bytes) {
  return context_.pair(global(peer), deadline_).postSend(data, bytes);
}

uint64_t Collective::recv(int peer, void* data, size_t bytes, bool streaming) {
  return context_.pair(global(peer), deadline_)
      .postRecv(data, bytes, streaming ? &cpuReceiveKernels() : nullptr);
}

uint64_t Collective::recvReduce(int peer, void* data, size_t count, DataType dtype, ReduceOp op,
                                const void* accumulate, double divideBy) {
  return context_.pair(global(peer), deadline_)
      .postRecvReduce(data, count, cpuReceiveKernels(), dtype, op, accumulate, divideBy);
}

void Collective::checkHeader(int peer) {
  if (headerState_[peer] != 1) return;
  const int from = global(peer);
  context_.waitRecv(from, headerEnd_[peer], deadline_);
  headerState_[peer] = 2;
  const CollectiveHeader& theirs = incoming_[peer];
  // What we expect rank `peer` to have announced to us: this call, and the bytes we expect.
  const CollectiveHeader ours = collectiveHeader(call_, expectedBytes_[peer]);
  checkPeerHeader(theirs, ours, context_.rank(), from);
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
  context_.waitRecv(global(peer), offset, deadline_);
}

void Collective::waitSend(int peer, uint64_t offset) {
  context_.waitSend(global(peer), offset, deadline_);
}

void Collective::finish() {
  for (int peer = 0; peer < size(); ++peer) {
    if (peer != rank()) checkHeader(peer);
  }
  context_.waitAll(deadline_);
}

}  // namespace ringx::algorithms
