// The live trace protocol's text parts (live_server.h describes the protocol): the request
// line a server reads, and the status line and directory a client reads. Pure functions over
// bytes, apart from the sockets, so that the server, the client and the fuzzers
// (tests/fuzz/) run the same parsing code.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "backend/trace/live_server.h"

namespace ringx::trace {

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
