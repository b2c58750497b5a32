// Reading a whole job's trace: the directory the recorder wrote (one
// rank-<N>.ringx stream per rank and, from rank 0, manifest.json) or one rank's
// file on its own.
//
// A job killed early leaves no manifest and possibly files cut off mid-record;
// both still read: the rank files are found by name, and truncated files come
// back with RankTrace::truncated set and a warning. Input that cannot be a ringx
// trace (a missing path, foreign or corrupt files, two files claiming one rank,
// a manifest that is not JSON) throws IoError or FormatError naming the path and
// what to do about it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/trace/codec.h"

namespace ringx::trace {

inline constexpr const char* kManifestFile = "manifest.json";
inline constexpr const char* kManifestFormat = "ringx-trace";

// One rank as manifest.json lists it.
struct ManifestRank {
  int32_t rank = 0;
  std::string host;
  int64_t pid = 0;
  std::string file;  // relative to the trace directory
};

// manifest.json, written by rank 0:
//   {"format": "ringx-trace", "schema_version": 1, "world_size": 2,
//    "start_wall_ns": ..., "ranks": [{"rank": 0, "host": "h", "pid": 123,
//    "file": "rank-0.ringx"}, ...]}
struct Manifest {
  uint32_t schemaVersion = kSchemaVersion;
  int32_t worldSize = 0;
  int64_t startWallNs = 0;  // display only, like StreamHeader::startWallNs
  std::vector<ManifestRank> ranks;
};

// A job's trace as read from disk.
struct TraceSet {
  std::string path;                  // what was opened
  std::optional<Manifest> manifest;  // absent when the job died before writing it
  std::vector<RankTrace> ranks;      // sorted by header.rank, one per rank
  // Things a reader should tell the user but that do not stop reading: files cut
  // off by a crash, ranks without a file, disagreements with the manifest.
  std::vector<std::string> warnings;

  // The manifest's world size, else the largest any rank's header claims.
  int32_t worldSize() const;
  // The rank's trace, or nullptr when it has none.
  const RankTrace* findRank(int32_t rank) const;
  // Ranks whose file was cut off inside a record.
  std::vector<int32_t> truncatedRanks() const;
  // Ranks in [0, worldSize()) without a trace.
  std::vector<int32_t> missingRanks() const;
};

// Reads a trace directory, or a single .ringx file (a TraceSet of one rank), or
// a directory's manifest.json (read as its directory).
TraceSet readTrace(const std::string& path);

// A trace read one rank at a time, for readers that reduce each rank and drop
// it (`ringx-trace summary` over 1,000 ranks holds a few ranks, not the job):
// what readTrace returns, less the ranks' events.
struct TraceScan {
  std::string path;
  std::optional<Manifest> manifest;
  std::vector<StreamHeader> headers;  // of the ranks read, sorted by rank
  std::vector<std::string> warnings;  // TraceSet::warnings, in the same order

  int32_t worldSize() const;  // as TraceSet::worldSize()
  std::vector<int32_t> missingRanks() const;
};

// Reads `path` as readTrace does and hands each rank's trace to `visit`, which
// owns it. Up to `threads` files are read at once, so `visit` runs on several
// threads (in no particular rank order) and must be thread-safe. Errors are
// readTrace's; the first one (or one thrown by `visit`) stops the reading
// threads and is rethrown here.
TraceScan scanTrace(const std::string& path, unsigned threads,
                    const std::function<void(RankTrace&&)>& visit);

// Parses manifest.json's text; `source` names it in errors. Throws FormatError
// for text that is not JSON, another format, or a newer schema.
Manifest parseManifest(std::string_view text, const std::string& source);

// manifest.json's text for `manifest` (what parseManifest reads back).
std::string formatManifest(const Manifest& manifest);
// Writes DIR/manifest.json through a temporary file and a rename, so that a
// reader never sees half of one. Throws IoError.
void writeManifest(const std::string& dir, const Manifest& manifest);

}  // namespace ringx::trace
