// A trace directory's layout, the contract between the ranks that write it (trace/record/) and
// every reader (trace/read/): one rank-<N>.ringx stream per rank, and manifest.json, written by
// rank 0, naming the job's world size and each rank's file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trace/format/codec.h"  // FormatError, kSchemaVersion

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

// Parses manifest.json's text; `source` names it in errors. Throws FormatError
// for text that is not JSON, another format, or a newer schema.
Manifest parseManifest(std::string_view text, const std::string& source);

// manifest.json's text for `manifest` (what parseManifest reads back).
std::string formatManifest(const Manifest& manifest);
// Writes DIR/manifest.json through a temporary file and a rename, so that a
// reader never sees half of one. Throws IoError.
void writeManifest(const std::string& dir, const Manifest& manifest);

// The file of `rank` in trace directory `dir` ("DIR/rank-<N>.ringx").
std::string rankFileName(const std::string& dir, int rank);
// "rank-<N>.ringx" -> N; false for any other name.
bool rankFromFileName(const std::string& name, int32_t* rank);
// Whether a file name has the rank files' shape (rank-*.ringx), digits or not.
bool looksLikeRankFile(const std::string& name);

}  // namespace ringx::trace
