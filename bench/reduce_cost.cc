// What the CPU reduction kernels cost: the best of 30 in-place reductions of 1M elements per
// (dtype, op), in microseconds and GB/s of output. How a change to backend/reduce/ (or to
// element_ops.h, which the CUDA kernels share) is checked for speed: build it before and after
// and run both alternately.
//
//   build/bin/bench_reduce_cost
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "backend/reduce/reduce.h"

using namespace ringx;

int main() {
  const size_t count = size_t{1} << 20;  // elements; a few MiB, in the last-level cache
  std::vector<char> a(count * 16, 1), b(count * 16, 2);
  std::printf("%-10s %-8s %10s %8s\n", "dtype", "op", "us", "GB/s");
  for (int t = 0; t < kNumDataTypes; ++t) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
      const auto type = static_cast<DataType>(t);
      if (!reduceOpSupports(op, type)) continue;
      double best = 1e9;
      for (int round = 0; round < 30; ++round) {
        const auto start = std::chrono::steady_clock::now();
        reduce::reduceInPlace(op, type, a.data(), b.data(), count);
        const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
        best = std::min(best, took.count());
      }
      std::printf("%-10s %-8s %10.1f %8.2f\n", dataTypeName(type), reduceOpName(op), best * 1e6,
                  count * elementSize(type) / best / 1e9);
    }
  }
  return 0;
}
