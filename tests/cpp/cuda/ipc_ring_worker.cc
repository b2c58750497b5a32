// One rank of a device-ring test or bench on CUDA, as a fresh process (a forked child of a
// process that touched CUDA cannot use CUDA): ipc_ring_test.cc and bench/cuda_ring.py start
// `size` of these on one GPU, rendezvousing through a directory store.
//
//   ringx_cuda_ring_worker <scenario> <rank> <size> <store dir> [max bytes]
//     matrix   every collective, dtype, op and edge size on device memory (device_ring_matrix.h)
//     die      a large allreduce during which rank size-1 exits: the others check their error
//     bench    allreduce busbw of the IPC ring from 4 KiB to [max bytes], and (rank 0) the
//              device-to-device copy bandwidth of cudaMemcpy, one line each as JSON
// Exit status 0 when the rank's checks passed; otherwise the reason is on stderr.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "../device_ring_matrix.h"
#include "../process_ranks.h"
#include "backend/device/cuda/ipc_ring.h"

namespace ringx::device_ring::testing {
namespace {

void cudaCheck(cudaError_t e, const char* what) {
  RINGX_CHECK(e == cudaSuccess, what, ": ", cudaGetErrorString(e));
}

Buffers deviceBuffers() {
  return {[](const std::vector<char>& bytes) {
            void* p = nullptr;
            cudaCheck(cudaMalloc(&p, bytes.size() + 1), "cudaMalloc");
            cudaCheck(cudaMemcpy(p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), "upload");
            return p;
          },
          [](const void* p, size_t n) {
            std::vector<char> out(n);
            cudaCheck(cudaMemcpy(out.data(), p, n, cudaMemcpyDeviceToHost), "download");
            return out;
          },
          [](void* p) { cudaFree(p); }};
}

std::unique_ptr<DeviceRing> makeRing(Store& store, int rank, int size, const Geometry& g) {
  return std::make_unique<DeviceRing>(store, "ring", rank, size,
                                      cuda::IpcRingInstance::create(0, nullptr), g, soon(120));
}

// Fewer, larger slots than the CPU test's: ranks sharing one GPU take turns on it, and every
// hand-over can cost a time slice.
Geometry gpuTestGeometry() {
  Geometry g;
  g.channels = 2;
  g.depth = 3;
  g.slotBytes = 4096;
  g.oneShotBytes = 512;
  return g;
}

void matrix(int rank, int size, Store& store) {
  auto ring = makeRing(store, rank, size, gpuTestGeometry());
  const std::string wrong = runMatrix(*ring, matrixCounts(size), deviceBuffers());
  RINGX_CHECK(wrong.empty(), wrong);
}

void die(int rank, int size, Store& store) {
  auto ring = makeRing(store, rank, size, gpuTestGeometry());
  const size_t count = 64 << 20;  // 256 MiB of float32 in 4 KiB segments
  void* data = nullptr;
  cudaCheck(cudaMalloc(&data, count * sizeof(float)), "cudaMalloc");
  if (rank == size - 1) {
    ring->start(RingOp::kAllreduce, data, data, count, DataType::kFloat32, ReduceOp::kSum,
                "allreduce");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::_Exit(0);
  }
  try {
    ring->allreduce(data, data, count, DataType::kFloat32, ReduceOp::kSum, soon(120));
  } catch (const PeerError& e) {
    const std::string text = e.what();
    RINGX_CHECK(text.find("rank " + std::to_string(size - 1)) != std::string::npos &&
                    text.find("died") != std::string::npos,
                "the dead rank is not named: ", text);
    return;
  }
  RINGX_THROW(Error, "the allreduce succeeded without rank ", size - 1);
}

void bench(int rank, int size, Store& store, size_t maxBytes) {
  auto ring = makeRing(store, rank, size, cuda::defaultGpuGeometry());
  void* data = nullptr;
  cudaCheck(cudaMalloc(&data, maxBytes), "cudaMalloc");
  cudaCheck(cudaMemset(data, 0, maxBytes), "cudaMemset");
  for (size_t bytes = 4096; bytes <= maxBytes; bytes *= 4) {
    const uint64_t count = bytes / sizeof(float);
    const int iterations = bytes <= (1 << 20) ? 50 : bytes <= (64 << 20) ? 10 : 3;
    ring->allreduce(data, data, count, DataType::kFloat32, ReduceOp::kSum, soon(300));  // warm
    const auto begin = Clock::now();
    for (int i = 0; i < iterations; ++i) {
      ring->allreduce(data, data, count, DataType::kFloat32, ReduceOp::kSum, soon(300));
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - begin).count() / iterations;
    // Bus bandwidth as nccl-tests defines it for allreduce: bytes * 2(n-1)/n per second.
    const double busbw = bytes * 2.0 * (size - 1) / size / seconds;
    if (rank == 0) {
      std::printf(
          "{\"what\": \"ipc_ring\", \"ranks\": %d, \"bytes\": %zu, \"seconds\": %.9f, "
          "\"busbw\": %.1f}\n",
          size, bytes, seconds, busbw);
      std::fflush(stdout);
    }
  }
  if (rank == 0) {  // the copy bandwidth of this GPU, for scale
    void* other = nullptr;
    cudaCheck(cudaMalloc(&other, maxBytes), "cudaMalloc");
    for (size_t bytes = 4096; bytes <= maxBytes; bytes *= 4) {
      const int iterations = bytes <= (1 << 20) ? 50 : 10;
      cudaMemcpy(other, data, bytes, cudaMemcpyDeviceToDevice);
      cudaDeviceSynchronize();
      const auto begin = Clock::now();
      for (int i = 0; i < iterations; ++i) cudaMemcpy(other, data, bytes, cudaMemcpyDeviceToDevice);
      cudaCheck(cudaDeviceSynchronize(), "copy");
      const double seconds =
          std::chrono::duration<double>(Clock::now() - begin).count() / iterations;
      std::printf(
          "{\"what\": \"d2d_copy\", \"bytes\": %zu, \"seconds\": %.9f, \"bandwidth\": %.1f}\n",
          bytes, seconds, bytes / seconds);
    }
    cudaFree(other);
  }
  cudaFree(data);
}

}  // namespace
}  // namespace ringx::device_ring::testing

int main(int argc, char** argv) {
  using namespace ringx::device_ring::testing;
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s matrix|die|bench <rank> <size> <store dir> [max bytes]\n",
                 argv[0]);
    return 2;
  }
  const std::string scenario = argv[1];
  const int rank = std::atoi(argv[2]), size = std::atoi(argv[3]);
  ringx::testing::DirectoryStore store(argv[4]);
  try {
    if (scenario == "matrix") {
      matrix(rank, size, store);
    } else if (scenario == "die") {
      die(rank, size, store);
    } else if (scenario == "bench") {
      bench(rank, size, store, argc > 5 ? std::strtoull(argv[5], nullptr, 10) : (1ull << 30));
    } else {
      std::fprintf(stderr, "unknown scenario %s\n", scenario.c_str());
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    return 1;
  }
  return 0;
}
