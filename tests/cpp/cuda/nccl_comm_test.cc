// A one-rank NCCL communicator through ringx's loader (backend/transport/nccl/loader.h), on the
// GPU machine's one GPU: ncclGetUniqueId, ncclCommInitRank(nranks 1, rank 0), collectives and a
// send/receive to itself on small CUDA buffers, then ncclCommDestroy and ncclCommAbort. It
// proves the loader's declarations of NCCL's ABI against the real library (a 128-byte id passed
// by value, the enums' values, the stream argument). NCCL comes from RINGX_NCCL_LIBRARY, else
// the nvidia-nccl wheel beside the torch built against, else the system's libnccl.so.2. Skips
// with "no CUDA device" where there is none.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/device/cuda/reduce_kernels.h"
#include "backend/transport/nccl/loader.h"
#include "base/error.h"
#include "tests/cpp/cuda/gpu_test.h"

namespace ringx::transport::nccl {
namespace {

#define CUDA_OK(call)                                                              \
  do {                                                                             \
    const cudaError_t error_ = (call);                                             \
    ASSERT_EQ(error_, cudaSuccess) << #call << ": " << cudaGetErrorString(error_); \
  } while (0)

// The process's NCCL, or nullptr with `why`. `mustLoad`: a wheel beside torch is there, or
// RINGX_NCCL_LIBRARY names a library, so failing to load it is ringx's failure; with neither, the
// machine has no NCCL and the tests skip.
const Library* loadNccl(std::string* why, bool* mustLoad) {
  const std::string wheel = RINGX_NCCL_WHEEL_LIBRARY;
  struct stat info;
  const bool wheelHere = !wheel.empty() && stat(wheel.c_str(), &info) == 0;
  *mustLoad = wheelHere || getenv(kLibraryEnv);
  try {
    return &load(wheelHere ? std::vector<std::string>{wheel} : std::vector<std::string>{});
  } catch (const Error& e) {
    *why = e.what();
  }
  return nullptr;
}

#define NCCL_OK(api, call)                                                             \
  do {                                                                                 \
    const ncclResult_t result_ = (call);                                               \
    ASSERT_EQ(result_, ncclSuccess) << #call << ": " << (api).getErrorString(result_); \
  } while (0)

// Device memory for `count` floats, freed at the end of the scope.
struct DeviceFloats {
  explicit DeviceFloats(size_t count) : bytes(count * sizeof(float)) {
    if (cudaMalloc(&data, bytes) != cudaSuccess) data = nullptr;
  }
  ~DeviceFloats() { cudaFree(data); }
  float* data = nullptr;
  size_t bytes;
};

std::vector<float> fromDevice(const DeviceFloats& buffer) {
  std::vector<float> out(buffer.bytes / sizeof(float));
  cudaMemcpy(out.data(), buffer.data, buffer.bytes, cudaMemcpyDeviceToHost);
  return out;
}

class NcclOneRank : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    std::string why;
    bool mustLoad = false;
    library_ = loadNccl(&why, &mustLoad);
    if (!library_ && mustLoad) FAIL() << why;
    if (!library_) GTEST_SKIP() << "no libnccl.so.2 here: " << why;
    std::printf("NCCL %s from %s\n", library_->version().c_str(), library_->path().c_str());
    CUDA_OK(cudaSetDevice(0));
    CUDA_OK(cudaStreamCreate(&stream_));
    const Api& api = library_->api();
    ncclUniqueId id;
    NCCL_OK(api, api.getUniqueId(&id));
    NCCL_OK(api, api.commInitRank(&comm_, 1, id, 0));
    ASSERT_NE(comm_, nullptr);
  }
  void TearDown() override {
    if (comm_) library_->api().commDestroy(comm_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  const Library* library_ = nullptr;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

constexpr size_t kCount = 1000;

std::vector<float> ramp() {
  std::vector<float> out(kCount);
  for (size_t i = 0; i < kCount; ++i) out[i] = 0.5f * static_cast<float>(i) - 7.0f;
  return out;
}

TEST_F(NcclOneRank, CollectivesCopyTheOneRanksData) {
  const Api& api = library_->api();
  const std::vector<float> input = ramp();
  DeviceFloats send(kCount), recv(kCount), gathered(kCount);
  ASSERT_TRUE(send.data && recv.data && gathered.data);
  CUDA_OK(cudaMemcpy(send.data, input.data(), send.bytes, cudaMemcpyHostToDevice));
  // Out of place into buffers of other bytes, so a call that did nothing cannot pass.
  CUDA_OK(cudaMemset(recv.data, 0xff, recv.bytes));
  CUDA_OK(cudaMemset(gathered.data, 0xff, gathered.bytes));
  NCCL_OK(api, api.allReduce(send.data, recv.data, kCount, ncclFloat32, ncclSum, comm_, stream_));
  NCCL_OK(api, api.allGather(send.data, gathered.data, kCount, ncclFloat32, comm_, stream_));
  CUDA_OK(cudaStreamSynchronize(stream_));
  EXPECT_EQ(fromDevice(recv), input);
  EXPECT_EQ(fromDevice(gathered), input);

  CUDA_OK(cudaMemset(recv.data, 0xff, recv.bytes));
  CUDA_OK(cudaMemset(gathered.data, 0xff, gathered.bytes));
  NCCL_OK(api, api.broadcast(send.data, recv.data, kCount, ncclFloat32, 0, comm_, stream_));
  NCCL_OK(api, api.reduceScatter(send.data, gathered.data, kCount, ncclFloat32, ncclSum, comm_,
                                 stream_));
  CUDA_OK(cudaStreamSynchronize(stream_));
  EXPECT_EQ(fromDevice(recv), input);
  EXPECT_EQ(fromDevice(gathered), input);

  ncclResult_t asyncError = ncclInternalError;
  NCCL_OK(api, api.commGetAsyncError(comm_, &asyncError));
  EXPECT_EQ(asyncError, ncclSuccess);
}

TEST_F(NcclOneRank, ASendToItselfInAGroupArrives) {
  const Api& api = library_->api();
  const std::vector<float> input = ramp();
  DeviceFloats send(kCount), recv(kCount);
  ASSERT_TRUE(send.data && recv.data);
  CUDA_OK(cudaMemcpy(send.data, input.data(), send.bytes, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(recv.data, 0, recv.bytes));
  NCCL_OK(api, api.groupStart());
  NCCL_OK(api, api.send(send.data, kCount, ncclFloat32, 0, comm_, stream_));
  NCCL_OK(api, api.recv(recv.data, kCount, ncclFloat32, 0, comm_, stream_));
  NCCL_OK(api, api.groupEnd());
  CUDA_OK(cudaStreamSynchronize(stream_));
  EXPECT_EQ(fromDevice(recv), input);
}

TEST_F(NcclOneRank, AbortEndsACommunicator) {
  const Api& api = library_->api();
  NCCL_OK(api, api.commAbort(comm_));
  comm_ = nullptr;  // aborted: TearDown must not destroy it too
}

}  // namespace
}  // namespace ringx::transport::nccl
