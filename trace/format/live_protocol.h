// The live trace protocol, the one contract between a job's live servers (trace/record/
// live_server.h) and the viewers and tools that attach (trace/read/live_client.h): its
// constants, the request line a server reads, the status line and directory a client reads,
// and the HOST:PORT a user names a server by. Pure functions over bytes, so that the server,
// the client and the fuzzers (tests/fuzz/) run the same parsing code.
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
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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

struct HostPort {
  std::string host;
  int port = 0;
};

// Parses "HOST:PORT", "[IPv6]:PORT", or a bare "PORT" / ":PORT" (host
// 127.0.0.1). PORT is 0 to 65535. Throws InvalidArgument saying what it expected.
HostPort parseHostPort(std::string_view text);

enum class LiveRequestKind {
  kStream,     // STREAM: every record
  kSummary,    // SUMMARY: the stream without the events an overview does not draw
  kDirectory,  // DIRECTORY
};

struct LiveRequest {
  LiveRequestKind kind = LiveRequestKind::kStream;
  std::string error;  // not empty: the request is refused, with this message
};

// Parses one request line ("\n" and a trailing "\r" removed) against the server's token
// ("" for none). Never throws: a bad line is a refusal whose message says what to send.
LiveRequest parseLiveRequest(std::string_view line, std::string_view token);

// Compares in time independent of where the first difference is.
bool tokensEqual(std::string_view given, std::string_view expected);

// The request word of a kind ("STREAM", "SUMMARY", "DIRECTORY").
const char* liveRequestName(LiveRequestKind kind);

// Whether an event record (codec.h framing, length prefix included) goes into a SUMMARY
// stream: a collective or step span or instant. False for anything too short to say.
bool isSummaryEventRecord(std::string_view record);

// Checks a server's status line (without "\n") for `request` ("STREAM", "SUMMARY" or
// "DIRECTORY") and returns its text after "OK " ("" for a bare "OK"). Throws PeerError for
// "ERR ..." (the server's message; for a request the server does not know, a message that
// says the server is older than this client) and FormatError for anything that is not this
// protocol. `where` names the server in messages.
std::string parseLiveStatus(std::string_view status, const std::string& where, const char* request);

// The DIRECTORY reply: `countText` from the status line ("OK <n>"), `body` every byte after it.
// Sorted by rank. Throws FormatError naming `where` for a malformed reply.
std::vector<DirectoryEntry> parseDirectory(std::string_view countText, std::string_view body,
                                           const std::string& where);

// A whole decimal in [min, max], digits only.
bool parseDecimal(std::string_view text, int64_t min, int64_t max, int64_t* out);

}  // namespace ringx::trace
