#include "trace/format/live_protocol.h"

#include <algorithm>
#include <cstdint>

#include "base/error.h"
#include "trace/format/codec.h"

namespace ringx::trace {
namespace {

std::vector<std::string_view> splitOn(std::string_view text, char separator) {
  std::vector<std::string_view> words;
  size_t at = 0;
  while (at < text.size()) {
    while (at < text.size() && text[at] == separator) ++at;
    const size_t end = std::min(text.find(separator, at), text.size());
    if (end > at) words.push_back(text.substr(at, end - at));
    at = end;
  }
  return words;
}

}  // namespace

bool tokensEqual(std::string_view given, std::string_view expected) {
  if (given.size() != expected.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < given.size(); ++i) {
    diff |= static_cast<unsigned char>(given[i]) ^ static_cast<unsigned char>(expected[i]);
  }
  return diff == 0;
}

LiveRequest parseLiveRequest(std::string_view line, std::string_view token) {
  LiveRequest out;
  const std::string usage = strCat("expected '", kLiveProtocolName, " ", kLiveProtocolVersion,
                                   " <token or -> STREAM|SUMMARY|DIRECTORY'");
  const bool printable =
      std::all_of(line.begin(), line.end(), [](char ch) { return ch >= ' ' && ch < 127; });
  const std::vector<std::string_view> words = splitOn(line, ' ');
  if (!printable || words.size() != 4 || words[0] != kLiveProtocolName) {
    out.error = strCat("not a ringx live trace request; ", usage);
  } else if (words[1] != std::to_string(kLiveProtocolVersion)) {
    out.error = strCat("protocol version ", words[1], " is not supported (this server speaks ",
                       kLiveProtocolVersion, "); use a viewer from the same ringx release");
  } else if (!token.empty() && words[2] == "-") {
    out.error = "this server requires a token: set RINGX_TRACE_TOKEN to the job's token";
  } else if (!token.empty() && !tokensEqual(words[2], token)) {
    out.error = "invalid token: RINGX_TRACE_TOKEN does not match the job's token";
  } else if (words[3] == "DIRECTORY") {
    out.kind = LiveRequestKind::kDirectory;
  } else if (words[3] == "STREAM") {
    out.kind = LiveRequestKind::kStream;
  } else if (words[3] == "SUMMARY") {
    out.kind = LiveRequestKind::kSummary;
  } else {
    out.error = strCat("unknown request '", words[3], "'; ", usage);
  }
  return out;
}

const char* liveRequestName(LiveRequestKind kind) {
  switch (kind) {
    case LiveRequestKind::kStream:
      return "STREAM";
    case LiveRequestKind::kSummary:
      return "SUMMARY";
    case LiveRequestKind::kDirectory:
      return "DIRECTORY";
  }
  return "?";
}

bool isSummaryEventRecord(std::string_view record) {
  // u32 length, u8 type, then the event's kind and category bytes (codec.cc's order):
  // deciding needs no decoding, so the server's writer thread filters at memcpy speed.
  if (record.size() < 7 || static_cast<RecordType>(record[4]) != RecordType::kEvent) return false;
  const auto kind = static_cast<EventKind>(record[5]);
  const auto category = static_cast<Category>(record[6]);
  return kind != EventKind::kCounter &&
         (category == Category::kCollective || category == Category::kStep);
}

std::string parseLiveStatus(std::string_view status, const std::string& where,
                            const char* request) {
  // Every server of protocol version 1 answers a request word it does not know this
  // way; STREAM and DIRECTORY are as old as the protocol, so only a newer request
  // (SUMMARY) can get it, from a job that runs an older ringx.
  if (status.rfind("ERR unknown request", 0) == 0) {
    RINGX_THROW(PeerError, "live trace server ", where, " does not know the ", request,
                " request: the job runs an older ringx than this viewer (attach without ",
                "--summary-others, or run the job with this ringx release)");
  }
  if (status.rfind("ERR ", 0) == 0) {
    RINGX_THROW(PeerError, "live trace server ", where, " refused the ", request,
                " request: ", status.substr(4));
  }
  if (status != "OK" && status.rfind("OK ", 0) != 0) {
    RINGX_THROW(FormatError, where, " is not a ringx live trace server (it answered '",
                status.substr(0, 80), "')");
  }
  return std::string(status.size() > 3 ? status.substr(3) : std::string_view());
}

bool parseDecimal(std::string_view text, int64_t min, int64_t max, int64_t* out) {
  if (text.empty() || text.size() > 18) return false;
  int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v < min || v > max) return false;
  *out = v;
  return true;
}

std::vector<DirectoryEntry> parseDirectory(std::string_view countText, std::string_view body,
                                           const std::string& where) {
  int64_t count = 0;
  if (!parseDecimal(countText, 0, 1 << 20, &count)) {
    RINGX_THROW(FormatError, where, " sent a bad directory status line 'OK ",
                countText.substr(0, 80), "'");
  }
  std::vector<DirectoryEntry> entries;
  for (std::string_view line : splitOn(body, '\n')) {
    const std::vector<std::string_view> words = splitOn(line, ' ');
    int64_t rank = 0, port = 0;
    if (words.size() != 3 || !parseDecimal(words[0], 0, INT32_MAX, &rank) ||
        !parseDecimal(words[2], 1, 65535, &port)) {
      RINGX_THROW(FormatError, where, " sent a bad directory line '", line.substr(0, 80), "'");
    }
    entries.push_back(
        DirectoryEntry{static_cast<int>(rank), std::string(words[1]), static_cast<int>(port)});
  }
  if (static_cast<int64_t>(entries.size()) != count) {
    RINGX_THROW(FormatError, where, " announced ", count, " directory entries and sent ",
                entries.size());
  }
  std::sort(entries.begin(), entries.end(),
            [](const DirectoryEntry& a, const DirectoryEntry& b) { return a.rank < b.rank; });
  return entries;
}

HostPort parseHostPort(std::string_view text) {
  auto bad = [&](const char* why) {
    RINGX_THROW(InvalidArgument, "bad address '", text, "': ", why,
                "; expected HOST:PORT, e.g. 127.0.0.1:9100, [::1]:9100 or 9100");
  };
  HostPort out;
  std::string_view portText = text;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) bad("an IPv6 address without its closing ']'");
    out.host.assign(text.substr(1, close - 1));
    if (out.host.empty()) bad("an empty IPv6 address");
    if (close + 1 >= text.size() || text[close + 1] != ':') bad("no port after the IPv6 address");
    portText = text.substr(close + 2);
  } else if (const size_t colon = text.rfind(':'); colon != std::string_view::npos) {
    if (text.find(':') != colon) bad("an IPv6 address needs brackets, as in [::1]:9100");
    out.host.assign(text.substr(0, colon));
    portText = text.substr(colon + 1);
  }
  if (out.host.empty()) out.host = "127.0.0.1";
  if (std::any_of(out.host.begin(), out.host.end(), [](char c) { return c <= ' ' || c >= 127; })) {
    bad("the host has spaces or unprintable characters");
  }
  int64_t port = 0;
  if (!parseDecimal(portText, 0, 65535, &port)) bad("the port must be a number from 0 to 65535");
  out.port = static_cast<int>(port);
  return out;
}

}  // namespace ringx::trace
