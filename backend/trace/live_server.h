// The live trace server: a Sink that serves this rank's trace stream to viewers
// over TCP while the job runs. On rank 0 it also serves the directory of every
// rank's own live endpoint, so a client that connects to rank 0 finds the whole
// job (RINGX_TRACE_LISTEN=HOST:PORT; the ranks publish their endpoints through
// the store and rank 0 calls setDirectory()).
//
// ---- Protocol, version 1 ----------------------------------------------------------
//
// A client connects and sends one line (at most kLiveMaxLineBytes, "\n" ends it):
//
//   RINGX-LIVE 1 <token> STREAM\n        this rank's event stream
//   RINGX-LIVE 1 <token> SUMMARY\n       the same stream cut down to what a 1,000-rank
//                                        overview needs (below)
//   RINGX-LIVE 1 <token> DIRECTORY\n     every rank's live endpoint
//
// <token> is the server's token (RINGX_TRACE_TOKEN), or "-" when it has none.
// The server answers with one line, then:
//
//   ERR <message>\n   the server closes: a bad request line, a wrong or missing
//                     token, a directory not set yet, too many clients, no request
//                     line within Options::handshakeTimeoutMs.
//   OK\n              (STREAM) the codec.h byte stream until either side closes:
//                       1. the preamble (magic, header, every string defined so far),
//                       2. the latest clock-sync record that fell out of the backlog,
//                       3. the backlog: the most recent records, whole ones, at most
//                          Options::backlogBytes, so a late client sees recent history,
//                       4. every later batch as it is written (its strings first).
//   OK\n              (SUMMARY) the STREAM bytes, in the same steps, without the event
//                     records a job-wide overview does not draw: only collective
//                     (Category::kCollective) and step (Category::kStep) spans and
//                     instants are kept, never counters. Strings, clock syncs and
//                     Dropped records pass unchanged (a Dropped count is the rank's,
//                     not only its collectives'). A viewer follows a few ranks in full
//                     and every other rank's collectives this way, for about a tenth of
//                     the bytes of a full stream.
//   OK <n>\n          (DIRECTORY) n lines "<rank> <host> <port>\n" sorted by rank,
//                     then the server closes.
//
// SUMMARY came after the first release of version 1; a server from before it
// answers "ERR unknown request 'SUMMARY'; ...", which the client reports as a server
// too old for it (the version stays 1: STREAM and DIRECTORY did not change).
//
// The server reads nothing else: it is read-only, and a client ends its stream
// by closing the connection.
//
// ---- Slow clients -----------------------------------------------------------------
//
// write() runs on the recorder's writer thread and must never wait for a socket.
// It only appends to each client's bounded queue and wakes the server's own
// thread, which does all socket I/O with poll() and non-blocking sockets. When a
// client's queue is full the server sheds that client's event records (never
// string records, which later events need, nor clock-sync or dropped records)
// until the queue has drained to half its limit; then it sends that client a
// Dropped record with the number of events it lost, and resumes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/trace/sink.h"

namespace ringx::trace {

inline constexpr const char* kLiveProtocolName = "RINGX-LIVE";
inline constexpr int kLiveProtocolVersion = 1;
// Longest request (and reply status) line, "\n" included.
inline constexpr size_t kLiveMaxLineBytes = 1024;

// One rank's live endpoint, as the directory serves it.
struct DirectoryEntry {
  int rank = 0;
  std::string host;
  int port = 0;

  bool operator==(const DirectoryEntry& other) const {
    return rank == other.rank && host == other.host && port == other.port;
  }
};

class LiveServer : public Sink {
 public:
  struct Options {
    // Loopback by default. Any other address needs a token: the stream shows
    // what the job runs and where, and anyone who can reach the port can read it.
    std::string host = "127.0.0.1";
    int port = 0;  // 0: an ephemeral port, see port()
    // Clients must present it (even on loopback, when set). Printable ASCII, no spaces.
    std::string token;
    // Bytes waiting for one client before the server sheds its events.
    size_t clientQueueBytes = 16u << 20;
    // Recent records replayed to a client that connects late (0: none).
    size_t backlogBytes = 4u << 20;
    int handshakeTimeoutMs = 10000;  // for the request line
    int closeDrainMs = 1000;         // close() gives clients this long to take what is queued
    int maxClients = 64;             // open connections, streaming or not
  };

  struct Stats {
    int connections = 0;            // open sockets, handshaking ones included
    int streamClients = 0;          // clients receiving the stream now (SUMMARY ones too)
    uint64_t streamsServed = 0;     // STREAM requests accepted so far
    uint64_t summariesServed = 0;   // SUMMARY requests accepted so far
    uint64_t requestsRejected = 0;  // connections answered with ERR
    uint64_t eventsDropped = 0;     // event records shed for slow clients, all clients together
  };

  // Binds and starts serving (the directory at once, the stream from begin()).
  // Throws InvalidArgument for a non-loopback host without a token or a bad
  // option, IoError when the address cannot be bound.
  explicit LiveServer(Options options);
  ~LiveServer() override;
  LiveServer(const LiveServer&) = delete;
  LiveServer& operator=(const LiveServer&) = delete;

  // The bound port (the ephemeral one when Options::port was 0) and host.
  int port() const;
  const std::string& host() const;

  // The directory DIRECTORY requests get; rank 0's own entry may point at this
  // server. Until the first call the server answers "ERR directory not ready".
  void setDirectory(std::vector<DirectoryEntry> entries);
  // Adds one rank's entry (replacing that rank's previous one).
  void addDirectoryEntry(DirectoryEntry entry);

  // Sink. write() never waits for a client; close() stops the thread after giving
  // clients up to Options::closeDrainMs to take their queues, and closes every socket.
  void begin(const std::string& preamble) override;
  void write(const Batch& batch) override;
  void close() override;

  Stats stats() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringx::trace
