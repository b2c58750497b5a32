// Export to Chrome Trace Event JSON, the format ui.perfetto.dev and
// chrome://tracing open.
//
// Each rank becomes a process (pid = rank + 1: Perfetto treats pid 0 as the
// kernel's idle task) named "rank N (host)"; each track a thread named after it,
// with the same tid on every rank so that "comm:world" sits at the same place in
// every process. Spans are "X" events, instants "i" (thread scope), counters "C".
// One collective's spans on every rank are joined by a flow ("s"/"t"/"f", id
// unique per group and seq) from the first rank to arrive to the last
// (collective_chains.h), so Perfetto draws the same arrows as ringx-viewer.
// Times are aligned to rank 0's clock (alignment.h) and written in microseconds
// from the job's earliest aligned event, so a double keeps nanoseconds.
//
// Clock offsets, their uncertainty, dropped-event counts and truncation go into
// each process_name event's args and into the top-level "otherData".
//
// The output is streamed as text (no JSON document is built): a million events
// export in about a second.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

#include "trace/read/trace_dir.h"

namespace ringx::trace {

struct ExportStats {
  uint64_t events = 0;   // trace events written, metadata and flow points not counted
  uint64_t flows = 0;    // arrows joining collectives across ranks (flow points - chains)
  int64_t originNs = 0;  // rank 0's clock at ts 0
};

// Writes `trace` as Chrome Trace Event JSON. Throws IoError when `out` fails.
ExportStats writeChromeTrace(const TraceSet& trace, std::ostream& out);
// The same into a file (created or replaced).
ExportStats writeChromeTraceFile(const TraceSet& trace, const std::string& path);

}  // namespace ringx::trace
