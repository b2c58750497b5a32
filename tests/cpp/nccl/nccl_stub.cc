// A stand-in libnccl.so.2 for the loader's tests: NCCL's entry points with NCCL's C signatures
// (ints for its enums, void* for streams and communicators), doing nothing but recording which
// one was called last, so a test can check that each member of the loader's Api table calls the
// symbol of its name. Built twice (CMakeLists.txt, tests/python/test_nccl_loader.py):
//   as is                                  a library that loads, version 2.27.7
//   -DRINGX_NCCL_STUB_LEAVE_OUT_TWO        the same without ncclCommGetAsyncError and
//                                          ncclReduceScatter: one the loader must refuse
// No ringx header: the stub stands for a library built elsewhere.
#include <cstddef>
#include <cstring>

#ifndef RINGX_NCCL_STUB_VERSION
#define RINGX_NCCL_STUB_VERSION 22707  // NCCL_VERSION(2, 27, 7)
#endif

namespace {
const char* lastCall = "";
int fakeComm;  // what ncclCommInitRank hands out
}  // namespace

// NCCL's ncclUniqueId: 128 bytes, passed by value.
struct StubUniqueId {
  char internal[128];
};

#define RECORD() lastCall = __func__

extern "C" {

// Not NCCL's: the test's window into the stub.
const char* ringxNcclStubLastCall() { return lastCall; }

int ncclGetVersion(int* version) {
  RECORD();
  *version = RINGX_NCCL_STUB_VERSION;
  return 0;
}
int ncclGetUniqueId(void* id) {
  RECORD();
  std::memset(id, 0x5a, 128);
  return 0;
}
int ncclCommInitRank(void** comm, int nranks, StubUniqueId id, int rank) {
  RECORD();
  // A real id arrives whole, by value: check its last byte made the trip.
  *comm = id.internal[127] == 0x5a && rank < nranks ? &fakeComm : nullptr;
  return *comm ? 0 : 4;  // ncclInvalidArgument
}
int ncclCommDestroy(void*) {
  RECORD();
  return 0;
}
int ncclCommAbort(void*) {
  RECORD();
  return 0;
}
#ifndef RINGX_NCCL_STUB_LEAVE_OUT_TWO
int ncclCommGetAsyncError(void*, int* asyncError) {
  RECORD();
  *asyncError = 0;
  return 0;
}
#endif
const char* ncclGetErrorString(int result) {
  RECORD();
  return result == 0 ? "no error" : "stub error";
}
int ncclGroupStart() {
  RECORD();
  return 0;
}
int ncclGroupEnd() {
  RECORD();
  return 0;
}
int ncclSend(const void*, size_t, int, int, void*, void*) {
  RECORD();
  return 0;
}
int ncclRecv(void*, size_t, int, int, void*, void*) {
  RECORD();
  return 0;
}
int ncclAllReduce(const void*, void*, size_t, int, int, void*, void*) {
  RECORD();
  return 0;
}
int ncclBroadcast(const void*, void*, size_t, int, int, void*, void*) {
  RECORD();
  return 0;
}
int ncclAllGather(const void*, void*, size_t, int, void*, void*) {
  RECORD();
  return 0;
}
#ifndef RINGX_NCCL_STUB_LEAVE_OUT_TWO
int ncclReduceScatter(const void*, void*, size_t, int, int, void*, void*) {
  RECORD();
  return 0;
}
#endif

}  // extern "C"
