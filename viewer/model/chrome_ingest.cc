// Placeholder until the Chrome JSON reader lands (being written now).
#include "viewer/model/chrome_ingest.h"

#include "backend/trace/codec.h"

namespace ringx::viewer {
void ingestChromeTraceFile(TraceStore&, const std::string& path) {
  throw trace::FormatError("Chrome trace import is not built yet: " + path);
}
void ingestChromeTraceText(TraceStore&, std::string_view, const std::string& source) {
  throw trace::FormatError("Chrome trace import is not built yet: " + source);
}
}  // namespace ringx::viewer
