// The stream-ordering logic (backend/device/stream_ordering.h) on real CUDA streams: a
// collective whose device work is a ringx reduction kernel, ordered after the caller's work and
// before the caller's later work, its future completed on a completions queue, host gates and
// signals, and GPU-side timing from timed events. Skips with "no CUDA device" where there is
// none (CI, the development machine); runs on the GPU machine. The same logic is tested
// without a GPU in tests/cpp/stream_ordering_test.cc.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <vector>

#include "backend/device/cuda/cuda_stream.h"
#include "backend/device/cuda/reduce_kernels.h"
#include "backend/device/stream_ordering.h"
#include "backend/device/work_queue.h"
#include "base/error.h"
#include "tests/cpp/cuda/gpu_test.h"

namespace ringx::cuda {
namespace {

void check(cudaError_t error) { ASSERT_EQ(error, cudaSuccess) << cudaGetErrorString(error); }

// Spins on the GPU for about `cycles` clock cycles: stream work that takes long enough for an
// unordered reader to run first.
__global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

TEST(CudaStream, CollectiveReadsWhatTheCallerWroteAndTheCallerSeesItsResult) {
  SKIP_WITHOUT_GPU();
  constexpr size_t kCount = 1 << 20;
  auto caller = CudaStream::create(0, false);
  auto comm = CudaStream::create(0, true);
  float *input = nullptr, *output = nullptr;
  check(cudaMalloc(&input, kCount * sizeof(float)));
  check(cudaMalloc(&output, kCount * sizeof(float)));
  cudaStream_t callerStream = static_cast<cudaStream_t>(caller->handle());
  check(cudaMemsetAsync(output, 0, kCount * sizeof(float), callerStream));
  // Load the reduction kernel now: with CUDA's lazy module loading (the default), a kernel's
  // first launch loads its module, which waits for the kernels running on the device (seen on
  // an H100: the spin below had finished by the time enqueue returned).
  reduce(ReduceOp::kSum, DataType::kFloat32, output, output, output, 1,
         static_cast<cudaStream_t>(comm->handle()));
  check(cudaStreamSynchronize(static_cast<cudaStream_t>(comm->handle())));
  // The caller's compute: a long spin, then writing the input (every float 1.0f = 0x3F800000;
  // memset writes bytes, so 0x3F3F3F3F, about 0.747).
  spin<<<1, 1, 0, callerStream>>>(200'000'000);
  check(cudaGetLastError());
  check(cudaMemsetAsync(input, 0x3F, kCount * sizeof(float), callerStream));

  WorkQueue completions;
  std::promise<std::exception_ptr> completed;
  auto work = device::OrderedCollective::enqueue(
      *caller, *comm,
      [&](device::DeviceStream& s) {
        reduce(ReduceOp::kSum, DataType::kFloat32, output, input, input, kCount,
               static_cast<CudaStream&>(s).handle());
      },
      nullptr, [&](std::exception_ptr error) { completed.set_value(error); }, completions);
  EXPECT_FALSE(work->isCompleted());  // behind the caller's spin
  work->blockStream(*caller);
  std::vector<float> host(kCount);
  check(cudaMemcpyAsync(host.data(), output, kCount * sizeof(float), cudaMemcpyDeviceToHost,
                        callerStream));
  check(cudaStreamSynchronize(callerStream));
  EXPECT_TRUE(work->isCompleted());
  EXPECT_EQ(completed.get_future().get(), nullptr);
  float expected;
  const uint32_t bits = 0x3F3F3F3Fu;
  std::memcpy(&expected, &bits, 4);
  for (size_t i = 0; i < kCount; i += 4099) ASSERT_EQ(host[i], expected + expected) << i;
  cudaFree(input);
  cudaFree(output);
}

TEST(CudaStream, FutureReleasesTheBuffersOnlyAfterTheDeviceWork) {
  SKIP_WITHOUT_GPU();
  auto caller = CudaStream::create(0, false);
  auto comm = CudaStream::create(0, true);
  auto buffer = std::make_shared<int>(1);
  std::weak_ptr<int> watch = buffer;
  WorkQueue completions;
  std::promise<void> released;
  auto work = device::OrderedCollective::enqueue(
      *caller, *comm,
      [](device::DeviceStream& s) {
        spin<<<1, 1, 0, static_cast<cudaStream_t>(static_cast<CudaStream&>(s).handle())>>>(
            100'000'000);
      },
      std::move(buffer), [&](std::exception_ptr) { released.set_value(); }, completions);
  EXPECT_FALSE(watch.expired());  // the spin is still running
  released.get_future().wait();
  EXPECT_TRUE(watch.expired());
  EXPECT_TRUE(work->isCompleted());
}

TEST(CudaStream, StagedCollectiveCopiesOutRunsOnTheHostAndCopiesBackIn) {
  SKIP_WITHOUT_GPU();
  constexpr size_t kCount = 1 << 16;
  auto caller = CudaStream::create(0, false);
  auto comm = CudaStream::create(0, true);
  WorkQueue host;  // plays the group's communication thread
  WorkQueue completions;
  int* tensor = nullptr;
  int *stagedIn = nullptr, *stagedOut = nullptr;
  check(cudaMalloc(&tensor, kCount * sizeof(int)));
  check(cudaMallocHost(&stagedIn, kCount * sizeof(int)));
  check(cudaMallocHost(&stagedOut, kCount * sizeof(int)));
  cudaStream_t callerStream = static_cast<cudaStream_t>(caller->handle());
  spin<<<1, 1, 0, callerStream>>>(50'000'000);
  check(cudaMemsetAsync(tensor, 0x01, kCount * sizeof(int), callerStream));  // 0x01010101
  auto streamOf = [](device::DeviceStream& s) {
    return static_cast<cudaStream_t>(static_cast<CudaStream&>(s).handle());
  };
  auto work = device::OrderedCollective::enqueueStaged(
      *caller, *comm,
      [&](device::DeviceStream& s) {
        check(cudaMemcpyAsync(stagedIn, tensor, kCount * sizeof(int), cudaMemcpyDeviceToHost,
                              streamOf(s)));
      },
      [&](std::shared_ptr<device::HostSignal> staged,
          device::OrderedCollective::HostFinished finished) {
        host.submit([&, staged, finished] {
          ASSERT_TRUE(device::waitUntilReached(*staged, Clock::now() + std::chrono::minutes(1)));
          for (size_t i = 0; i < kCount; ++i) stagedOut[i] = stagedIn[i] + static_cast<int>(i);
          finished(nullptr);
        });
      },
      [&](device::DeviceStream& s) {
        check(cudaMemcpyAsync(tensor, stagedOut, kCount * sizeof(int), cudaMemcpyHostToDevice,
                              streamOf(s)));
      },
      nullptr, nullptr, completions);
  work->blockStream(*caller);
  std::vector<int> result(kCount);
  check(cudaMemcpyAsync(result.data(), tensor, kCount * sizeof(int), cudaMemcpyDeviceToHost,
                        callerStream));
  check(cudaStreamSynchronize(callerStream));
  for (size_t i = 0; i < kCount; i += 97) ASSERT_EQ(result[i], 0x01010101 + int(i)) << i;
  work->synchronize();
  cudaFree(tensor);
  cudaFreeHost(stagedIn);
  cudaFreeHost(stagedOut);
}

// A staged call whose arguments are refused opens its gate at once, while the calls before it
// are still on the wire: the stream must still stop at their gates.
TEST(CudaStream, AGateOpenedEarlyLetsTheStreamPastItOnlyAfterTheGatesBefore) {
  SKIP_WITHOUT_GPU();
  auto stream = CudaStream::create(0, false);
  auto first = stream->waitForHost();
  auto afterFirst = stream->record();
  auto second = stream->waitForHost();
  auto afterSecond = stream->record();
  auto signal = stream->signalHost();
  second->open();
  // Nothing past a closed gate can run, however long we look.
  for (int i = 0; i < 100; ++i) ASSERT_FALSE(afterFirst->query());
  EXPECT_FALSE(afterSecond->query());
  EXPECT_FALSE(device::waitUntilReached(*signal, Clock::now()));
  first->open();
  afterSecond->synchronize();  // both open now: hangs here if the early open was lost
  EXPECT_TRUE(device::waitUntilReached(*signal, Clock::now() + std::chrono::minutes(1)));
  EXPECT_TRUE(afterFirst->query());
  auto third = stream->waitForHost();  // later gates count on from there
  auto afterThird = stream->record();
  EXPECT_FALSE(afterThird->query());
  third->open();
  afterThird->synchronize();
  EXPECT_THROW(third->open(), Error);  // a gate opens once
}

TEST(CudaStream, TimedEventsMeasureTheStreamsWork) {
  SKIP_WITHOUT_GPU();
  auto stream = CudaStream::create(0, false);
  auto start = stream->recordTimed();
  spin<<<1, 1, 0, static_cast<cudaStream_t>(stream->handle())>>>(50'000'000);
  auto end = stream->recordTimed();
  end->synchronize();
  const float ms = CudaStream::elapsedMilliseconds(*start, *end);
  EXPECT_GT(ms, 1.0f);  // 50M cycles at no more than ~2 GHz is at least 25 ms
  auto untimed = stream->record();
  untimed->synchronize();
  EXPECT_THROW(CudaStream::elapsedMilliseconds(*start, *untimed), InvalidArgument);
}

}  // namespace
}  // namespace ringx::cuda
