// The NCCL loader (backend/transport/nccl/loader.h) against two stub libraries built beside this
// test (nccl_stub.cc: one complete, one without two symbols): the search order and
// RINGX_NCCL_LIBRARY's precedence, version and path of what loaded, the errors of a library
// that lacks symbols and of a path with no file, each Api member reaching the symbol of its
// name, and the process's one library loading once. No GPU and no real NCCL needed; a real
// libnccl.so.2 (the nvidia-nccl wheel beside the torch built against, or
// RINGX_NCCL_TEST_LIBRARY) is loaded too where there is one.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cstdio>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backend/transport/nccl/loader.h"
#include "base/error.h"

namespace ringx::transport::nccl {
namespace {

const std::string kGoodStub = RINGX_NCCL_STUB_GOOD;
const std::string kBadStub = RINGX_NCCL_STUB_BAD;
const std::string kNoFile = "/nonexistent/ringx-test/libnccl.so.2";

std::string realPath(const std::string& path) {
  char out[PATH_MAX];
  return realpath(path.c_str(), out) ? out : path;
}

// Sets (or unsets, with nullptr) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    value ? setenv(name, value, 1) : unsetenv(name);
  }
  ~ScopedEnv() { old_.empty() ? unsetenv(name_) : setenv(name_, old_.c_str(), 1); }

 private:
  const char* name_;
  std::string old_;
};

std::string loadError(const std::vector<Candidate>& order, std::vector<std::string>* tried) {
  try {
    Library::open(order, tried);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "loaded, but should have failed";
  return "";
}

TEST(NcclLoader, DecodesBothFormsOfTheVersionCode) {
  EXPECT_EQ(decodeVersion(22707), "2.27.7");
  EXPECT_EQ(decodeVersion(23007), "2.30.7");
  EXPECT_EQ(decodeVersion(21903), "2.19.3");
  EXPECT_EQ(decodeVersion(2804), "2.8.4");  // NCCL 2.8 and older: major*1000 + minor*100
}

TEST(NcclLoader, SearchesCandidatesThenTheSystemsLibrary) {
  ScopedEnv env(kLibraryEnv, nullptr);
  const auto order = searchOrder({"/a/libnccl.so.2", "", "/b/libnccl.so.2"});
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[0].path, "/a/libnccl.so.2");
  EXPECT_EQ(order[0].source, "candidate");
  EXPECT_EQ(order[1].path, "/b/libnccl.so.2");
  EXPECT_EQ(order[2].path, "libnccl.so.2");
  EXPECT_EQ(order[2].source, "system");
  ScopedEnv empty(kLibraryEnv, "");  // set but empty: as unset
  EXPECT_EQ(searchOrder({}).size(), 1u);
}

TEST(NcclLoader, RingxNcclLibraryIsTheOnlyPlaceTriedWhenSet) {
  ScopedEnv env(kLibraryEnv, "/chosen/libnccl.so.2");
  const auto order = searchOrder({"/a/libnccl.so.2"});
  ASSERT_EQ(order.size(), 1u);
  EXPECT_EQ(order[0].path, "/chosen/libnccl.so.2");
  EXPECT_EQ(order[0].source, "RINGX_NCCL_LIBRARY");
}

TEST(NcclLoader, LoadsTheGoodStubWithItsVersionAndPath) {
  std::vector<std::string> tried;
  const Library library = Library::open({{kGoodStub, "candidate"}}, &tried);
  EXPECT_EQ(library.versionCode(), 22707);
  EXPECT_EQ(library.version(), "2.27.7");
  EXPECT_EQ(library.path(), realPath(kGoodStub));
  ASSERT_EQ(tried.size(), 1u);
  EXPECT_NE(tried[0].find("loaded NCCL 2.27.7"), std::string::npos) << tried[0];
}

TEST(NcclLoader, EveryApiMemberCallsTheSymbolOfItsName) {
  const Library library = Library::open({{kGoodStub, "candidate"}}, nullptr);
  // The same file, so dlopen hands back the loader's handle: the stub's call record is shared.
  void* handle = dlopen(kGoodStub.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto lastCall = reinterpret_cast<const char* (*)()>(dlsym(handle, "ringxNcclStubLastCall"));
  ASSERT_NE(lastCall, nullptr);
  const Api& api = library.api();
  int version = 0;
  ncclUniqueId id{};
  ncclComm_t comm = nullptr;
  ncclResult_t asyncError = ncclInternalError;
  float buffer[4] = {};
  // In Api's order, which requiredSymbols() follows.
  std::vector<std::string> called;
  auto record = [&](ncclResult_t result) {
    EXPECT_EQ(result, ncclSuccess) << lastCall();
    called.push_back(lastCall());
  };
  record(api.getVersion(&version));
  record(api.getUniqueId(&id));
  record(api.commInitRank(&comm, 1, id, 0));  // the stub checks the id arrived whole
  EXPECT_NE(comm, nullptr);
  record(api.commDestroy(comm));
  record(api.commAbort(comm));
  record(api.commGetAsyncError(comm, &asyncError));
  EXPECT_EQ(asyncError, ncclSuccess);
  EXPECT_STREQ(api.getErrorString(ncclInvalidUsage), "stub error");
  called.push_back(lastCall());
  record(api.groupStart());
  record(api.groupEnd());
  record(api.send(buffer, 4, ncclFloat32, 0, comm, nullptr));
  record(api.recv(buffer, 4, ncclFloat32, 0, comm, nullptr));
  record(api.allReduce(buffer, buffer, 4, ncclFloat32, ncclSum, comm, nullptr));
  record(api.broadcast(buffer, buffer, 4, ncclFloat32, 0, comm, nullptr));
  record(api.allGather(buffer, buffer, 4, ncclFloat32, comm, nullptr));
  record(api.reduceScatter(buffer, buffer, 4, ncclFloat32, ncclSum, comm, nullptr));
  EXPECT_EQ(called, requiredSymbols());
  EXPECT_EQ(requiredSymbols().size(), 15u);
  dlclose(handle);
}

TEST(NcclLoader, ALibraryMissingSymbolsNamesEachOneAndItsPath) {
  std::vector<std::string> tried;
  const std::string message = loadError({{kBadStub, "candidate"}}, &tried);
  EXPECT_NE(message.find(realPath(kBadStub)), std::string::npos) << message;
  EXPECT_NE(message.find("lacks ncclCommGetAsyncError, ncclReduceScatter"), std::string::npos)
      << message;
  EXPECT_EQ(message.find("ncclSend"), std::string::npos) << "names a symbol it has: " << message;
  EXPECT_NE(message.find("pip install nvidia-nccl-cu13"), std::string::npos) << message;
  ASSERT_EQ(tried.size(), 1u);
  EXPECT_NE(tried[0].find("ncclReduceScatter"), std::string::npos);
}

TEST(NcclLoader, AMissingFileSaysWhatWasTriedAndWhatToDo) {
  std::vector<std::string> tried;
  const std::string message = loadError({{kNoFile, "candidate"}}, &tried);
  EXPECT_NE(message.find("could not load NCCL; tried:"), std::string::npos) << message;
  EXPECT_NE(message.find(kNoFile + " (candidate): "), std::string::npos) << message;
  EXPECT_NE(message.find("No such file"), std::string::npos) << message;
  EXPECT_NE(message.find("pip install nvidia-nccl-cu13"), std::string::npos) << message;
  EXPECT_NE(message.find("set RINGX_NCCL_LIBRARY"), std::string::npos) << message;
  EXPECT_EQ(tried.size(), 1u);
}

TEST(NcclLoader, GoesOnPastPlacesThatFailAndReportsEach) {
  std::vector<std::string> tried;
  const Library library = Library::open(
      {{kNoFile, "candidate"}, {kBadStub, "candidate"}, {kGoodStub, "candidate"}}, &tried);
  EXPECT_EQ(library.path(), realPath(kGoodStub));
  ASSERT_EQ(tried.size(), 3u);
  EXPECT_NE(tried[0].find(kNoFile), std::string::npos) << tried[0];
  EXPECT_NE(tried[1].find("lacks ncclCommGetAsyncError"), std::string::npos) << tried[1];
  EXPECT_NE(tried[2].find("loaded NCCL 2.27.7"), std::string::npos) << tried[2];
}

TEST(NcclLoader, RingxNcclLibraryTakesPrecedenceOverCandidates) {
  {
    ScopedEnv env(kLibraryEnv, kGoodStub.c_str());
    std::vector<std::string> tried;
    const Library library = Library::open(searchOrder({kBadStub}), &tried);
    EXPECT_EQ(library.path(), realPath(kGoodStub));
    ASSERT_EQ(tried.size(), 1u);
    EXPECT_NE(tried[0].find("(RINGX_NCCL_LIBRARY)"), std::string::npos) << tried[0];
  }
  {
    // A library the user named that does not load is an error, not a reason to take another.
    ScopedEnv env(kLibraryEnv, kNoFile.c_str());
    std::vector<std::string> tried;
    const std::string message = loadError(searchOrder({kGoodStub}), &tried);
    EXPECT_NE(message.find(kNoFile + " (RINGX_NCCL_LIBRARY)"), std::string::npos) << message;
    EXPECT_NE(message.find("unset it"), std::string::npos) << message;
    EXPECT_EQ(message.find(kGoodStub), std::string::npos) << message;
    EXPECT_EQ(tried.size(), 1u);
  }
}

// The only test that calls load(): the process's library loads once, whoever asks first.
TEST(NcclLoader, TheProcessLibraryLoadsOnceOnFirstUse) {
  ScopedEnv env(kLibraryEnv, nullptr);
  EXPECT_FALSE(report().attempted);  // nothing loads until asked
  std::vector<const Library*> seen(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < seen.size(); ++i) {
    threads.emplace_back([&, i] { seen[i] = &load({kGoodStub}); });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(std::set<const Library*>(seen.begin(), seen.end()).size(), 1u);
  const LoadReport first = report();
  EXPECT_TRUE(first.attempted);
  EXPECT_TRUE(first.loaded);
  EXPECT_EQ(first.version, "2.27.7");
  EXPECT_EQ(first.path, realPath(kGoodStub));
  EXPECT_TRUE(first.error.empty()) << first.error;
  // Later calls get the same library; their candidates are not looked at.
  EXPECT_EQ(&load({kBadStub}), seen[0]);
  EXPECT_EQ(report().tried, first.tried);
}

// A real NCCL answers ncclGetVersion without a GPU: where one is at hand, load it.
TEST(NcclLoader, ARealLibncclLoadsWithoutAGpu) {
  std::string path = RINGX_NCCL_WHEEL_LIBRARY;
  if (const char* named = getenv("RINGX_NCCL_TEST_LIBRARY")) path = named;
  struct stat info;
  if (path.empty() || stat(path.c_str(), &info) != 0) {
    GTEST_SKIP() << "no real libnccl.so.2 here (the nvidia-nccl wheel beside torch, or "
                    "RINGX_NCCL_TEST_LIBRARY)";
  }
  const Library library = Library::open({{path, "candidate"}}, nullptr);
  EXPECT_TRUE(std::regex_match(library.version(), std::regex(R"(2\.\d+\.\d+)")))
      << library.version();
  EXPECT_EQ(library.path(), realPath(path));
  EXPECT_NE(library.api().getErrorString(ncclSuccess), nullptr);
  std::printf("real NCCL %s (code %d) from %s\n", library.version().c_str(), library.versionCode(),
              library.path().c_str());
}

}  // namespace
}  // namespace ringx::transport::nccl
