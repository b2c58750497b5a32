// NCCL, loaded at run time: the wire between hosts for CUDA tensors when RINGX_GPU_WIRE=nccl.
//
// ringx neither links NCCL nor needs its headers to build: torch's CUDA wheels bring their own
// libnccl.so.2 (the nvidia-nccl-cu12/cu13 wheel beside torch), a CPU build never needs one, and
// a job that never asks for the NCCL wire must not pay for loading 250 MB or fail for lack of
// it. So the library is opened with dlopen on first use, every entry point ringx calls is
// resolved then (a library that lacks one fails at once, naming each missing symbol, never at
// the first collective that needs it), and what was found is kept for ringx.nccl() to report.
//
// The few ABI types below are declared here from NCCL 2.x's nccl.h, not included: an opaque
// communicator pointer, the 128-byte unique id, and the int enums' values (stable since 2.0;
// the values ringx uses never changed).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ringx::transport::nccl {

// ---- NCCL's ABI, as nccl.h declares it --------------------------------------------------------
struct ncclComm;
using ncclComm_t = ncclComm*;

inline constexpr size_t kUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
struct ncclUniqueId {
  char internal[kUniqueIdBytes];
};

enum ncclResult_t : int {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,  // a non-blocking communicator is still working
  ncclTimeout = 8,     // recent releases only; older ones never return it
};

enum ncclDataType_t : int {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9,
};

enum ncclRedOp_t : int {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
};

static_assert(sizeof(ncclUniqueId) == 128 && sizeof(ncclResult_t) == 4 &&
                  sizeof(ncclDataType_t) == 4 && sizeof(ncclRedOp_t) == 4,
              "NCCL's ABI: a 128-byte id, and C enums the size of an int");

// Every entry point ringx calls, resolved when the library loads. Streams are cudaStream_t
// values passed as void* (nullptr = the legacy default stream), as in backend/device/cuda.
struct Api {
  ncclResult_t (*getVersion)(int* version);
  ncclResult_t (*getUniqueId)(ncclUniqueId* id);
  ncclResult_t (*commInitRank)(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank);
  ncclResult_t (*commDestroy)(ncclComm_t comm);
  ncclResult_t (*commAbort)(ncclComm_t comm);
  ncclResult_t (*commGetAsyncError)(ncclComm_t comm, ncclResult_t* asyncError);
  const char* (*getErrorString)(ncclResult_t result);
  ncclResult_t (*groupStart)();
  ncclResult_t (*groupEnd)();
  ncclResult_t (*send)(const void* sendbuff, size_t count, ncclDataType_t type, int peer,
                       ncclComm_t comm, void* stream);
  ncclResult_t (*recv)(void* recvbuff, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                       void* stream);
  ncclResult_t (*allReduce)(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t type,
                            ncclRedOp_t op, ncclComm_t comm, void* stream);
  ncclResult_t (*broadcast)(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t type,
                            int root, ncclComm_t comm, void* stream);
  ncclResult_t (*allGather)(const void* sendbuff, void* recvbuff, size_t sendcount,
                            ncclDataType_t type, ncclComm_t comm, void* stream);
  ncclResult_t (*reduceScatter)(const void* sendbuff, void* recvbuff, size_t recvcount,
                                ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm, void* stream);
};

// The symbol each Api member is resolved from, in Api's order.
const std::vector<std::string>& requiredSymbols();

// ---- where the library comes from ------------------------------------------------------------
inline constexpr const char* kLibraryEnv = "RINGX_NCCL_LIBRARY";
inline constexpr const char* kSystemLibrary = "libnccl.so.2";

// One place to look, and who named it (for the report: "RINGX_NCCL_LIBRARY", "candidate",
// "system").
struct Candidate {
  std::string path;
  std::string source;
};

// The places load() tries, in order. RINGX_NCCL_LIBRARY, when set, is the only one: a library
// the user named is never silently replaced by another. Otherwise `candidates` (the Python
// package passes the nvidia-nccl wheel's libnccl.so.2 beside torch), then libnccl.so.2 found by
// the dynamic loader's own search (LD_LIBRARY_PATH, ld.so.cache).
std::vector<Candidate> searchOrder(const std::vector<std::string>& candidates);

// "2.27.7" from ncclGetVersion's code: major*10000 + minor*100 + patch since 2.9, major*1000 +
// minor*100 + patch before (NCCL_VERSION in nccl.h).
std::string decodeVersion(int code);

// ---- an opened library -----------------------------------------------------------------------
class Library {
 public:
  // Opens the first of `order` that dlopen can open and that defines every required symbol,
  // and asks it its version. A place that cannot be opened, or lacks symbols (then each missing
  // one is named), is recorded in `tried` and the next one is tried. Throws ringx::Error when
  // none loads; its text says what was tried and what to do, and `tried` holds one line each.
  static Library open(const std::vector<Candidate>& order, std::vector<std::string>* tried);

  Library(Library&& other) noexcept;
  Library& operator=(Library&& other) noexcept;
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  ~Library();  // dlclose

  const Api& api() const { return api_; }
  int versionCode() const { return versionCode_; }
  const std::string& version() const { return version_; }  // "2.27.7"
  // The file the dynamic loader mapped, symlinks resolved (dlinfo's link map): for the system's
  // libnccl.so.2, where the search found it.
  const std::string& path() const { return path_; }

 private:
  Library() = default;
  void* handle_ = nullptr;
  Api api_{};
  int versionCode_ = 0;
  std::string version_;
  std::string path_;
};

// ---- the process's one library ---------------------------------------------------------------
// What load() found, for diagnostics (ringx.nccl(), ringx.features()).
struct LoadReport {
  bool attempted = false;  // load() has run (it runs once)
  bool loaded = false;
  std::string version;             // "2.27.7" when loaded
  std::string path;                // the real path when loaded
  std::vector<std::string> tried;  // "PATH (SOURCE): what happened", in order
  std::string error;               // when it failed: the whole message
};

// The library, opened on the first call from searchOrder(candidates) and kept for the life of
// the process; later calls return it (their candidates are not looked at) or throw the first
// call's error again. Thread-safe: concurrent first calls load once.
const Library& load(const std::vector<std::string>& candidates = {});

// What load() found, without loading (attempted is false before the first load()).
LoadReport report();

}  // namespace ringx::transport::nccl
