// AVG's division, fused into the collectives (algorithms.h's divideBy): data[i] / d, with the
// bits torch's Tensor.div_(d) gives, so that an AVG equals the same SUM divided by torch.
//
// The collectives divide each piece of a result where it is completed (the ring's last
// reducing step), with reduceDivided: for float32 SUM, one loop that adds and divides, so the
// division reads no memory of its own. Division is the slowest arithmetic instruction, but
// compiled for AVX2 a loop of add-then-divide over a 256 KiB block ran as fast as the add
// alone (4.8 us each: the loop waits on memory, not on the divider), where SSE2's divps in a
// pass of its own made a 1 MiB AVG allreduce 1.4x a SUM (2 ranks). Other dtypes combine and
// divide one L1-sized block at a time. The quotients are true IEEE divisions throughout:
// float16/bfloat16 are widened, divided in float and rounded back, as torch's opmath does.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backend/reduce/element_ops.h"
#include "backend/reduce/reduce.h"
#include "base/error.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define RINGX_DIVIDE_AVX2 1
#define RINGX_AVX2_ONLY __attribute__((target("avx2")))
#else
#define RINGX_DIVIDE_AVX2 0
#endif

namespace ringx::reduce {
namespace detail {
bool portableKernelsForced();  // reduce.cc's test switch
}  // namespace detail

namespace {

constexpr size_t kBlock = 1024;  // float16/bfloat16 elements widened at a time

// The loops, compiled once per target.
#define RINGX_DIVIDE_LOOPS(PREFIX, TARGET)                                                       \
  TARGET void PREFIX##Divide(float* x, float d, size_t n) {                                      \
    for (size_t i = 0; i < n; ++i) x[i] = x[i] / d;                                              \
  }                                                                                              \
  /* `out` may be `a` or `b` (reduce's contract): element i reads only index i before it is      \
     written, so iterations do not depend on each other (ivdep: no overlap check). */            \
  TARGET void PREFIX##SumDivide(float* out, const float* a, const float* b, float d, size_t n) { \
    _Pragma("GCC ivdep") for (size_t i = 0; i < n; ++i) {                                        \
      out[i] = FloatSum<float>::apply(a[i], b[i]) / d;                                           \
    }                                                                                            \
  }
RINGX_DIVIDE_LOOPS(portable, )
#if RINGX_DIVIDE_AVX2
RINGX_DIVIDE_LOOPS(avx2, RINGX_AVX2_ONLY)
#endif
#undef RINGX_DIVIDE_LOOPS

bool useAvx2() {
#if RINGX_DIVIDE_AVX2
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
  }();
  return has && !detail::portableKernelsForced();
#else
  return false;
#endif
}

void divideFloats(float* x, double divisor, size_t n) {
  const float d = static_cast<float>(divisor);  // torch rounds the Scalar to float first
#if RINGX_DIVIDE_AVX2
  if (useAvx2()) return avx2Divide(x, d, n);
#endif
  portableDivide(x, d, n);
}

template <typename Bits>
void divideHalves(uint16_t* x, double divisor, size_t n) {
  alignas(64) float wide[kBlock];
  for (size_t base = 0; base < n; base += kBlock) {
    const size_t m = std::min(kBlock, n - base);
    for (size_t i = 0; i < m; ++i) wide[i] = Bits::toFloat(x[base + i]);
    divideFloats(wide, divisor, m);
    for (size_t i = 0; i < m; ++i) x[base + i] = Bits::fromFloat(wide[i]);
  }
}

void divideAligned(DataType type, void* data, double divisor, size_t count) {
  switch (type) {
    case DataType::kFloat32:
      return divideFloats(static_cast<float*>(data), divisor, count);
    case DataType::kFloat64: {
      double* x = static_cast<double*>(data);
      for (size_t i = 0; i < count; ++i) x[i] = x[i] / divisor;
      return;
    }
    case DataType::kFloat16:
      return divideHalves<Fp16Bits>(static_cast<uint16_t*>(data), divisor, count);
    case DataType::kBFloat16:
      return divideHalves<Bf16Bits>(static_cast<uint16_t*>(data), divisor, count);
    default:
      RINGX_THROW(InvalidArgument, "ringx: divide does not handle dtype ", dataTypeName(type));
  }
}

bool aligned(const void* p, size_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

}  // namespace

bool dividesInPlace(DataType type) {
  return type == DataType::kFloat32 || type == DataType::kFloat64 || type == DataType::kFloat16 ||
         type == DataType::kBFloat16;
}

void divide(DataType type, void* data, double divisor, size_t count) {
  RINGX_CHECK(dividesInPlace(type), "ringx: divide does not handle dtype ", dataTypeName(type));
  if (count == 0) return;
  const size_t elementBytes = elementSize(type);
  if (aligned(data, elementBytes)) return divideAligned(type, data, divisor, count);
  // A byte stream's operand (a shared-memory ring after an odd-sized message): through an
  // aligned block.
  alignas(64) unsigned char block[8192];
  const size_t perBlock = sizeof(block) / elementBytes;
  for (size_t done = 0; done < count; done += perBlock) {
    const size_t n = std::min(perBlock, count - done);
    char* at = static_cast<char*>(data) + done * elementBytes;
    std::memcpy(block, at, n * elementBytes);
    divideAligned(type, block, divisor, n);
    std::memcpy(at, block, n * elementBytes);
  }
}

void reduceDivided(ReduceOp op, DataType type, void* out, const void* a, const void* b,
                   size_t count, double divisor) {
  if (op == ReduceOp::kSum && type == DataType::kFloat32 && aligned(out, 4) && aligned(a, 4) &&
      aligned(b, 4)) {
    // AVG's case: one loop. Checked as reduce() checks its operands.
    RINGX_CHECK(count == 0 || (out && a && b), "ringx: reduce got a null buffer for ", count,
                " elements");
    const auto* x = static_cast<const float*>(a);
    const auto* y = static_cast<const float*>(b);
    const float d = static_cast<float>(divisor);
#if RINGX_DIVIDE_AVX2
    if (useAvx2()) return avx2SumDivide(static_cast<float*>(out), x, y, d, count);
#endif
    return portableSumDivide(static_cast<float*>(out), x, y, d, count);
  }
  // 16 KiB of result per block: with its two operands' blocks, within a 32 KiB L1.
  const size_t elementBytes = elementSize(type);
  const size_t perBlock = std::max<size_t>(1, (16 << 10) / elementBytes);
  for (size_t done = 0; done < count; done += perBlock) {
    const size_t n = std::min(perBlock, count - done);
    const size_t offset = done * elementBytes;
    void* o = static_cast<char*>(out) + offset;
    reduce(op, type, o, static_cast<const char*>(a) + offset, static_cast<const char*>(b) + offset,
           n);
    divide(type, o, divisor, n);
  }
}

}  // namespace ringx::reduce
