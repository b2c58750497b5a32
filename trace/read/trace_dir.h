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
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trace/format/codec.h"
#include "trace/format/manifest.h"

namespace ringx::trace {

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

// A trace read one rank at a time, for readers that must not hold a whole job in
// memory at once (the viewer's parallel load, summaries of 1,000-rank jobs):
// list the files, read each (from any thread, each file once), then finish()
// for the checks across files. What each file said is kept per file and
// reported in file order, so warnings do not depend on which thread won.
// scanTrace() below runs it on threads; readTrace() is that, keeping every rank.
class TraceReader {
 public:
  // Lists the files of a directory (or takes the one file); throws like readTrace.
  explicit TraceReader(const std::string& path);
  // These rank files, each read as a file on its own (no directory checks).
  explicit TraceReader(std::vector<std::string> files);
  const std::string& path() const { return path_; }
  const std::vector<std::string>& files() const { return files_; }
  const std::optional<Manifest>& manifest() const { return manifest_; }
  uint64_t totalBytes() const { return bytes_; }
  // File i's rank trace; nullopt (and a warning) for a file that ends before its
  // header in a directory. Throws IoError/FormatError naming the file.
  std::optional<RankTrace> read(size_t i);
  // Only the stream header of file i, from its first bytes (a reader that
  // needs every rank's host before it reads the events); nullopt when the
  // file ends before it. Errors as read().
  std::optional<StreamHeader> header(size_t i) const;
  // After every read: the set's warnings (files cut off, ranks missing, world
  // sizes that disagree). Throws FormatError for two files of one rank.
  std::vector<std::string> finish();
  // The headers of the files read, sorted by rank.
  std::vector<StreamHeader> headers() const;

 private:
  struct Seen {
    bool read = false;
    StreamHeader header;
    std::vector<std::string> warnings;  // what this file said, in order
  };
  std::string path_;
  std::filesystem::path directory_;  // empty: a single file
  std::optional<Manifest> manifest_;
  std::vector<std::string> files_;
  std::vector<Seen> seen_;
  std::vector<std::string> warnings_;  // the listing's
  uint64_t bytes_ = 0;
};

// What scanTrace read: readTrace's TraceSet less the ranks' events.
struct TraceScan {
  std::string path;
  std::optional<Manifest> manifest;
  std::vector<StreamHeader> headers;  // of the ranks read, sorted by rank
  std::vector<std::string> warnings;  // TraceSet::warnings, in the same order

  int32_t worldSize() const;  // as TraceSet::worldSize()
  std::vector<int32_t> missingRanks() const;
};

// Reads every file of `reader` on up to `threads` threads and hands each rank's
// trace to `visit`, which owns it; `visit` runs on several threads at once (in
// no particular rank order) and must be thread-safe. The first error (of the
// lowest file, or thrown by `visit`) stops the threads and is rethrown here.
TraceScan scanTrace(TraceReader& reader, unsigned threads,
                    const std::function<void(RankTrace&&)>& visit);
// The same for a path, read as readTrace reads it.
TraceScan scanTrace(const std::string& path, unsigned threads,
                    const std::function<void(RankTrace&&)>& visit);

}  // namespace ringx::trace
