// libFuzzer target: the viewer's Chrome Trace Event JSON reader (trace/model/chrome_ingest.h),
// which opens traces from any tool. Any text must load or be a clear ringx error, never a
// crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/error.h"
#include "trace/model/chrome_ingest.h"
#include "trace/model/trace_store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ringx::model::TraceStore store;
  try {
    ringx::model::ingestChromeTraceText(
        store, std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json");
  } catch (const ringx::Error&) {
  }
  return 0;
}
