// libFuzzer target: a trace directory's manifest reader (trace/read/trace_dir.h). A damaged
// or foreign manifest must be a FormatError naming the file, never a crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/error.h"
#include "trace/read/trace_dir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const ringx::trace::Manifest manifest = ringx::trace::parseManifest(
        std::string_view(reinterpret_cast<const char*>(data), size), "fuzz/manifest.json");
    (void)ringx::trace::formatManifest(manifest);
  } catch (const ringx::Error&) {
  }
  return 0;
}
