// Opening what a user names on the command line or in the File menu: a ringx
// trace directory, one rank's .ringx file, a Chrome Trace Event JSON file, or
// the flight recorder dumps of a failed or hung job (a directory of
// flight-rank-<N>.json, or one of them).
#pragma once

#include <string>
#include <vector>

#include "viewer/model/trace_store.h"

namespace ringx::viewer {

enum class TraceFormat { kRingxDirectory, kRingxFile, kChromeJson, kFlightDump };

// Decides by what is at `path` (a directory and the files in it, the ringx
// magic, a flight recorder dump's first bytes, or JSON text).
// Throws IoError for a missing or unreadable path, FormatError for anything else.
TraceFormat detectFormat(const std::string& path);

// Reads every path into one store (ranks from several files merge; a rank that
// appears twice keeps both sets of events) and finalizes it.
void loadTraces(TraceStore& store, const std::vector<std::string>& paths);

}  // namespace ringx::viewer
