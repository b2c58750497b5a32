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
// * Semantics: MIN/MAX on floating types return a quiet NaN when either operand is NaN (as
//   torch.minimum/maximum); otherwise std::min/std::max order (so min(+0, -0) is the first
//   operand). Integer SUM/PRODUCT wrap around (computed in the unsigned type). Complex PRODUCT uses
//   the textbook formula of c10::complex, (ac - bd) + (ad + bc)i, without C99 Annex G NaN fixups.
//   Bool is one byte where any nonzero value is true; SUM/MAX/BOR are logical or, PRODUCT/MIN/BAND
//   logical and, BXOR logical xor, and results are always 0 or 1.
#include "backend/reduce/reduce.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backend/common/error.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define RINGX_REDUCE_X86_DISPATCH 1
#include <immintrin.h>
#else
#define RINGX_REDUCE_X86_DISPATCH 0
#endif

#define RINGX_ALWAYS_INLINE inline __attribute__((always_inline))

namespace ringx::reduce {
namespace {

using KernelFn = void (*)(void* out, const void* a, const void* b, size_t count);

// ---- element functors ----------------------------------------------------------------------

template <typename T>
struct FloatSum {
  static RINGX_ALWAYS_INLINE T apply(T a, T b) { return a + b; }
};

template <typename T>
struct FloatProduct {
  static RINGX_ALWAYS_INLINE T apply(T a, T b) { return a * b; }
};

template <typename T>
struct FloatMin {
  static RINGX_ALWAYS_INLINE T apply(T a, T b) {
    const T smaller = b < a ? b : a;
    const bool anyNan = (a != a) | (b != b);
    return anyNan ? std::numeric_limits<T>::quiet_NaN() : smaller;
  }
};

template <typename T>
struct FloatMax {
  static RINGX_ALWAYS_INLINE T apply(T a, T b) {
    const T larger = a < b ? b : a;
    const bool anyNan = (a != a) | (b != b);
    return anyNan ? std::numeric_limits<T>::quiet_NaN() : larger;
  }
};

// Unsigned type wide enough that arithmetic on it neither overflows a signed int after integer
// promotion nor loses bits: uint16 * uint16 would otherwise promote to (signed) int and overflow.
template <typename T>
using WrapType =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <typename T>
struct IntSum {
  static RINGX_ALWAYS_INLINE T apply(T a, T b) {
    using U = WrapType<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  }
};

template <typename T>
struct IntProduct {
  static RINGX_ALWAYS_INLINE T apply(T a, T b) {
    using U = WrapType<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  }
};

template <typename T>
struct IntMin {
  static RINGX_ALWAYS_INLINE T apply(T a, T b) { return b < a ? b : a; }
};

template <typename T>
struct IntMax {
  static RINGX_ALWAYS_INLINE T apply(T a, T b) { return a < b ? b : a; }
};

template <typename T>
struct BitAnd {
  static RINGX_ALWAYS_INLINE T apply(T a, T b) { return static_cast<T>(a & b); }
};

template <typename T>
struct BitOr {
  static RINGX_ALWAYS_INLINE T apply(T a, T b) { return static_cast<T>(a | b); }
};

template <typename T>
struct BitXor {
  static RINGX_ALWAYS_INLINE T apply(T a, T b) { return static_cast<T>(a ^ b); }
};

// Bool is stored as uint8_t (reading a C++ bool that holds anything but 0/1 is undefined).
struct BoolOr {
  static RINGX_ALWAYS_INLINE uint8_t apply(uint8_t a, uint8_t b) {
    return static_cast<uint8_t>((a | b) != 0);
  }
};

struct BoolAnd {
  static RINGX_ALWAYS_INLINE uint8_t apply(uint8_t a, uint8_t b) {
    return static_cast<uint8_t>((a != 0) & (b != 0));
  }
};

struct BoolXor {
  static RINGX_ALWAYS_INLINE uint8_t apply(uint8_t a, uint8_t b) {
    return static_cast<uint8_t>((a != 0) ^ (b != 0));
  }
};

// Layout of std::complex<T> / c10::complex<T>. Kernels use this plain struct rather than
// std::complex, whose real()/imag() accessors GCC 12 does not vectorise.
template <typename T>
struct ComplexPair {
  T re;
  T im;
};

// c10::complex's product, (ac - bd) + (ad + bc)i. Note: a build with FMA enabled and
// -ffp-contract=fast (GCC's default in gnu++ modes) may contract these into fused multiply-adds;
// every rank runs the same binary, so results stay identical across ranks either way.
template <typename T>
struct ComplexProduct {
  static RINGX_ALWAYS_INLINE ComplexPair<T> apply(ComplexPair<T> x, ComplexPair<T> y) {
    return ComplexPair<T>{x.re * y.re - x.im * y.im, x.re * y.im + x.im * y.re};
  }
};

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

RINGX_ALWAYS_INLINE uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

RINGX_ALWAYS_INLINE float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// IEEE binary16 <-> binary32, branch-free (the FP16 library's algorithm, as in c10/util/Half.h).
struct Fp16Scalar {
  static RINGX_ALWAYS_INLINE float toFloat(uint16_t h) {
    const uint32_t w = static_cast<uint32_t>(h) << 16;
    const uint32_t sign = w & 0x80000000u;
    const uint32_t twoW = w + w;  // exponent and mantissa, sign shifted out
    // Normal numbers, inf and NaN: move the fields into place and fix the exponent bias
    // (2^-112 = 2^(15 - 127)); inf/NaN land on exponent 0xFF and stay inf/NaN.
    const float normalized = floatOf((twoW >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
    // Zero and subnormals: the mantissa as the low bits of 0.5 + m * 2^-24, minus 0.5.
    const float denormalized = floatOf((twoW >> 17) | (126u << 23)) - 0.5f;
    // Branch-free select (a ?: here is not if-converted, which would stop vectorisation).
    const uint32_t isDenormal = 0u - static_cast<uint32_t>(twoW < (1u << 27));
    const uint32_t magnitude =
        (bitsOf(denormalized) & isDenormal) | (bitsOf(normalized) & ~isDenormal);
    return floatOf(sign | magnitude);
  }

  // Round to nearest even; overflow gives inf, NaN gives sign|0x7E00.
  static RINGX_ALWAYS_INLINE uint16_t fromFloat(float f) {
    // Scaling up then down makes the FPU do the rounding at the right bit position.
    float base = (std::fabs(f) * 0x1.0p+112f) * 0x1.0p-110f;
    const uint32_t w = bitsOf(f);
    const uint32_t shl1W = w + w;
    const uint32_t sign = w & 0x80000000u;
    // bias = max(exponent field, 0x71) << 24; as a signed max, which SSE2 can vectorise.
    const int32_t exponent = static_cast<int32_t>(shl1W >> 24);
    const uint32_t bias = static_cast<uint32_t>(std::max(exponent, int32_t{0x71})) << 24;
    base = floatOf((bias >> 1) + 0x07800000u) + base;
    const uint32_t bits = bitsOf(base);
    const uint32_t expBits = (bits >> 13) & 0x00007C00u;
    const uint32_t mantissaBits = bits & 0x00000FFFu;
    const uint32_t nonsign = expBits + mantissaBits;
    const uint32_t isNan = 0u - static_cast<uint32_t>(shl1W > 0xFF000000u);
    return static_cast<uint16_t>((sign >> 16) | (0x7E00u & isNan) | (nonsign & ~isNan));
  }

  static RINGX_ALWAYS_INLINE void toFloat(const uint16_t* src, float* dst, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      dst[i] = toFloat(src[i]);
    }
  }

  static RINGX_ALWAYS_INLINE void fromFloat(const float* src, uint16_t* dst, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      dst[i] = fromFloat(src[i]);
    }
  }
};

// bfloat16 is the top half of a binary32; rounding as c10::BFloat16's round_to_nearest_even.
struct Bf16Scalar {
  static RINGX_ALWAYS_INLINE float toFloat(uint16_t h) {
    return floatOf(static_cast<uint32_t>(h) << 16);
  }

  static RINGX_ALWAYS_INLINE uint16_t fromFloat(float f) {
    const uint32_t u = bitsOf(f);
    const uint32_t roundingBias = ((u >> 16) & 1u) + 0x7FFFu;
    const uint16_t rounded = static_cast<uint16_t>((u + roundingBias) >> 16);
    return f != f ? static_cast<uint16_t>(0x7FC0u) : rounded;
  }

  static RINGX_ALWAYS_INLINE void toFloat(const uint16_t* src, float* dst, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      dst[i] = toFloat(src[i]);
    }
  }

  static RINGX_ALWAYS_INLINE void fromFloat(const float* src, uint16_t* dst, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      dst[i] = fromFloat(src[i]);
    }
  }
};

constexpr size_t kHalfBlock = 256;

// Widens a block of each input into float, combines, and rounds back. `out` may equal `a` or `b`:
// a block is fully read before any of it is written, and blocks do not overlap.
template <typename Conv, typename Op>
void halfBlocks(void* out, const void* a, const void* b, size_t n) {
  uint16_t* o = static_cast<uint16_t*>(out);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  alignas(64) float fa[kHalfBlock];
  alignas(64) float fb[kHalfBlock];
  for (size_t base = 0; base < n; base += kHalfBlock) {
    const size_t m = std::min(kHalfBlock, n - base);
    Conv::toFloat(x + base, fa, m);
    Conv::toFloat(y + base, fb, m);
    for (size_t i = 0; i < m; ++i) {
      fa[i] = Op::apply(fa[i], fb[i]);
    }
    Conv::fromFloat(fa, o + base, m);
  }
}

#if RINGX_REDUCE_X86_DISPATCH

#define RINGX_AVX2_TARGET __attribute__((target("avx2,f16c")))

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

// halfBlocks compiled for AVX2 (bfloat16 uses the scalar conversions, vectorised 8 wide here
// instead of 4 wide). Spelled out again because an always-inline default-target function cannot
// call the AVX2 conversions.
template <typename Conv, typename Op>
RINGX_AVX2_TARGET void halfBlocksAvx2(void* out, const void* a, const void* b, size_t n) {
  uint16_t* o = static_cast<uint16_t*>(out);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  alignas(64) float fa[kHalfBlock];
  alignas(64) float fb[kHalfBlock];
  for (size_t base = 0; base < n; base += kHalfBlock) {
    const size_t m = std::min(kHalfBlock, n - base);
    Conv::toFloat(x + base, fa, m);
    Conv::toFloat(y + base, fb, m);
    for (size_t i = 0; i < m; ++i) {
      fa[i] = Op::apply(fa[i], fb[i]);
    }
    Conv::fromFloat(fa, o + base, m);
  }
}

bool cpuHasAvx2F16c() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  }();
  return has;
}

#endif  // RINGX_REDUCE_X86_DISPATCH

std::atomic<bool> forcePortable{false};

bool useAvx2Kernels() {
#if RINGX_REDUCE_X86_DISPATCH
  return cpuHasAvx2F16c() && !forcePortable.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

// ---- kernel selection ----------------------------------------------------------------------

template <typename T>
KernelFn floatKernel(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return &elementwise<T, FloatSum<T>>;
    case ReduceOp::kProduct:
      return &elementwise<T, FloatProduct<T>>;
    case ReduceOp::kMin:
      return &elementwise<T, FloatMin<T>>;
    case ReduceOp::kMax:
      return &elementwise<T, FloatMax<T>>;
    default:
      return nullptr;
  }
}

template <typename Conv, typename Op>
KernelFn halfKernelFor(bool avx2) {
#if RINGX_REDUCE_X86_DISPATCH
  if (avx2) {
    using FastConv = std::conditional_t<std::is_same_v<Conv, Fp16Scalar>, Fp16F16c, Conv>;
    return &halfBlocksAvx2<FastConv, Op>;
  }
#endif
  return &halfBlocks<Conv, Op>;
}

template <typename Conv>
KernelFn halfKernel(ReduceOp op) {
  const bool avx2 = useAvx2Kernels();
  switch (op) {
    case ReduceOp::kSum:
      return halfKernelFor<Conv, FloatSum<float>>(avx2);
    case ReduceOp::kProduct:
      return halfKernelFor<Conv, FloatProduct<float>>(avx2);
    case ReduceOp::kMin:
      return halfKernelFor<Conv, FloatMin<float>>(avx2);
    case ReduceOp::kMax:
      return halfKernelFor<Conv, FloatMax<float>>(avx2);
    default:
      return nullptr;
  }
}

template <typename T>
KernelFn complexKernel(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return &complexSum<T>;
    case ReduceOp::kProduct:
      static_assert(sizeof(ComplexPair<T>) == sizeof(std::complex<T>));
      return &elementwise<ComplexPair<T>, ComplexProduct<T>>;
    default:
      return nullptr;
  }
}

template <typename T>
KernelFn intKernel(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return &elementwise<T, IntSum<T>>;
    case ReduceOp::kProduct:
      return &elementwise<T, IntProduct<T>>;
    case ReduceOp::kMin:
      return &elementwise<T, IntMin<T>>;
    case ReduceOp::kMax:
      return &elementwise<T, IntMax<T>>;
    case ReduceOp::kBAnd:
      return &elementwise<T, BitAnd<T>>;
    case ReduceOp::kBOr:
      return &elementwise<T, BitOr<T>>;
    case ReduceOp::kBXor:
      return &elementwise<T, BitXor<T>>;
  }
  return nullptr;
}

KernelFn boolKernel(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kMax:
    case ReduceOp::kBOr:
      return &elementwise<uint8_t, BoolOr>;
    case ReduceOp::kProduct:
    case ReduceOp::kMin:
    case ReduceOp::kBAnd:
      return &elementwise<uint8_t, BoolAnd>;
    case ReduceOp::kBXor:
      return &elementwise<uint8_t, BoolXor>;
  }
  return nullptr;
}

KernelFn selectKernel(ReduceOp op, DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return floatKernel<float>(op);
    case DataType::kFloat64:
      return floatKernel<double>(op);
    case DataType::kFloat16:
      return halfKernel<Fp16Scalar>(op);
    case DataType::kBFloat16:
      return halfKernel<Bf16Scalar>(op);
    case DataType::kComplex64:
      return complexKernel<float>(op);
    case DataType::kComplex128:
      return complexKernel<double>(op);
    case DataType::kInt8:
      return intKernel<int8_t>(op);
    case DataType::kInt16:
      return intKernel<int16_t>(op);
    case DataType::kInt32:
      return intKernel<int32_t>(op);
    case DataType::kInt64:
      return intKernel<int64_t>(op);
    case DataType::kUInt8:
      return intKernel<uint8_t>(op);
    case DataType::kBool:
      return boolKernel(op);
  }
  return nullptr;
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

}  // namespace

namespace detail {

// Test hook (declared by the tests, not in reduce.h): makes the kernels ignore AVX2/F16C so both
// implementations can be checked on one machine. Returns the previous setting.
bool forcePortableKernelsForTesting(bool force) {
  return forcePortable.exchange(force, std::memory_order_relaxed);
}

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
  kernel(out, a, b, count);
}

void reduceInPlace(ReduceOp op, DataType type, void* dst, const void* src, size_t count) {
  reduce(op, type, dst, dst, src, count);
}

}  // namespace ringx::reduce
