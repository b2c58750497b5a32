// One rank of a device-ring test on CUDA, as a fresh process (a forked child of a process that
// touched CUDA cannot use CUDA): ipc_ring_test.cc starts `size` of these on one GPU,
// rendezvousing through a directory store. (The bench goes through torch: bench/cuda_ring.py.)
//
//   ringx_cuda_ring_worker <scenario> <rank> <size> <store dir>
//     matrix   every collective, dtype, op and edge size on device memory (device_ring_matrix.h)
//     die      a large allreduce during which rank size-1 exits: the others check their error
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
  // A peer may still be reading this rank's last slots: exiting now would free them.
  ring->leave(store, soon(60));
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

}  // namespace
}  // namespace ringx::device_ring::testing

int main(int argc, char** argv) {
  using namespace ringx::device_ring::testing;
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s matrix|die <rank> <size> <store dir>\n", argv[0]);
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
