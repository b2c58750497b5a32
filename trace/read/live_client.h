// The client side of the live trace protocol (trace/format/live_protocol.h): what the viewer and
// the tests use to read a running job.
//
// Connect to rank 0's RINGX_TRACE_LISTEN address, fetchDirectory() to learn every
// rank's endpoint, then open one LiveStream per rank. A LiveStream decodes into
// its RankTrace as bytes arrive; the caller drives it with poll(), from its own
// loop (poll(0) each frame) or by polling fd() itself.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trace/format/codec.h"
#include "trace/format/live_protocol.h"

namespace ringx::trace {

inline constexpr std::chrono::milliseconds kLiveDefaultTimeout{10000};

// Asks a live server for its directory (sorted by rank). Throws IoError when it
// cannot connect, TimeoutError past `timeout`, PeerError with the server's ERR text
// (wrong token, directory not ready), FormatError for a reply that is not the protocol.
std::vector<DirectoryEntry> fetchDirectory(const std::string& host, int port,
                                           const std::string& token,
                                           std::chrono::milliseconds timeout = kLiveDefaultTimeout);

// Which stream to ask a rank for.
enum class LiveStreamKind {
  kFull,     // STREAM: every event
  kSummary,  // SUMMARY: collective and step events only (trace/format/live_protocol.h)
};

// One rank's live event stream.
class LiveStream {
 public:
  // Connects and completes the handshake; the server has registered this client
  // when the constructor returns. Throws as fetchDirectory() does; a kSummary
  // request to a server older than SUMMARY throws PeerError saying so.
  LiveStream(const std::string& host, int port, const std::string& token,
             std::chrono::milliseconds timeout = kLiveDefaultTimeout,
             LiveStreamKind kind = LiveStreamKind::kFull);
  ~LiveStream();
  LiveStream(const LiveStream&) = delete;
  LiveStream& operator=(const LiveStream&) = delete;

  // Waits up to timeoutMs (0: not at all, -1: forever) for bytes, then reads and
  // decodes what is available. False once the stream has ended (the server closed
  // or reset it; see closeReason()). Throws FormatError for a corrupt stream, after
  // closing the connection.
  bool poll(int timeoutMs);

  // The socket to wait on for POLLIN; -1 once closed.
  int fd() const { return fd_; }
  bool connected() const { return fd_ >= 0; }
  // Why the stream ended ("" while connected).
  const std::string& closeReason() const { return closeReason_; }
  // Ends the stream from this side.
  void close();

  // What the stream said so far. trace().source is "HOST:PORT".
  const RankTrace& trace() const { return trace_; }
  RankTrace& trace() { return trace_; }
  uint64_t bytesReceived() const { return bytesReceived_; }

 private:
  void feed(const char* data, size_t bytes);
  void closeWith(std::string reason);

  int fd_ = -1;
  RankTrace trace_;
  Decoder decoder_{&trace_};
  uint64_t bytesReceived_ = 0;
  std::string closeReason_;
};

}  // namespace ringx::trace
