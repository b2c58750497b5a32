// libFuzzer target: the viewer's Chrome Trace Event JSON reader (viewer/model/chrome_ingest.h),
// which opens traces from any tool. Any text must load or be a clear ringx error, never a
// crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "backend/common/error.h"
#include "viewer/model/chrome_ingest.h"
#include "viewer/model/trace_store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ringx::viewer::TraceStore store;
  try {
    ringx::viewer::ingestChromeTraceText(
        store, std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json");
  } catch (const ringx::Error&) {
  }
  return 0;
}
