// Format detection and loading (see loader.h).
#include "viewer/model/loader.h"

#include <sys/stat.h>

#include <cstring>
#include <fstream>

#include "backend/common/error.h"
#include "backend/trace/codec.h"
#include "backend/trace/trace_dir.h"
#include "viewer/model/chrome_ingest.h"
#include "viewer/model/ringx_ingest.h"

namespace ringx::viewer {

TraceFormat detectFormat(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw IoError(strCat("cannot open '", path, "': ", std::strerror(errno),
                         " (give a ringx trace directory, a .ringx file or a Chrome trace .json)"));
  if (S_ISDIR(st.st_mode)) return TraceFormat::kRingxDirectory;
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
  std::vector<std::string> chrome;
  for (const auto& path : paths) {
    switch (detectFormat(path)) {
      case TraceFormat::kRingxDirectory:
      case TraceFormat::kRingxFile:
        ingestTraceSet(store, trace::readTrace(path));
        break;
      case TraceFormat::kChromeJson:
        chrome.push_back(path);
        break;
    }
  }
  for (const auto& path : chrome) ingestChromeTraceFile(store, path);
  store.finalize();
}

}  // namespace ringx::viewer
