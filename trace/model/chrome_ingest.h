// Ingest of Chrome Trace Event JSON (ringx-trace export, PyTorch profiler /
// Kineto traces, anything chrome://tracing opens) into the trace model's store.
#pragma once

#include <cstdint>
#include <optional>
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
// N of the profiler's step scope "ProfilerStep#N"; none for any other name.
std::optional<int64_t> profilerStepNumber(std::string_view name);
// Whether a track is one of a GPU's lanes ("GPU N / ...": its streams, and its counters), as
// Chrome ingest names them, not a CPU thread.
bool isDeviceTrack(std::string_view trackName);

// Whether a file's first bytes are gzip's magic (a .json.gz trace, which
// ingestChromeTraceFile decompresses).
bool startsLikeGzip(const char* head, size_t size);

}  // namespace ringx::model
