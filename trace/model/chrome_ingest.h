// Ingest of Chrome Trace Event JSON (ringx-trace export, PyTorch profiler /
// Kineto traces, anything chrome://tracing opens) into the trace model's store.
#pragma once

#include <string>
#include <string_view>

#include "trace/model/trace_store.h"

namespace ringx::model {

// Reads a Chrome trace file into `store` and finalizes it. Throws
// IoError for an unreadable file and trace::FormatError (naming the file
// and the offset) for text that is not a Chrome trace.
void ingestChromeTraceFile(TraceStore& store, const std::string& path);
// The same from text in memory; `source` names it in errors.
void ingestChromeTraceText(TraceStore& store, std::string_view text, const std::string& source);
// Whether a file's first bytes are gzip's magic (a .json.gz trace, which
// ingestChromeTraceFile decompresses).
bool startsLikeGzip(const char* head, size_t size);

}  // namespace ringx::model
