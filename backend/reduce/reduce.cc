// Element-wise reduction kernels.
//
// Design:
// * Each (ReduceOp, DataType) pair gets its own kernel: a template over the storage type and a
//   small functor with an always-inline `apply(a, b)`. The loops are plain counted loops over
//   contiguous arrays so that GCC -O3 vectorises every one of them (check with -fopt-info-vec).
// * Aliasing: reduce() allows `out` to be the same pointer as `a` and/or `b`. Left to itself GCC
//   would version each loop on a runtime overlap check and take the scalar copy exactly in the
//   in-place case, which is the common one. Instead the driver picks one of four loop shapes whose
//   pointers are __restrict: out distinct from both, out == a, out == b, out == a == b. Partial
//   overlap of `out` with an input is rejected.
// * float16/bfloat16 are processed in blocks: kHalfBlock elements of each input are widened into
//   float arrays, combined in float, and rounded back to nearest-even with the bit tricks used by
//   c10::Half (fp16_ieee_from_fp32_value) and c10::BFloat16 (round_to_nearest_even), so results
//   match at::Half / at::BFloat16 arithmetic bit for bit. NaN results are canonical: float16
//   sign|0x7E00, bfloat16 0x7FC0, as c10 produces them. (ProcessGroupGloo reduces at::Half as
//   gloo::float16, which rounds the same way but writes every NaN as 0x7FFF.)
// * On x86-64 with AVX2 and F16C the half kernels run a second instantiation compiled for AVX2,
//   where float16 conversions use vcvtph2ps/vcvtps2ph (with NaN canonicalised first so the output
//   is bit-identical to the portable path). The choice is made at run time. The portable float16
//   path is several times slower (SSE2 has no conversions; the bit tricks cost ~25 instructions
//   per element), bfloat16 about 2x.
// * With baseline x86-64 (SSE2) flags, int64 PRODUCT/MIN/MAX stay scalar: SSE2 has no 64-bit
//   multiply or compare. Everything else vectorises.
// * Semantics (NaN, wrap-around, complex, bool): see element_ops.h, shared with the CUDA kernels.
#include "backend/reduce/reduce.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backend/reduce/element_ops.h"
#include "base/error.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define RINGX_REDUCE_X86_DISPATCH 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define RINGX_REDUCE_X86_DISPATCH 0
#endif

#define RINGX_ALWAYS_INLINE inline __attribute__((always_inline))

namespace ringx::reduce {
namespace {

using KernelFn = void (*)(void* out, const void* a, const void* b, size_t count);

// The element functors (FloatSum, IntMin, BoolOr, ComplexProduct, ...) and the float16/bfloat16
// conversions live in element_ops.h, shared with the CUDA kernels.

// ---- drivers for types combined directly ----------------------------------------------------

template <typename T, typename Op>
void loopDistinct(T* __restrict out, const T* __restrict a, const T* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    out[i] = Op::apply(a[i], b[i]);
  }
}

// inout[i] = op(inout[i], b[i])
template <typename T, typename Op>
void loopIntoFirst(T* __restrict inout, const T* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    inout[i] = Op::apply(inout[i], b[i]);
  }
}

// inout[i] = op(a[i], inout[i])
template <typename T, typename Op>
void loopIntoSecond(T* __restrict inout, const T* __restrict a, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    inout[i] = Op::apply(a[i], inout[i]);
  }
}

// inout[i] = op(inout[i], inout[i])
template <typename T, typename Op>
void loopSelf(T* __restrict inout, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const T v = inout[i];
    inout[i] = Op::apply(v, v);
  }
}

template <typename T, typename Op>
void elementwise(void* out, const void* a, const void* b, size_t n) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  if (o == x) {
    if (x == y) {
      loopSelf<T, Op>(o, n);
    } else {
      loopIntoFirst<T, Op>(o, y, n);
    }
  } else if (o == y) {
    loopIntoSecond<T, Op>(o, x, n);
  } else {
    // Two const __restrict pointers may point to the same memory: neither is written.
    loopDistinct<T, Op>(o, x, y, n);
  }
}

// Complex sums are element-wise sums of the interleaved real and imaginary parts.
template <typename T>
void complexSum(void* out, const void* a, const void* b, size_t n) {
  elementwise<T, FloatSum<T>>(out, a, b, 2 * n);
}

// ---- float16 / bfloat16 --------------------------------------------------------------------

// Block conversions for halfBlocks: the element conversions of element_ops.h in plain loops,
// which GCC vectorises.
template <typename Bits>
struct ScalarConversions : Bits {
  using Bits::fromFloat;
  using Bits::toFloat;

  static RINGX_ALWAYS_INLINE void toFloat(const uint16_t* src, float* dst, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      dst[i] = Bits::toFloat(src[i]);
    }
  }

  static RINGX_ALWAYS_INLINE void fromFloat(const float* src, uint16_t* dst, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      dst[i] = Bits::fromFloat(src[i]);
    }
  }
};
using Fp16Scalar = ScalarConversions<Fp16Bits>;
using Bf16Scalar = ScalarConversions<Bf16Bits>;

constexpr size_t kHalfBlock = 256;

// Widens a block of each input into float, combines, and rounds back. `out` may equal `a` or `b`:
// a block is fully read before any of it is written, and blocks do not overlap. Emitted once per
// target, as divide.cc's loops are: halfBlocks, and on x86-64 halfBlocksAvx2, since an
// always-inline default-target function cannot call the AVX2 conversions (bfloat16 uses the
// scalar ones there, vectorised 8 wide instead of 4).
#define RINGX_HALF_BLOCKS(NAME, TARGET)                                 \
  template <typename Conv, typename Op>                                 \
  TARGET void NAME(void* out, const void* a, const void* b, size_t n) { \
    uint16_t* o = static_cast<uint16_t*>(out);                          \
    const uint16_t* x = static_cast<const uint16_t*>(a);                \
    const uint16_t* y = static_cast<const uint16_t*>(b);                \
    alignas(64) float fa[kHalfBlock];                                   \
    alignas(64) float fb[kHalfBlock];                                   \
    for (size_t base = 0; base < n; base += kHalfBlock) {               \
      const size_t m = std::min(kHalfBlock, n - base);                  \
      Conv::toFloat(x + base, fa, m);                                   \
      Conv::toFloat(y + base, fb, m);                                   \
      for (size_t i = 0; i < m; ++i) {                                  \
        fa[i] = Op::apply(fa[i], fb[i]);                                \
      }                                                                 \
      Conv::fromFloat(fa, o + base, m);                                 \
    }                                                                   \
  }
RINGX_HALF_BLOCKS(halfBlocks, )

#if RINGX_REDUCE_X86_DISPATCH

#define RINGX_AVX2_TARGET __attribute__((target("avx2,f16c")))
RINGX_HALF_BLOCKS(halfBlocksAvx2, RINGX_AVX2_TARGET)

// float16 conversions with F16C. NaNs are replaced by sign|quiet-NaN before narrowing so that the
// result is sign|0x7E00, exactly what Fp16Scalar::fromFloat produces (vcvtps2ph would keep the
// payload). Widening is exact for every non-NaN input in both implementations.
struct Fp16F16c {
  static RINGX_AVX2_TARGET RINGX_ALWAYS_INLINE void toFloat(const uint16_t* src, float* dst,
                                                            size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
      _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
    for (; i < n; ++i) {
      dst[i] = Fp16Scalar::toFloat(src[i]);
    }
  }

  static RINGX_AVX2_TARGET RINGX_ALWAYS_INLINE void fromFloat(const float* src, uint16_t* dst,
                                                              size_t n) {
    const __m256 signMask = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0x80000000u)));
    const __m256 quietNan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000));
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      __m256 v = _mm256_loadu_ps(src + i);
      const __m256 isNan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
      const __m256 canonical = _mm256_or_ps(_mm256_and_ps(v, signMask), quietNan);
      v = _mm256_blendv_ps(v, canonical, isNan);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                       _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; ++i) {
      dst[i] = Fp16Scalar::fromFloat(src[i]);
    }
  }
};

bool cpuHasAvx2F16c() {
  static const bool has = [] {
    __builtin_cpu_init();
    // F16C from CPUID leaf 1 (ECX bit 29): clang does not know "f16c" in
    // __builtin_cpu_supports. The AVX2 check covers the OS saving the AVX state F16C uses.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
    return __builtin_cpu_supports("avx2") && f16c;
  }();
  return has;
}

#endif  // RINGX_REDUCE_X86_DISPATCH
#undef RINGX_HALF_BLOCKS

std::atomic<bool> forcePortable{false};

bool useAvx2Kernels() {
#if RINGX_REDUCE_X86_DISPATCH
  return cpuHasAvx2F16c() && !forcePortable.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

// ---- kernel selection ----------------------------------------------------------------------

template <typename Conv, typename Op>
KernelFn halfKernelFor(bool avx2) {
#if RINGX_REDUCE_X86_DISPATCH
  if (avx2) {
    using FastConv = std::conditional_t<std::is_same_v<Conv, Fp16Scalar>, Fp16F16c, Conv>;
    return &halfBlocksAvx2<FastConv, Op>;
  }
#endif
  (void)avx2;
  return &halfBlocks<Conv, Op>;
}

// The CPU kernel for a storage type and element functor: a plain loop, except for 16-bit
// floats (converted in blocks, with the AVX2/F16C instantiation where the CPU has it) and
// complex sums (a float sum over the interleaved parts, which vectorises).
template <typename Storage, typename Op>
struct CpuKernel {
  static KernelFn get() { return &elementwise<Storage, Op>; }
};

template <typename Bits, typename FloatOp>
struct CpuKernel<uint16_t, HalfOp<Bits, FloatOp>> {
  static KernelFn get() {
    return halfKernelFor<ScalarConversions<Bits>, FloatOp>(useAvx2Kernels());
  }
};

template <typename T>
struct CpuKernel<ComplexPair<T>, ComplexSum<T>> {
  static KernelFn get() { return &complexSum<T>; }
};

KernelFn selectKernel(ReduceOp op, DataType type) {
  static_assert(sizeof(ComplexPair<float>) == sizeof(std::complex<float>));
  KernelFn kernel = nullptr;
  visitElementOp(op, type,
                 [&]<typename Storage, typename Op>() { kernel = CpuKernel<Storage, Op>::get(); });
  return kernel;
}

// `out` must be `input` or not overlap it at all.
void checkNoPartialOverlap(const void* out, const void* input, size_t bytes, const char* name) {
  if (out == input) {
    return;
  }
  const auto o = reinterpret_cast<uintptr_t>(out);
  const auto in = reinterpret_cast<uintptr_t>(input);
  const bool disjoint = o + bytes <= in || in + bytes <= o;
  RINGX_CHECK(disjoint, "ringx: reduce output overlaps input ", name,
              " without being the same buffer");
}

// The kernels read and write T through T* and vectorise assuming T's alignment. Shared-memory
// rings are byte streams, so after an odd-sized message an operand can start at any address:
// such a call goes through aligned blocks instead. Rare, so simple copies are fast enough.
bool alignedFor(const void* p, size_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

// A complex number is aligned as its parts are.
size_t elementAlignment(DataType type) {
  const bool complex = type == DataType::kComplex64 || type == DataType::kComplex128;
  return complex ? elementSize(type) / 2 : elementSize(type);
}

void reduceMisaligned(KernelFn kernel, DataType type, void* out, const void* a, const void* b,
                      size_t count) {
  constexpr size_t kBlockBytes = 8192;
  alignas(64) unsigned char blockOut[kBlockBytes], blockA[kBlockBytes], blockB[kBlockBytes];
  const size_t elementBytes = elementSize(type), alignment = elementAlignment(type);
  const size_t perBlock = kBlockBytes / elementBytes;
  for (size_t done = 0; done < count; done += perBlock) {
    const size_t n = std::min(perBlock, count - done);
    const size_t offset = done * elementBytes, bytes = n * elementBytes;
    // Inputs are copied before `out` is written, so `out` may be `a` or `b`.
    const void* x = static_cast<const char*>(a) + offset;
    const void* y = static_cast<const char*>(b) + offset;
    void* o = static_cast<char*>(out) + offset;
    if (!alignedFor(x, alignment)) x = std::memcpy(blockA, x, bytes);
    if (!alignedFor(y, alignment)) y = std::memcpy(blockB, y, bytes);
    void* target = alignedFor(o, alignment) ? o : blockOut;
    kernel(target, x, y, n);
    if (target != o) std::memcpy(o, target, bytes);
  }
}

}  // namespace

namespace detail {

// Test hook (declared by the tests, not in reduce.h): makes the kernels ignore AVX2/F16C so both
// implementations can be checked on one machine. Returns the previous setting.
bool forcePortableKernelsForTesting(bool force) {
  return forcePortable.exchange(force, std::memory_order_relaxed);
}

// Whether the kernels are forced portable (divide.cc follows the same switch).
bool portableKernelsForced() { return forcePortable.load(std::memory_order_relaxed); }

// Whether this machine runs the AVX2/F16C kernels when not forced portable.
bool fastKernelsAvailableForTesting() {
#if RINGX_REDUCE_X86_DISPATCH
  return cpuHasAvx2F16c();
#else
  return false;
#endif
}

}  // namespace detail

void checkSupported(ReduceOp op, DataType type) {
  if (reduceOpSupports(op, type)) {
    return;
  }
  const bool bitwise = op == ReduceOp::kBAnd || op == ReduceOp::kBOr || op == ReduceOp::kBXor;
  const bool minMax = op == ReduceOp::kMin || op == ReduceOp::kMax;
  const char* why = bitwise  ? "bitwise ops need an integer or bool tensor"
                    : minMax ? "MIN/MAX are not defined for complex tensors"
                             : "unknown op or dtype";
  RINGX_THROW(InvalidArgument, "ringx: reduce op ", reduceOpName(op),
              " is not supported for dtype ", dataTypeName(type), " (", why, ")");
}

void reduce(ReduceOp op, DataType type, void* out, const void* a, const void* b, size_t count) {
  checkSupported(op, type);
  if (count == 0) {
    return;
  }
  RINGX_CHECK(out != nullptr && a != nullptr && b != nullptr,
              "ringx: reduce got a null buffer for ", count, " elements");
  const size_t bytes = count * elementSize(type);
  checkNoPartialOverlap(out, a, bytes, "a");
  checkNoPartialOverlap(out, b, bytes, "b");
  KernelFn kernel = selectKernel(op, type);
  RINGX_ENFORCE(kernel != nullptr);
  const size_t alignment = elementAlignment(type);
  if (alignedFor(out, alignment) && alignedFor(a, alignment) && alignedFor(b, alignment)) {
    kernel(out, a, b, count);
  } else {
    reduceMisaligned(kernel, type, out, a, b, count);
  }
}

void reduceInPlace(ReduceOp op, DataType type, void* dst, const void* src, size_t count) {
  reduce(op, type, dst, dst, src, count);
}

}  // namespace ringx::reduce
