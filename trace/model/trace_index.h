// The on-disk index of a trace opened as an index (loader.h's indexTrace): its
// aggregate lanes (busy time per host and bucket, straggler marks) and its rank
// placeholders, saved after the one pass over the rank files, so that opening
// the trace again reads a few megabytes instead of every file.
//
// It lives in $RINGX_VIEWER_CACHE_DIR, else $XDG_CACHE_HOME/ringx-viewer, else
// ~/.cache/ringx-viewer, named by a hash of the trace directory's absolute path,
// and records every rank file's name, size and modification time: a trace whose
// files changed (a job still writing, a file replaced) is read again. An index
// that cannot be written or read is ignored: the pass over the files runs.
#pragma once

#include <string>

#include "trace/model/trace_store.h"
#include "trace/read/trace_dir.h"

namespace ringx::model {

// Where the index of the trace at `path` goes ("" when there is no cache directory).
std::string traceIndexPath(const std::string& path);

// Writes `store`'s placeholders, warnings and aggregate lanes; false on failure.
bool saveTraceIndex(const std::string& indexPath, const trace::TraceReader& reader,
                    const TraceStore& store);

// Fills an empty `store` from the index when it was made from `reader`'s files as
// they are now (then finalizes it); false when it is missing, stale or damaged.
bool loadTraceIndex(const std::string& indexPath, const trace::TraceReader& reader,
                    TraceStore& store);

}  // namespace ringx::model
