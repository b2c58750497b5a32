// Format detection and loading (see loader.h).
#include "viewer/model/loader.h"

#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "backend/common/error.h"
#include "backend/trace/codec.h"
#include "backend/trace/trace_dir.h"
#include "viewer/model/chrome_ingest.h"
#include "viewer/model/flight_ingest.h"
#include "viewer/model/ringx_ingest.h"

namespace ringx::viewer {
namespace {

// A directory of flight recorder dumps and no trace: what RINGX_DUMP_DIR holds.
bool isFlightDumpDirectory(const std::string& path) {
  bool dumps = false;
  std::error_code ec;
  for (const auto& item : std::filesystem::directory_iterator(path, ec)) {
    const std::string name = item.path().filename().string();
    if (name == trace::kManifestFile || name.rfind("rank-", 0) == 0) return false;  // a trace
    dumps |= name.rfind("flight-rank-", 0) == 0;
  }
  return dumps;
}

}  // namespace

TraceFormat detectFormat(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw IoError(strCat("cannot open '", path, "': ", std::strerror(errno),
                         " (give a ringx trace directory, a .ringx file or a Chrome trace .json)"));
  if (S_ISDIR(st.st_mode))
    return isFlightDumpDirectory(path) ? TraceFormat::kFlightDump : TraceFormat::kRingxDirectory;
  if (path.size() >= 13 && path.substr(path.size() - 13) == "manifest.json")
    return TraceFormat::kRingxDirectory;
  std::ifstream in(path, std::ios::binary);
  char head[64] = {};
  in.read(head, sizeof head);
  const size_t got = static_cast<size_t>(in.gcount());
  if (got >= sizeof trace::kMagic && std::memcmp(head, trace::kMagic, sizeof trace::kMagic) == 0)
    return TraceFormat::kRingxFile;
  // gzip (.json.gz, as the profiler's use_gzip=True writes): a Chrome trace,
  // which the reader decompresses and checks.
  if (startsLikeGzip(head, got)) return TraceFormat::kChromeJson;
  if (trace::looksLikeFlightDump(std::string_view(head, got))) return TraceFormat::kFlightDump;
  for (size_t i = 0; i < got; ++i) {
    const char c = head[i];
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '{' || c == '[') return TraceFormat::kChromeJson;
    break;
  }
  throw trace::FormatError(strCat("'", path,
                                  "' is neither a ringx trace (directory or .ringx file) nor a "
                                  "Chrome Trace Event JSON file (.json or .json.gz)"));
}

void loadTraces(TraceStore& store, const std::vector<std::string>& paths) {
  // ringx traces first, whatever the order given: a profiler file aligns to
  // its rank's ringx clock reference, which must be in the store by then.
  std::vector<std::string> chrome, dumps;
  for (const auto& path : paths) {
    switch (detectFormat(path)) {
      case TraceFormat::kRingxDirectory:
      case TraceFormat::kRingxFile:
        ingestTraceSet(store, trace::readTrace(path));
        break;
      case TraceFormat::kChromeJson:
        chrome.push_back(path);
        break;
      case TraceFormat::kFlightDump:
        dumps.push_back(path);
        break;
    }
  }
  // After the ringx traces too: a dump's rank moves onto its trace's clock.
  for (const auto& path : dumps) {
    const trace::FlightDumpSet set = trace::readFlightDumps(path);
    if (set.dumps.empty())
      throw trace::FormatError(strCat("no readable flight recorder dump in '", path, "'",
                                      set.warnings.empty() ? "" : ": " + set.warnings.front()));
    ingestFlightDumps(store, set);
  }
  for (const auto& path : chrome) ingestChromeTraceFile(store, path);
  store.finalize();
}

}  // namespace ringx::viewer
