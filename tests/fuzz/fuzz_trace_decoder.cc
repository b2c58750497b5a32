// libFuzzer target: the trace codec's incremental decoder (trace/format/codec.h), which reads
// trace files, crash-cut files and live streams. Any bytes, fed in any split, must decode or
// throw ringx's FormatError: never crash, hang or read out of bounds.
#include <cstddef>
#include <cstdint>

#include "trace/format/codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the chunk size, so that records split across feeds are covered.
  const size_t chunk = 1 + data[0] % 64;
  ++data;
  --size;
  ringx::trace::RankTrace trace;
  ringx::trace::Decoder decoder(&trace);
  try {
    for (size_t at = 0; at < size; at += chunk) {
      decoder.feed(reinterpret_cast<const char*>(data) + at, std::min(chunk, size - at));
    }
    // What a reader does with a decoded stream: look its strings and arguments up.
    for (const auto& event : trace.events) {
      (void)trace.str(event.name);
      (void)trace.intArg(event, "seq");
      (void)trace.stringArg(event, "peer");
    }
  } catch (const ringx::trace::FormatError&) {
  }
  return 0;
}
