// libFuzzer target: what a live trace client reads from a server (trace/read/live_client.h):
// the status line, then a directory or the codec stream. A hostile or broken server's bytes
// must end in ringx's PeerError or FormatError, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "trace/format/codec.h"
#include "trace/format/live_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool directory = data[0] == 'D';  // the request the client sent: DIRECTORY or STREAM
  const std::string_view reply(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t newline = reply.find('\n');
  if (newline == std::string_view::npos) return 0;  // the client keeps reading (bounded)
  const std::string_view status = reply.substr(0, newline), rest = reply.substr(newline + 1);
  try {
    const std::string okRest =
        ringx::trace::parseLiveStatus(status, "fuzz", directory ? "DIRECTORY" : "STREAM");
    if (directory) {
      (void)ringx::trace::parseDirectory(okRest, rest, "fuzz");
    } else {
      ringx::trace::RankTrace trace;
      ringx::trace::Decoder decoder(&trace);
      decoder.feed(rest.data(), rest.size());
    }
  } catch (const ringx::PeerError&) {
  } catch (const ringx::trace::FormatError&) {
  }
  return 0;
}
