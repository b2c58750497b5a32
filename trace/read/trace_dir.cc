// Reading trace directories: which files make up a job, in what order, and what
// to say when they disagree.
//
// The rank files are the truth; the manifest adds what a reader cannot learn
// from them (the job's world size when a rank never wrote a file) and may be
// missing or stale. So the directory is always scanned for rank-*.ringx as well,
// and the manifest's files are read when it names others.
#include "trace/read/trace_dir.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "trace/format/manifest.h"

namespace ringx::trace {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string readTextFile(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) RINGX_THROW(IoError, "cannot open ", path.string(), ": ", std::strerror(errno));
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (file.bad()) RINGX_THROW(IoError, "error reading ", path.string());
  return text;
}

// Reads one rank's stream. Unlike readTraceFile, a file that ends before its
// stream header is not an error here: the rank died as it started recording,
// which the caller reports (nullopt) rather than refusing the whole job.
// `hint` is appended to format errors (what to do about a bad file).
std::optional<RankTrace> readRankFile(const fs::path& path, std::string_view hint) {
  const std::string name = path.string();
  std::ifstream file(path, std::ios::binary);
  if (!file) RINGX_THROW(IoError, "cannot open trace file ", name, ": ", std::strerror(errno));
  RankTrace trace;
  trace.source = name;
  Decoder decoder(&trace);
  std::string chunk(1 << 20, '\0');
  try {
    while (file) {
      file.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      const std::streamsize got = file.gcount();
      if (got <= 0) break;
      decoder.feed(chunk.data(), static_cast<size_t>(got));
    }
  } catch (const FormatError& e) {
    // The codec's messages do not always carry the path (record errors give
    // only the byte offset); a user with eight rank files needs to know which.
    std::string what = e.what();
    if (what.find(name) == std::string::npos) what = strCat(name, ": ", what);
    throw FormatError(strCat(what, hint));
  }
  if (file.bad()) RINGX_THROW(IoError, "error reading trace file ", name);
  if (!decoder.sawHeader()) return std::nullopt;
  trace.truncated = decoder.pendingBytes() > 0;
  return trace;
}

std::string truncationWarning(const RankTrace& trace) {
  return strCat("rank ", trace.header.rank, ": ", trace.source,
                " is cut off inside a record (the process probably died while recording); read ",
                trace.events.size(), " events up to the cut");
}

// ---- directories ------------------------------------------------------------------

// Files of a directory: the manifest's, then every rank-*.ringx beside them.
void listDirectory(const fs::path& dir, std::optional<Manifest>& manifest,
                   std::vector<std::string>& out, std::vector<std::string>& warnings) {
  const fs::path manifestPath = dir / kManifestFile;
  std::error_code ec;
  if (fs::is_regular_file(manifestPath, ec)) {
    manifest = parseManifest(readTextFile(manifestPath), manifestPath.string());
  }
  std::vector<fs::path> files;
  std::set<std::string> seen;
  if (manifest) {
    for (const ManifestRank& r : manifest->ranks) {
      if (r.file.empty()) continue;
      const fs::path file = fs::path(r.file).is_absolute() ? fs::path(r.file) : dir / r.file;
      if (!fs::exists(file, ec)) {
        warnings.push_back(strCat("rank ", r.rank, ": ", manifestPath.string(), " lists ",
                                  file.string(), ", which does not exist"));
        continue;
      }
      if (seen.insert(file.lexically_normal().string()).second) files.push_back(file);
    }
  }
  std::vector<fs::path> scanned;
  fs::directory_iterator it(dir, ec);
  if (ec) RINGX_THROW(IoError, "cannot list trace directory ", dir.string(), ": ", ec.message());
  for (const fs::directory_entry& entry : it) {
    const std::string name = entry.path().filename().string();
    if (looksLikeRankFile(name) && entry.is_regular_file(ec)) scanned.push_back(entry.path());
  }
  // Numeric order (rank-2 before rank-10) keeps messages and duplicate checks
  // deterministic whatever order the file system lists them in.
  std::sort(scanned.begin(), scanned.end(), [](const fs::path& a, const fs::path& b) {
    int32_t ra = 0, rb = 0;
    const bool na = rankFromFileName(a.filename().string(), &ra);
    const bool nb = rankFromFileName(b.filename().string(), &rb);
    if (na != nb) return na;
    if (na && ra != rb) return ra < rb;
    return a.filename() < b.filename();
  });
  for (const fs::path& file : scanned) {
    if (seen.insert(file.lexically_normal().string()).second) files.push_back(file);
  }
  if (files.empty()) {
    RINGX_THROW(FormatError, "no rank-<N>.ringx files in ", dir.string(),
                manifest ? " (its manifest.json names none that exist)" : "",
                ": this is not a ringx trace directory; pass the directory the job recorded its "
                "trace into, or one rank-<N>.ringx file");
  }
  for (const fs::path& f : files) out.push_back(f.string());
}

}  // namespace

// ---- TraceSet ---------------------------------------------------------------------

namespace {
// The world size of a job: the manifest's, else the largest any header claims.
int32_t worldSizeOf(const std::optional<Manifest>& manifest,
                    const std::vector<StreamHeader>& headers) {
  if (manifest && manifest->worldSize > 0) return manifest->worldSize;
  int32_t size = 0;
  for (const StreamHeader& h : headers) size = std::max({size, h.worldSize, h.rank + 1});
  return size;
}

std::vector<int32_t> missingRanksOf(int32_t worldSize, const std::vector<StreamHeader>& headers) {
  std::vector<bool> present(static_cast<size_t>(std::max(worldSize, 0)), false);
  for (const StreamHeader& h : headers)
    if (h.rank >= 0 && h.rank < worldSize) present[static_cast<size_t>(h.rank)] = true;
  std::vector<int32_t> out;
  for (int32_t r = 0; r < worldSize; ++r)
    if (!present[static_cast<size_t>(r)]) out.push_back(r);
  return out;
}

std::vector<StreamHeader> headersOf(const std::vector<RankTrace>& ranks) {
  std::vector<StreamHeader> headers;
  for (const RankTrace& trace : ranks) headers.push_back(trace.header);
  return headers;
}
}  // namespace

int32_t TraceSet::worldSize() const { return worldSizeOf(manifest, headersOf(ranks)); }

const RankTrace* TraceSet::findRank(int32_t rank) const {
  for (const RankTrace& trace : ranks) {
    if (trace.header.rank == rank) return &trace;
  }
  return nullptr;
}

std::vector<int32_t> TraceSet::truncatedRanks() const {
  std::vector<int32_t> out;
  for (const RankTrace& trace : ranks) {
    if (trace.truncated) out.push_back(trace.header.rank);
  }
  return out;
}

std::vector<int32_t> TraceSet::missingRanks() const {
  return missingRanksOf(worldSize(), headersOf(ranks));
}

// ---- entry points -------------------------------------------------------------------

TraceReader::TraceReader(const std::string& path) : path_(path) {
  const fs::path p(path);
  std::error_code ec;
  const fs::file_status status = fs::status(p, ec);
  if (status.type() == fs::file_type::not_found) {
    RINGX_THROW(IoError, "no trace at ", path,
                ": it does not exist (pass the directory the job recorded its trace into, or one "
                "rank-<N>.ringx file)");
  }
  if (ec) RINGX_THROW(IoError, "cannot access ", path, ": ", ec.message());
  if (fs::is_directory(status) || p.filename() == kManifestFile) {
    directory_ = fs::is_directory(status) ? p : (p.has_parent_path() ? p.parent_path() : ".");
    listDirectory(directory_, manifest_, files_, warnings_);
  } else {
    files_.push_back(path);
  }
  seen_.resize(files_.size());
  for (const std::string& f : files_) bytes_ += fs::file_size(f, ec);
}

TraceReader::TraceReader(std::vector<std::string> files) : files_(std::move(files)) {
  seen_.resize(files_.size());
  std::error_code ec;
  for (const std::string& f : files_) bytes_ += fs::file_size(f, ec);
}

std::optional<RankTrace> TraceReader::read(size_t i) {
  const fs::path file(files_.at(i));
  const bool single = directory_.empty();
  std::optional<RankTrace> trace =
      readRankFile(file, single ? std::string()
                                : strCat(" (move the file out of ", directory_.string(),
                                         " to read the other ranks without it)"));
  Seen& seen = seen_[i];
  seen.warnings.clear();
  if (!trace) {
    if (single) {
      RINGX_THROW(FormatError, file.string(),
                  " ends before its stream header (the process died as it started recording, or "
                  "this is not a ringx trace): there is nothing to read");
    }
    seen.warnings.push_back(strCat(file.string(),
                                   " ends before its stream header (the process died as it "
                                   "started recording): skipped"));
    return trace;
  }
  const int32_t rank = trace->header.rank;
  int32_t named = 0;
  if (!single && rankFromFileName(file.filename().string(), &named) && named != rank) {
    seen.warnings.push_back(strCat(file.string(), " holds rank ", rank, "'s trace (its header",
                                   " says so); read as rank ", rank));
  }
  if (trace->truncated) seen.warnings.push_back(truncationWarning(*trace));
  seen.read = true;
  seen.header = trace->header;
  return trace;
}

std::optional<StreamHeader> TraceReader::header(size_t i) const {
  const std::string& name = files_.at(i);
  std::ifstream file(name, std::ios::binary);
  if (!file) RINGX_THROW(IoError, "cannot open trace file ", name, ": ", std::strerror(errno));
  RankTrace trace;
  Decoder decoder(&trace);
  std::string chunk(64 << 10, '\0');
  // The header is the first record after the magic: a chunk or two holds it.
  while (file && !decoder.sawHeader()) {
    file.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const std::streamsize got = file.gcount();
    if (got <= 0) break;
    try {
      decoder.feed(chunk.data(), static_cast<size_t>(got));
    } catch (const FormatError& e) {
      throw FormatError(strCat(name, ": ", e.what()));
    }
  }
  if (!decoder.sawHeader()) return std::nullopt;
  return trace.header;
}

std::vector<StreamHeader> TraceReader::headers() const {
  std::vector<StreamHeader> out;
  for (const Seen& s : seen_)
    if (s.read) out.push_back(s.header);
  std::sort(out.begin(), out.end(),
            [](const StreamHeader& a, const StreamHeader& b) { return a.rank < b.rank; });
  return out;
}

std::vector<std::string> TraceReader::finish() {
  std::vector<std::string> warnings = warnings_;
  for (const Seen& s : seen_) warnings.insert(warnings.end(), s.warnings.begin(), s.warnings.end());
  if (directory_.empty()) return warnings;
  // Two files of one rank: refuse, in file order, as a reader of the whole set would.
  std::map<int32_t, size_t> fileOfRank;
  for (size_t i = 0; i < files_.size(); ++i) {
    if (!seen_[i].read) continue;
    const auto [at, inserted] = fileOfRank.emplace(seen_[i].header.rank, i);
    if (!inserted) {
      RINGX_THROW(FormatError, "two trace files for rank ", seen_[i].header.rank, " in ",
                  directory_.string(), ": ", files_[at->second], " and ", files_[i],
                  " (traces of two jobs in one directory?); move one of them out");
    }
  }
  TraceScan scan;
  scan.manifest = manifest_;
  scan.headers = headers();
  const int32_t worldSize = scan.worldSize();
  // Disagreements: the manifest against the headers, ranks without a file.
  for (const auto& [rank, i] : fileOfRank) {
    if (seen_[i].header.worldSize != worldSize) {
      warnings.push_back(strCat("rank ", rank, ": ", files_[i], " says world size ",
                                seen_[i].header.worldSize, ", the job ", worldSize,
                                " (files of different jobs mixed?)"));
    }
  }
  const std::vector<int32_t> missing = scan.missingRanks();
  if (!missing.empty()) {
    std::string list;
    for (int32_t r : missing) list += strCat(list.empty() ? "" : ", ", r);
    warnings.push_back(strCat("no trace for rank", missing.size() > 1 ? "s " : " ", list, " of ",
                              worldSize,
                              " (the process died before recording, or its file was lost)"));
  }
  return warnings;
}

TraceScan scanTrace(TraceReader& reader, unsigned threads,
                    const std::function<void(RankTrace&&)>& visit) {
  const size_t files = reader.files().size();
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex errorMutex;
  std::exception_ptr error;
  size_t errorAt = SIZE_MAX;  // the failing file with the lowest index reports
  auto work = [&] {
    for (size_t i = next++; i < files && !stop; i = next++) {
      try {
        std::optional<RankTrace> trace = reader.read(i);
        if (trace) visit(std::move(*trace));
      } catch (...) {
        std::lock_guard<std::mutex> lock(errorMutex);
        if (i < errorAt) {
          errorAt = i;
          error = std::current_exception();
        }
        stop = true;
      }
    }
  };
  const unsigned n = std::max(1u, std::min<unsigned>(threads, static_cast<unsigned>(files)));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < n; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  TraceScan scan;
  scan.path = reader.path();
  scan.manifest = reader.manifest();
  scan.warnings = reader.finish();
  scan.headers = reader.headers();
  return scan;
}

TraceScan scanTrace(const std::string& path, unsigned threads,
                    const std::function<void(RankTrace&&)>& visit) {
  TraceReader reader(path);
  return scanTrace(reader, threads, visit);
}

int32_t TraceScan::worldSize() const { return worldSizeOf(manifest, headers); }

std::vector<int32_t> TraceScan::missingRanks() const {
  return missingRanksOf(worldSize(), headers);
}

TraceSet readTrace(const std::string& path) {
  TraceSet set;
  std::mutex mutex;
  TraceScan scan = scanTrace(path, 1, [&](RankTrace&& trace) {
    std::lock_guard<std::mutex> lock(mutex);
    set.ranks.push_back(std::move(trace));
  });
  std::sort(set.ranks.begin(), set.ranks.end(),
            [](const RankTrace& a, const RankTrace& b) { return a.header.rank < b.header.rank; });
  set.path = std::move(scan.path);
  set.manifest = std::move(scan.manifest);
  set.warnings = std::move(scan.warnings);
  return set;
}

}  // namespace ringx::trace
