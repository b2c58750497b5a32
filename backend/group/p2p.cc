#include "backend/group/p2p.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>

#include "base/error.h"

namespace ringx {
namespace {
constexpr uint32_t kFrameMagic = 0x52475850;   // "RGXP"
constexpr uint32_t kNoticeMagic = 0x52475846;  // "RGXF": a failure notice
}  // namespace

P2pFrameHeader p2pFrameHeader(int64_t tag, uint64_t bytes) {
  return P2pFrameHeader{kFrameMagic, 0, tag, bytes};
}

P2pFrameHeader failureNoticeHeader(uint64_t bytes) {
  return P2pFrameHeader{kNoticeMagic, 0, 0, bytes};
}

bool isFailureNotice(const P2pFrameHeader& header) { return header.magic == kNoticeMagic; }

std::string p2pFrameProblem(const P2pFrameHeader& header) {
  if (isFailureNotice(header) && header.reserved == 0 && header.tag == 0) {
    if (header.bytes <= kMaxFailureNoticeBytes) return "";
    return strCat("received a failure notice announcing ", header.bytes,
                  " bytes of reason, more than a notice can be (", kMaxFailureNoticeBytes, ")");
  }
  if (header.magic != kFrameMagic || header.reserved != 0) {
    return "received a malformed point-to-point frame (not ringx, or the stream got out of step)";
  }
  if (header.bytes > kMaxP2pFrameBytes) {
    return strCat("received a point-to-point frame announcing ", header.bytes,
                  " bytes, more than any message can be (", kMaxP2pFrameBytes, ")");
  }
  return "";
}

PointToPoint::PointToPoint(int rank, int size, ConnectFunction connect, NoticeCallback onNotice)
    : rank_(rank),
      size_(size),
      connect_(std::move(connect)),
      pairs_(size),
      published_(new std::atomic<transport::Pair*>[size]),
      inbound_(size),
      sendsTo_(size, 0),
      recvsFrom_(size, 0),
      onNotice_(std::move(onNotice)) {
  for (int peer = 0; peer < size; ++peer) published_[peer].store(nullptr);
  wakeFd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  RINGX_SYSCHECK(wakeFd_, "eventfd");
  thread_ = std::thread([this] { loop(); });
}

void PointToPoint::adopt(int peer, std::unique_ptr<transport::Pair> pair) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    RINGX_ENFORCE(peer >= 0 && peer < size_ && peer != rank_ && !pairs_[peer]);
    Inbound& in = inbound_[peer];
    in.headerEnd = pair->postRecv(&in.header, sizeof(FrameHeader));
    // A group that gave up already: the new connection only tells the peer so.
    if (!abortReason_.empty()) pair->shutdown();
    published_[peer].store(pair.get(), std::memory_order_release);
    pairs_[peer] = std::move(pair);
    connected_.push_back(peer);
  }
  wakeUp();
}

std::string PointToPoint::ensureConnected(int peer) {
  if (peer == kAnySource || published_[peer].load(std::memory_order_acquire)) return "";
  try {
    connect_(peer);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

PointToPoint::~PointToPoint() {
  stopping_ = true;
  wakeUp();
  thread_.join();
  abort("the process group was destroyed before this point-to-point operation finished");
  ::close(wakeFd_);
}

void PointToPoint::wakeUp() {
  uint64_t one = 1;
  ssize_t ignored = ::write(wakeFd_, &one, sizeof(one));
  (void)ignored;
}

std::string PointToPoint::describeSend(int dst, uint64_t seq, int64_t tag) const {
  return strCat("send #", seq, " to rank ", dst, " (tag ", tag, ")");
}

std::string PointToPoint::describeRecv(const PostedRecv& recv) const {
  if (recv.src == kAnySource)
    return strCat("recv #", recv.seq, " from any rank (tag ", recv.tag, ")");
  return strCat("recv #", recv.seq, " from rank ", recv.src, " (tag ", recv.tag, ")");
}

std::exception_ptr PointToPoint::failure(const std::string& op, const std::string& why) const {
  return std::make_exception_ptr(
      PeerError(strCat("ringx: ", op, " failed on rank ", rank_, " of ", size_, ": ", why)));
}

void PointToPoint::send(int dst, int64_t tag, const void* data, size_t bytes, Callback done) {
  const std::string unreachable = ensureConnected(dst);
  std::unique_lock<std::mutex> lock(mutex_);
  Inbound& peer = inbound_[dst];
  const uint64_t seq = sendsTo_[dst]++;
  if (!abortReason_.empty() || peer.dead || !unreachable.empty()) {
    std::string why = !abortReason_.empty() ? abortReason_
                      : peer.dead           ? peer.deathReason
                                            : unreachable;
    lock.unlock();
    done(failure(describeSend(dst, seq, tag), why), dst);
    return;
  }
  peer.sends.push_back(PendingSend{p2pFrameHeader(tag, bytes), 0, std::move(done), seq});
  PendingSend& pending = peer.sends.back();
  pairs_[dst]->postSend(&pending.header, sizeof(FrameHeader));
  pending.end = pairs_[dst]->postSend(data, bytes);
  lock.unlock();
  wakeUp();
}

void PointToPoint::recv(int src, int64_t tag, void* data, size_t bytes, Callback done) {
  // Connect now, so that a receive from a rank that is gone fails instead of waiting forever.
  const std::string unreachable = ensureConnected(src);
  auto posted = std::make_unique<PostedRecv>(
      PostedRecv{src, tag, static_cast<char*>(data), bytes, std::move(done), 0});
  std::unique_lock<std::mutex> lock(mutex_);
  posted->seq = src == kAnySource ? recvsFromAny_++ : recvsFrom_[src]++;
  auto fail = [&](const std::string& why) {
    lock.unlock();
    posted->done(failure(describeRecv(*posted), why), src);
  };
  if (!abortReason_.empty()) return fail(abortReason_);
  // A message that arrived whole before its sender exited is still delivered:
  // look among the unexpected ones before asking whether the sender is gone.
  for (auto it = unexpected_.begin(); it != unexpected_.end(); ++it) {
    Unexpected& message = **it;
    if (message.claimedBy || !matches(*posted, message.src, message.tag)) continue;
    if (!message.complete) {
      message.claimedBy = std::move(posted);
      return;
    }
    auto owned = std::move(*it);
    unexpected_.erase(it);
    lock.unlock();
    completeRecv(std::move(posted), owned->payload.data(), owned->payload.size(), owned->src);
    return;
  }
  if (src != kAnySource && inbound_[src].dead) return fail(inbound_[src].deathReason);
  if (!unreachable.empty()) return fail(unreachable);
  posted_.push_back(std::move(posted));
}

void PointToPoint::completeRecv(std::unique_ptr<PostedRecv> recv, const char* from, size_t bytes,
                                int src) {
  if (bytes != recv->bytes) {
    recv->done(std::make_exception_ptr(InvalidArgument(
                   strCat("ringx: ", describeRecv(*recv), " on rank ", rank_, " expected ",
                          recv->bytes, " bytes but rank ", src, " sent ", bytes,
                          " bytes; the tensors passed to send and recv must have the same size"))),
               src);
    return;
  }
  if (from != nullptr && from != recv->data) std::memcpy(recv->data, from, bytes);
  recv->done(nullptr, src);
}

void PointToPoint::handleInbound(int peer) {
  Inbound& in = inbound_[peer];
  transport::Pair& pair = *pairs_[peer];
  for (;;) {
    if (!in.inPayload) {
      if (pair.recvCompleted() < in.headerEnd) return;
      if (std::string problem = p2pFrameProblem(in.header); !problem.empty()) {
        failPeer(peer, problem);
        return;
      }
      const int64_t tag = in.header.tag;
      const size_t bytes = in.header.bytes;
      if (isFailureNotice(in.header)) {
        in.notice.assign(bytes, '\0');
        in.inPayload = true;
        in.payloadEnd = pair.postRecv(in.notice.data(), bytes);
        continue;
      }
      char* into = nullptr;
      for (auto it = posted_.begin(); it != posted_.end(); ++it) {
        if (!matches(**it, peer, tag)) continue;
        in.matched = std::move(*it);
        posted_.erase(it);
        break;
      }
      if (in.matched && in.matched->bytes != bytes) {
        completeRecv(std::move(in.matched), nullptr, bytes, peer);  // reports the mismatch
        in.discard.resize(bytes);
        into = in.discard.data();
      } else if (in.matched) {
        into = in.matched->data;
      } else {
        auto message = std::make_unique<Unexpected>();
        message->src = peer;
        message->tag = tag;
        try {
          message->payload.resize(bytes);
        } catch (const std::bad_alloc&) {
          failPeer(peer, strCat("cannot buffer a ", bytes, "-byte message with tag ", tag,
                                " that arrived before its receive: out of memory"));
          return;
        }
        into = message->payload.data();
        in.unexpected = message.get();
        unexpected_.push_back(std::move(message));
      }
      in.inPayload = true;
      in.payloadEnd = pair.postRecv(into, bytes);
    }
    if (pair.recvCompleted() < in.payloadEnd) return;
    // A whole message has arrived.
    if (isFailureNotice(in.header)) {  // the header stays until the next is posted
      if (announced_.empty()) {
        announced_ = std::move(in.notice);
        if (onNotice_) onNotice_(announced_);
      }
      in.notice.clear();
      noticeChanged_.notify_all();
    } else if (in.matched) {
      in.matched->done(nullptr, peer);
      in.matched.reset();
    } else if (in.unexpected) {
      in.unexpected->complete = true;
      if (in.unexpected->claimedBy) {
        for (auto it = unexpected_.begin(); it != unexpected_.end(); ++it) {
          if (it->get() != in.unexpected) continue;
          auto owned = std::move(*it);
          unexpected_.erase(it);
          completeRecv(std::move(owned->claimedBy), owned->payload.data(), owned->payload.size(),
                       peer);
          break;
        }
      }
      in.unexpected = nullptr;
    }
    in.discard.clear();
    in.inPayload = false;
    in.headerEnd = pair.postRecv(&in.header, sizeof(FrameHeader));
  }
}

void PointToPoint::failPeer(int peer, const std::string& reason) {
  Inbound& in = inbound_[peer];
  if (in.dead) return;
  in.dead = true;
  in.deathReason = reason;
  noticeChanged_.notify_all();  // failureAnnounced() waits for notices or for this
  auto recvError = [&](const PostedRecv& recv) {
    // A receive from any rank does not name the peer that broke: say which.
    return failure(describeRecv(recv),
                   recv.src == kAnySource ? strCat("rank ", peer, ": ", reason) : reason);
  };
  for (auto& pending : in.sends) {
    pending.done(failure(describeSend(peer, pending.seq, pending.header.tag), reason), peer);
  }
  in.sends.clear();
  if (in.matched) in.matched->done(recvError(*in.matched), peer);
  in.matched.reset();
  for (auto it = posted_.begin(); it != posted_.end();) {
    if ((*it)->src == peer) {
      (*it)->done(recvError(**it), peer);
      it = posted_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = unexpected_.begin(); it != unexpected_.end();) {
    Unexpected& message = **it;
    if (message.src == peer && !message.complete) {
      if (message.claimedBy) message.claimedBy->done(recvError(*message.claimedBy), peer);
      it = unexpected_.erase(it);
    } else {
      ++it;
    }
  }
  in.unexpected = nullptr;
}

void PointToPoint::abort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (abortReason_.empty()) abortReason_ = reason;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    if (pairs_[peer]) pairs_[peer]->shutdown();
    failPeer(peer, abortReason_);
  }
  for (auto& recv : posted_) {
    recv->done(failure(describeRecv(*recv), abortReason_), recv->src);
  }
  posted_.clear();
}

void PointToPoint::announceFailure(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!announcement_.empty()) return;  // announced already; the buffers below are in flight
  announcement_ = reason.substr(0, kMaxFailureNoticeBytes);
  if (announcement_.empty()) announcement_ = "(no reason given)";
  announcementHeader_ = failureNoticeHeader(announcement_.size());
  for (int peer : connected_) {
    if (inbound_[peer].dead) continue;
    transport::Pair& pair = *pairs_[peer];
    // A frame half sent cannot be interrupted, and queueing behind it could wait on a stuck peer.
    if (pair.hasPendingSend()) continue;
    pair.postSend(&announcementHeader_, sizeof(FrameHeader));
    pair.postSend(announcement_.data(), announcement_.size());
    try {
      pair.progress();  // one non-blocking attempt: the kernel's socket buffer takes it or not
    } catch (const std::exception&) {
      // That peer is gone already; it needs no notice.
    }
  }
}

std::string PointToPoint::failureAnnounced(int brokenPeer, std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock(mutex_);
  const bool known = brokenPeer >= 0 && brokenPeer < size_ && brokenPeer != rank_;
  noticeChanged_.wait_for(
      lock, wait, [&] { return !announced_.empty() || (known && inbound_[brokenPeer].dead); });
  return announced_;
}

void PointToPoint::loop() {
  std::vector<pollfd> fds;
  while (!stopping_) {
    bool moved = false;
    fds.clear();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (int peer : connected_) {
        Inbound& in = inbound_[peer];
        if (in.dead) continue;
        transport::Pair& pair = *pairs_[peer];
        auto completeSends = [&] {
          while (!in.sends.empty() && in.sends.front().end <= pair.sendCompleted()) {
            in.sends.front().done(nullptr, peer);
            in.sends.pop_front();
          }
        };
        try {
          moved |= pair.progress();
        } catch (const std::exception& e) {
          // The peer may close right after its last bytes (or after taking
          // ours): what went out or arrived completely succeeded, whatever
          // happened next, so finish that before failing the rest.
          completeSends();
          handleInbound(peer);
          failPeer(peer, e.what());
          continue;
        }
        completeSends();
        handleInbound(peer);
        if (in.dead) continue;
        short events = POLLIN;
        if (pair.hasPendingSend()) events |= POLLOUT;
        if (pair.pollFd() >= 0) fds.push_back(pollfd{pair.pollFd(), events, 0});
      }
    }
    if (moved) continue;
    fds.push_back(pollfd{wakeFd_, POLLIN, 0});
    ::poll(fds.data(), fds.size(), 100);
    if (fds.back().revents & POLLIN) {
      uint64_t count;
      ssize_t ignored = ::read(wakeFd_, &count, sizeof(count));
      (void)ignored;
    }
  }
}

}  // namespace ringx
