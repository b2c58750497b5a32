// NCCL loaded with dlopen: the search order, symbol resolution, and the process's one library
// (loader.h says why ringx loads it at run time).
#include "backend/transport/nccl/loader.h"

#include <dlfcn.h>
#include <link.h>

#include <climits>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <utility>

#include "base/error.h"

namespace ringx::transport::nccl {
namespace {

// Each Api member and the symbol it comes from. dlsym's void* becomes a function pointer the
// POSIX way (conditionally supported by C++, always by the platforms dlopen exists on).
struct Binding {
  const char* symbol;
  void (*assign)(Api& api, void* address);
};
#define RINGX_NCCL_BIND(member, symbol)                             \
  Binding {                                                         \
    symbol, [](Api& api, void* address) {                           \
      api.member = reinterpret_cast<decltype(api.member)>(address); \
    }                                                               \
  }
const Binding kBindings[] = {
    RINGX_NCCL_BIND(getVersion, "ncclGetVersion"),
    RINGX_NCCL_BIND(getUniqueId, "ncclGetUniqueId"),
    RINGX_NCCL_BIND(commInitRank, "ncclCommInitRank"),
    RINGX_NCCL_BIND(commDestroy, "ncclCommDestroy"),
    RINGX_NCCL_BIND(commAbort, "ncclCommAbort"),
    RINGX_NCCL_BIND(commGetAsyncError, "ncclCommGetAsyncError"),
    RINGX_NCCL_BIND(getErrorString, "ncclGetErrorString"),
    RINGX_NCCL_BIND(groupStart, "ncclGroupStart"),
    RINGX_NCCL_BIND(groupEnd, "ncclGroupEnd"),
    RINGX_NCCL_BIND(send, "ncclSend"),
    RINGX_NCCL_BIND(recv, "ncclRecv"),
    RINGX_NCCL_BIND(allReduce, "ncclAllReduce"),
    RINGX_NCCL_BIND(broadcast, "ncclBroadcast"),
    RINGX_NCCL_BIND(allGather, "ncclAllGather"),
    RINGX_NCCL_BIND(reduceScatter, "ncclReduceScatter"),
};
#undef RINGX_NCCL_BIND

std::string lastDlError() {
  const char* text = dlerror();
  return text ? text : "unknown dlopen error";
}

// dlopen's messages start with the path it was given; the report names the path already.
std::string withoutPath(std::string message, const std::string& path) {
  const std::string prefix = path + ": ";
  if (message.compare(0, prefix.size(), prefix) == 0) message.erase(0, prefix.size());
  return message;
}

// The file behind a handle: the loader's own name for it (the full path the search found, for
// "libnccl.so.2"), symlinks resolved, so that the report names the file really in use.
std::string realPathOf(void* handle, const std::string& fallback) {
  struct link_map* map = nullptr;
  std::string name = fallback;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name) {
    name = map->l_name;
  }
  char resolved[PATH_MAX];
  return realpath(name.c_str(), resolved) ? std::string(resolved) : name;
}

std::string joined(const std::vector<std::string>& parts, const char* separator) {
  std::string out;
  for (const auto& part : parts) out += (out.empty() ? "" : separator) + part;
  return out;
}

}  // namespace

const std::vector<std::string>& requiredSymbols() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& binding : kBindings) out.emplace_back(binding.symbol);
    return out;
  }();
  return names;
}

std::vector<Candidate> searchOrder(const std::vector<std::string>& candidates) {
  if (const char* named = std::getenv(kLibraryEnv); named && *named) {
    return {{named, kLibraryEnv}};
  }
  std::vector<Candidate> order;
  for (const auto& path : candidates) {
    if (!path.empty()) order.push_back({path, "candidate"});
  }
  order.push_back({kSystemLibrary, "system"});
  return order;
}

std::string decodeVersion(int code) {
  // NCCL_VERSION(X, Y, Z): X*1000 + Y*100 + Z up to 2.8, X*10000 + Y*100 + Z from 2.9 on (two
  // digits of minor version), so a code below 10000 is the old form.
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int minor = code >= 10000 ? code % 10000 / 100 : code % 1000 / 100;
  return strCat(major, ".", minor, ".", code % 100);
}

Library Library::open(const std::vector<Candidate>& order, std::vector<std::string>* tried) {
  std::vector<std::string> lines;
  for (const auto& candidate : order) {
    const std::string where = strCat(candidate.path, " (", candidate.source, ")");
    dlerror();  // clear an earlier error, so the next dlerror() is about this call
    // RTLD_LOCAL: NCCL's symbols stay out of the global namespace, where they could
    // interpose on another copy of NCCL in the process (torch's ProcessGroupNCCL).
    void* handle = dlopen(candidate.path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      lines.push_back(strCat(where, ": ", withoutPath(lastDlError(), candidate.path)));
      continue;
    }
    const std::string path = realPathOf(handle, candidate.path);
    Library library;
    std::vector<std::string> missing;
    for (const auto& binding : kBindings) {
      if (void* address = dlsym(handle, binding.symbol)) {
        binding.assign(library.api_, address);
      } else {
        missing.push_back(binding.symbol);
      }
    }
    if (!missing.empty()) {
      lines.push_back(strCat(path, " (", candidate.source, "): not a usable NCCL: it lacks ",
                             joined(missing, ", ")));
      dlclose(handle);
      continue;
    }
    int code = 0;
    if (const ncclResult_t result = library.api_.getVersion(&code); result != ncclSuccess) {
      lines.push_back(strCat(path, " (", candidate.source,
                             "): ncclGetVersion failed: ", library.api_.getErrorString(result)));
      dlclose(handle);
      continue;
    }
    library.handle_ = handle;
    library.versionCode_ = code;
    library.version_ = decodeVersion(code);
    library.path_ = path;
    lines.push_back(strCat(path, " (", candidate.source, "): loaded NCCL ", library.version_));
    if (tried) *tried = std::move(lines);
    return library;
  }
  const bool named = order.size() == 1 && order[0].source == kLibraryEnv;
  const char* whatToDo =
      named ? "point RINGX_NCCL_LIBRARY at a libnccl.so.2 of NCCL 2.x, or unset it to use the "
              "nvidia-nccl wheel beside torch or the system's libnccl.so.2"
            : "pip install nvidia-nccl-cu13 (nvidia-nccl-cu12 for a CUDA 12 torch) into torch's "
              "environment, or set RINGX_NCCL_LIBRARY to the path of a libnccl.so.2";
  std::string message = "ringx: could not load NCCL; tried:";
  for (const auto& line : lines) message += "\n  " + line;
  if (tried) *tried = std::move(lines);
  RINGX_THROW(Error, message, "\nTo fix: ", whatToDo);
}

Library::Library(Library&& other) noexcept { *this = std::move(other); }

Library& Library::operator=(Library&& other) noexcept {
  if (this != &other) {
    if (handle_) dlclose(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    api_ = std::exchange(other.api_, Api{});
    versionCode_ = std::exchange(other.versionCode_, 0);
    version_ = std::move(other.version_);
    path_ = std::move(other.path_);
  }
  return *this;
}

Library::~Library() {
  if (handle_) dlclose(handle_);
}

namespace {

// The process's library. Never destroyed: unloading NCCL at exit, while a communicator or
// NCCL's own threads may still be alive, could only crash.
struct ProcessLibrary {
  std::mutex mutex;
  std::optional<Library> library;
  LoadReport report;
};
ProcessLibrary& processLibrary() {
  static auto* state = new ProcessLibrary;
  return *state;
}

}  // namespace

const Library& load(const std::vector<std::string>& candidates) {
  auto& state = processLibrary();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (!state.report.attempted) {
    state.report.attempted = true;
    try {
      state.library.emplace(Library::open(searchOrder(candidates), &state.report.tried));
      state.report.loaded = true;
      state.report.version = state.library->version();
      state.report.path = state.library->path();
    } catch (const Error& e) {
      state.report.error = e.what();
    }
  }
  if (!state.library) throw Error(state.report.error);  // the first call's text, as it was
  return *state.library;
}

LoadReport report() {
  auto& state = processLibrary();
  std::lock_guard<std::mutex> lock(state.mutex);
  return state.report;
}

}  // namespace ringx::transport::nccl
