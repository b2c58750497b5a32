// The device ring's test matrix, one for both instances: every collective, dtype, op and the
// sizes at the protocol's edges, on whatever memory the instance's buffers live in (host
// memory for the CPU instance, device memory for CUDA IPC), compared with the reference.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "backend/device/ring/device_ring.h"
#include "reduction_reference.h"

namespace ringx::device_ring::testing {

using ringx::testing::expectedReduction;
using ringx::testing::makeInput;

constexpr DataType kTypes[] = {DataType::kFloat32,  DataType::kFloat64,   DataType::kFloat16,
                               DataType::kBFloat16, DataType::kComplex64, DataType::kComplex128,
                               DataType::kInt8,     DataType::kInt16,     DataType::kInt32,
                               DataType::kInt64,    DataType::kUInt8,     DataType::kBool};
constexpr ReduceOp kOps[] = {ReduceOp::kSum,  ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kBAnd, ReduceOp::kBOr,     ReduceOp::kBXor};

// Where the collective's buffers live: `upload` makes a buffer holding `bytes` (at least one
// byte is allocated), `download` reads one back, `release` frees it.
struct Buffers {
  std::function<void*(const std::vector<char>& bytes)> upload;
  std::function<std::vector<char>(const void* buffer, size_t bytes)> download;
  std::function<void(void* buffer)> release;
};

inline Buffers hostBuffers() {
  return {[](const std::vector<char>& bytes) {
            char* b = new char[bytes.size() + 1];
            std::copy(bytes.begin(), bytes.end(), b);
            return static_cast<void*>(b);
          },
          [](const void* b, size_t n) {
            const char* c = static_cast<const char*>(b);
            return std::vector<char>(c, c + n);
          },
          [](void* b) { delete[] static_cast<char*>(b); }};
}

// Small slots and few of them, so that modest buffers take many rounds and reuse every slot.
inline Geometry smallGeometry() {
  Geometry g;
  g.channels = 2;
  g.depth = 3;
  g.slotBytes = 256;
  g.oneShotBytes = 512;
  return g;
}

inline Deadline soon(int seconds = 60) { return Clock::now() + std::chrono::seconds(seconds); }

// The element counts of the matrix for n ranks: 0, fewer than the ranks, one per rank, within
// one slot, one-shot's edge (64 and 65 elements of 8 bytes around smallGeometry's 512), and
// enough for many rounds of 256-byte segments through 3 slots per channel.
inline std::vector<size_t> matrixCounts(int n) {
  return {0, 1, static_cast<size_t>(n), 7, 64, 65, 1000, 5003};
}

inline std::string mismatch(const std::string& what, const std::vector<char>& got,
                            const std::vector<char>& want) {
  if (got == want) return "";
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  return what + ": first differing byte " + std::to_string(i) + " of " +
         std::to_string(want.size());
}

// Runs every collective of the matrix on this rank; returns the first wrong result ("" if none).
inline std::string runMatrix(DeviceRing& ring, const std::vector<size_t>& counts,
                             const Buffers& memory) {
  const int n = ring.size(), r = ring.rank();
  for (DataType type : kTypes) {
    const size_t es = elementSize(type);
    for (ReduceOp op : kOps) {
      if (!reduceOpSupports(op, type)) continue;
      for (size_t count : counts) {
        const std::string what = std::string(dataTypeName(type)) + " " + reduceOpName(op) +
                                 " count " + std::to_string(count);
        // Allreduce, in place (one-shot when small, the ring otherwise).
        void* data = memory.upload(makeInput(type, op, r, count));
        ring.allreduce(data, data, count, type, op, soon());
        std::string wrong = mismatch("allreduce " + what, memory.download(data, count * es),
                                     expectedReduction(type, op, n, count));
        memory.release(data);
        if (!wrong.empty()) return wrong;
        // Reduce-scatter: n shares of `count` in, this rank's reduced share out.
        void* in = memory.upload(makeInput(type, op, r, count * n));
        void* out = memory.upload(std::vector<char>(count * es, 7));
        ring.reduceScatter(in, out, count, type, op, soon());
        std::vector<char> all = expectedReduction(type, op, n, count * n);
        wrong = mismatch(
            "reduce_scatter " + what, memory.download(out, count * es),
            std::vector<char>(all.begin() + r * count * es, all.begin() + (r + 1) * count * es));
        memory.release(in);
        memory.release(out);
        if (!wrong.empty()) return wrong;
      }
    }
    for (size_t count : counts) {
      void* in = memory.upload(makeInput(type, ReduceOp::kSum, r, count));
      void* out = memory.upload(std::vector<char>(count * es * n, 7));
      ring.allgather(in, out, count, type, soon());
      std::vector<char> want;
      for (int p = 0; p < n; ++p) {
        std::vector<char> theirs = makeInput(type, ReduceOp::kSum, p, count);
        want.insert(want.end(), theirs.begin(), theirs.end());
      }
      const std::string wrong = mismatch(
          std::string("allgather ") + dataTypeName(type) + " count " + std::to_string(count),
          memory.download(out, count * es * n), want);
      memory.release(in);
      memory.release(out);
      if (!wrong.empty()) return wrong;
    }
  }
  return "";
}

}  // namespace ringx::device_ring::testing
