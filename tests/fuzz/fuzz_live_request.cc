// libFuzzer target: the live trace server's request line (trace/format/live_protocol.h), the
// first bytes any process that can reach the port sends. Any line is a STREAM or DIRECTORY
// request or a refusal with a message: never a crash, and never accepted with a wrong token.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "trace/format/live_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  const std::string_view token = "s3cret-token";
  const ringx::trace::LiveRequest open = ringx::trace::parseLiveRequest(line, "");
  const ringx::trace::LiveRequest guarded = ringx::trace::parseLiveRequest(line, token);
  // Accepted with a token only if the line carries exactly that token.
  if (guarded.error.empty() && line.find(token) == std::string_view::npos) std::abort();
  // A token can only make a server refuse more, never accept more.
  if (guarded.error.empty() && !open.error.empty()) std::abort();
  return 0;
}
