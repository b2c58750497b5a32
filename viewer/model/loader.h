// Opening what a user names on the command line or in the File menu: a ringx
// trace directory, one rank's .ringx file, or a Chrome Trace Event JSON file.
#pragma once

#include <string>
#include <vector>

#include "viewer/model/trace_store.h"

namespace ringx::viewer {

enum class TraceFormat { kRingxDirectory, kRingxFile, kChromeJson };

// Decides by what is at `path` (a directory, the ringx magic, or JSON text).
// Throws IoError for a missing or unreadable path, FormatError for anything else.
TraceFormat detectFormat(const std::string& path);

// Reads every path into one store (ranks from several files merge; a rank that
// appears twice keeps both sets of events) and finalizes it.
void loadTraces(TraceStore& store, const std::vector<std::string>& paths);

}  // namespace ringx::viewer
