// Point-to-point messages (send, recv, recv from any source) with tags.
//
// Point-to-point runs on its own connections and its own progress thread, apart
// from the collectives: a send must not wait for the peer to post its receive
// (torch's isend/irecv and batch_isend_irecv rely on that), and a blocking
// receive must not stall the group's collective stream.
//
// Each message is a 24-byte frame header (tag, byte count) and the payload.
// Arriving messages are matched to posted receives in arrival order (source or
// any source, and tag). A message that arrives before its receive is posted is
// kept in an "unexpected" buffer and copied out when the receive comes.
//
// Connections are made on demand: the first send to a peer or receive from it
// asks the group's connector for the pair (connect), and pairs that peers make
// arrive through adopt(), from the connector's thread.
//
// The same connections carry failure notices: a rank that gives up on the group
// sends every peer its reason (a frame with its own magic) before it breaks its
// connections, so a peer that only sees a connection close can still say why.
// This keeps the store off the failure path: the store may be what failed (its
// host lost, or across a partition), and torch's TCPStore client has no
// deadline, so a thread that asked it would stay blocked.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/transport/pair.h"

namespace ringx {

// A point-to-point frame's header, as it travels (fixed layout: part of the protocol).
struct P2pFrameHeader {
  uint32_t magic;
  uint32_t reserved;
  int64_t tag;
  uint64_t bytes;
};
static_assert(sizeof(P2pFrameHeader) == 24, "P2pFrameHeader is part of the wire format");

// Largest payload one frame may announce: far beyond any real message, it keeps a corrupt
// or hostile header from making the receiver buffer an absurd amount.
inline constexpr uint64_t kMaxP2pFrameBytes = uint64_t{1} << 40;

// Longest failure notice (its reason text) a peer may send.
inline constexpr uint64_t kMaxFailureNoticeBytes = uint64_t{64} << 10;

// The header that frames `bytes` of payload with `tag`.
P2pFrameHeader p2pFrameHeader(int64_t tag, uint64_t bytes);
// The header of a failure notice whose reason text is `bytes` long.
P2pFrameHeader failureNoticeHeader(uint64_t bytes);
bool isFailureNotice(const P2pFrameHeader& header);
// What is wrong with a header that arrived (any 24 bytes may), or "" when it is a frame.
std::string p2pFrameProblem(const P2pFrameHeader& header);

class PointToPoint {
 public:
  static constexpr int kAnySource = -1;
  // Called once on the progress thread: error (or null) and the source rank.
  using Callback = std::function<void(std::exception_ptr error, int source)>;

  // Called on the progress thread with the first failure notice a peer sends.
  using NoticeCallback = std::function<void(const std::string& notice)>;

  // Blocks until a pair to `peer` exists and was adopt()ed; throws when it cannot be made.
  using ConnectFunction = std::function<void(int peer)>;

  PointToPoint(int rank, int size, ConnectFunction connect, NoticeCallback onNotice = nullptr);
  // Fails everything still pending and stops the progress thread.
  ~PointToPoint();

  // `data` must stay valid until `done` is called.
  void send(int dst, int64_t tag, const void* data, size_t bytes, Callback done);
  void recv(int src, int64_t tag, void* data, size_t bytes, Callback done);

  // Breaks all connections and fails every pending operation with `reason`.
  void abort(const std::string& reason);

  // Sends `reason` as a failure notice to every peer it can reach at once: peers
  // whose connection is idle and has room. Never waits, so a stuck or
  // unreachable peer cannot delay the caller (that peer learns from the broken
  // connection alone). Call before breaking the connections (abort()).
  void announceFailure(const std::string& reason);
  // The first failure notice a peer sent, or "" if none came. Waits up to `wait`
  // for one, and stops waiting when the connection to `brokenPeer` (the rank
  // whose collective connection broke; -1 if unknown) ends without a notice: a
  // notice is read before the end of its stream, so that rank died before it
  // could say anything and none is on its way from it.
  std::string failureAnnounced(int brokenPeer, std::chrono::milliseconds wait);

  // Takes the pair to `peer` (once per peer); safe from any thread.
  void adopt(int peer, std::unique_ptr<transport::Pair> pair);

  // The connection to `peer`, for its traffic counters; null when not connected.
  const transport::Pair* pair(int peer) const {
    return published_[peer].load(std::memory_order_acquire);
  }

 private:
  using FrameHeader = P2pFrameHeader;
  struct PostedRecv {
    int src;
    int64_t tag;
    char* data;
    size_t bytes;
    Callback done;
    uint64_t seq;  // its number among this rank's receives from `src` (or from any source)
  };
  struct Unexpected {
    int src;
    int64_t tag;
    std::vector<char> payload;
    bool complete = false;
    std::unique_ptr<PostedRecv> claimedBy;  // a receive posted while it was arriving
  };
  struct PendingSend {
    FrameHeader header;
    uint64_t end;  // sendCompleted() offset at which the payload is out
    Callback done;
    uint64_t seq;  // its number among this rank's sends to that peer
  };
  // Receive side of one peer's stream.
  struct Inbound {
    FrameHeader header{};
    uint64_t headerEnd = 0;
    bool inPayload = false;
    uint64_t payloadEnd = 0;
    std::unique_ptr<PostedRecv> matched;  // payload goes straight into its buffer
    Unexpected* unexpected = nullptr;     // or into an unexpected buffer
    std::vector<char> discard;            // or nowhere (size mismatch already reported)
    std::string notice;                   // or into this, when the frame is a failure notice
    std::deque<PendingSend> sends;
    bool dead = false;
    std::string deathReason;
  };

  void loop();
  void wakeUp();
  void handleInbound(int peer);
  void completeRecv(std::unique_ptr<PostedRecv> recv, const char* from, size_t bytes, int src);
  void failPeer(int peer, const std::string& reason);
  // "send #3 to rank 1 (tag 0)": how errors name an operation. Sends to a peer and receives
  // from it are numbered from 0 in the order they are posted, so where receives take the
  // messages in the order they were sent (one tag, say), matching operations on the two
  // ranks carry the same number.
  std::string describeSend(int dst, uint64_t seq, int64_t tag) const;
  std::string describeRecv(const PostedRecv& recv) const;
  std::exception_ptr failure(const std::string& op, const std::string& why) const;
  bool matches(const PostedRecv& recv, int src, int64_t tag) const {
    return (recv.src == kAnySource || recv.src == src) && recv.tag == tag;
  }

  // Connects to `peer` unless connected; the error text when that fails ("" on success).
  std::string ensureConnected(int peer);

  const int rank_;
  const int size_;
  ConnectFunction connect_;
  std::vector<std::unique_ptr<transport::Pair>> pairs_;  // guarded by mutex_
  std::vector<int> connected_;                           // peers with a pair, guarded by mutex_
  std::unique_ptr<std::atomic<transport::Pair*>[]> published_;

  std::mutex mutex_;  // guards everything below, held by the thread while it works
  std::vector<Inbound> inbound_;
  std::list<std::unique_ptr<PostedRecv>> posted_;
  std::list<std::unique_ptr<Unexpected>> unexpected_;
  std::vector<uint64_t> sendsTo_;    // per peer: sends posted so far
  std::vector<uint64_t> recvsFrom_;  // per peer: receives posted so far
  uint64_t recvsFromAny_ = 0;
  std::string abortReason_;
  std::string announcement_;          // this rank's failure notice, kept while it is sent
  FrameHeader announcementHeader_{};  // its frame header
  std::string announced_;             // the first notice that arrived from a peer
  NoticeCallback onNotice_;
  std::condition_variable noticeChanged_;

  int wakeFd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace ringx
