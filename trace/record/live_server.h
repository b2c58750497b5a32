// The live trace server: a Sink that serves this rank's trace stream to viewers
// over TCP while the job runs. On rank 0 it also serves the directory of every
// rank's own live endpoint, so a client that connects to rank 0 finds the whole
// job (RINGX_TRACE_LISTEN=HOST:PORT; the ranks publish their endpoints through
// the store and rank 0 calls setDirectory()).
//
// The protocol (request lines, replies, SUMMARY) is described in trace/format/live_protocol.h.
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

#include "trace/format/live_protocol.h"
#include "trace/record/sink.h"

namespace ringx::trace {

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
