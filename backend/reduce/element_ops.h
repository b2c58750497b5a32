// What a reduction does to one pair of elements, for every (ReduceOp, DataType): the one
// definition that the CPU kernels (reduce.cc) and the CUDA kernels (backend/device/cuda/) both
// compile, so that a GPU reduction gives the same bits as a CPU one.
//
// Semantics (as torch's own kernels):
// * MIN/MAX on floating types return a quiet NaN when either operand is NaN (as
//   torch.minimum/maximum); otherwise std::min/std::max order (so min(+0, -0) is the first
//   operand).
// * Integer SUM/PRODUCT wrap around (computed in an unsigned type).
// * Complex PRODUCT is c10::complex's textbook (ac - bd) + (ad + bc)i, without C99 Annex G NaN
//   fixups; complex SUM adds the parts.
// * Bool is one byte where any nonzero value is true; SUM/MAX/BOR are logical or,
//   PRODUCT/MIN/BAND logical and, BXOR logical xor, and results are always 0 or 1.
// * float16/bfloat16 are widened to float, combined in float and rounded back to nearest-even
//   with c10::Half's and c10::BFloat16's algorithms; NaN results are canonical (float16
//   sign|0x7E00, bfloat16 0x7FC0), as c10 produces them.
//
// Everything here is branch-free where it matters, so that GCC vectorises the CPU loops that
// inline it; under nvcc the same functions are __host__ __device__.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "base/types.h"

#if defined(__CUDACC__)
#define RINGX_ELEMENT_OP __host__ __device__ __forceinline__
#else
#define RINGX_ELEMENT_OP inline __attribute__((always_inline))
#endif

namespace ringx::reduce {

RINGX_ELEMENT_OP uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

RINGX_ELEMENT_OP float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// The quiet NaN torch's MIN/MAX return (std::numeric_limits<T>::quiet_NaN(), spelled with
// bits so that device code needs no constexpr host function).
template <typename T>
RINGX_ELEMENT_OP T quietNan() {
  if constexpr (sizeof(T) == 4) {
    return floatOf(0x7FC00000u);
  } else {
    const uint64_t bits = 0x7FF8000000000000ull;
    T value;
    std::memcpy(&value, &bits, sizeof(value));
    return value;
  }
}

// ---- element functors: apply(a, b) -------------------------------------------------------

template <typename T>
struct FloatSum {
  static RINGX_ELEMENT_OP T apply(T a, T b) { return a + b; }
};

template <typename T>
struct FloatProduct {
  static RINGX_ELEMENT_OP T apply(T a, T b) { return a * b; }
};

template <typename T>
struct FloatMin {
  static RINGX_ELEMENT_OP T apply(T a, T b) {
    const T smaller = b < a ? b : a;
    const bool anyNan = (a != a) | (b != b);
    return anyNan ? quietNan<T>() : smaller;
  }
};

template <typename T>
struct FloatMax {
  static RINGX_ELEMENT_OP T apply(T a, T b) {
    const T larger = a < b ? b : a;
    const bool anyNan = (a != a) | (b != b);
    return anyNan ? quietNan<T>() : larger;
  }
};

// Unsigned type wide enough that arithmetic on it neither overflows a signed int after integer
// promotion nor loses bits: uint16 * uint16 would otherwise promote to (signed) int and overflow.
template <typename T>
using WrapType =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <typename T>
struct IntSum {
  static RINGX_ELEMENT_OP T apply(T a, T b) {
    using U = WrapType<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  }
};

template <typename T>
struct IntProduct {
  static RINGX_ELEMENT_OP T apply(T a, T b) {
    using U = WrapType<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  }
};

template <typename T>
struct IntMin {
  static RINGX_ELEMENT_OP T apply(T a, T b) { return b < a ? b : a; }
};

template <typename T>
struct IntMax {
  static RINGX_ELEMENT_OP T apply(T a, T b) { return a < b ? b : a; }
};

template <typename T>
struct BitAnd {
  static RINGX_ELEMENT_OP T apply(T a, T b) { return static_cast<T>(a & b); }
};

template <typename T>
struct BitOr {
  static RINGX_ELEMENT_OP T apply(T a, T b) { return static_cast<T>(a | b); }
};

template <typename T>
struct BitXor {
  static RINGX_ELEMENT_OP T apply(T a, T b) { return static_cast<T>(a ^ b); }
};

// Bool is stored as uint8_t (reading a C++ bool that holds anything but 0/1 is undefined).
struct BoolOr {
  static RINGX_ELEMENT_OP uint8_t apply(uint8_t a, uint8_t b) {
    return static_cast<uint8_t>((a | b) != 0);
  }
};

struct BoolAnd {
  static RINGX_ELEMENT_OP uint8_t apply(uint8_t a, uint8_t b) {
    return static_cast<uint8_t>((a != 0) & (b != 0));
  }
};

struct BoolXor {
  static RINGX_ELEMENT_OP uint8_t apply(uint8_t a, uint8_t b) {
    return static_cast<uint8_t>((a != 0) ^ (b != 0));
  }
};

// Layout of std::complex<T> / c10::complex<T>. Kernels use this plain struct rather than
// std::complex, whose real()/imag() accessors GCC 12 does not vectorise (and which is not a
// device type).
template <typename T>
struct ComplexPair {
  T re;
  T im;
};

template <typename T>
struct ComplexSum {
  static RINGX_ELEMENT_OP ComplexPair<T> apply(ComplexPair<T> x, ComplexPair<T> y) {
    return ComplexPair<T>{x.re + y.re, x.im + y.im};
  }
};

// c10::complex's product, (ac - bd) + (ad + bc)i. Note: a build with FMA enabled and
// -ffp-contract=fast (GCC's default in gnu++ modes, nvcc's default) may contract these into
// fused multiply-adds; every rank runs the same binary, so results stay identical across
// ranks either way.
template <typename T>
struct ComplexProduct {
  static RINGX_ELEMENT_OP ComplexPair<T> apply(ComplexPair<T> x, ComplexPair<T> y) {
    return ComplexPair<T>{x.re * y.re - x.im * y.im, x.re * y.im + x.im * y.re};
  }
};

// ---- float16 / bfloat16 bits <-> float ----------------------------------------------------

// IEEE binary16 <-> binary32, branch-free (the FP16 library's algorithm, as in c10/util/Half.h).
struct Fp16Bits {
  static RINGX_ELEMENT_OP float toFloat(uint16_t h) {
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
  static RINGX_ELEMENT_OP uint16_t fromFloat(float f) {
    // Scaling up then down makes the FPU do the rounding at the right bit position.
    float base = (fabsf(f) * 0x1.0p+112f) * 0x1.0p-110f;
    const uint32_t w = bitsOf(f);
    const uint32_t shl1W = w + w;
    const uint32_t sign = w & 0x80000000u;
    // bias = max(exponent field, 0x71) << 24; as a signed max, which SSE2 can vectorise.
    const int32_t exponent = static_cast<int32_t>(shl1W >> 24);
    const uint32_t bias = static_cast<uint32_t>(exponent < 0x71 ? 0x71 : exponent) << 24;
    base = floatOf((bias >> 1) + 0x07800000u) + base;
    const uint32_t bits = bitsOf(base);
    const uint32_t expBits = (bits >> 13) & 0x00007C00u;
    const uint32_t mantissaBits = bits & 0x00000FFFu;
    const uint32_t nonsign = expBits + mantissaBits;
    const uint32_t isNan = 0u - static_cast<uint32_t>(shl1W > 0xFF000000u);
    return static_cast<uint16_t>((sign >> 16) | (0x7E00u & isNan) | (nonsign & ~isNan));
  }
};

// bfloat16 is the top half of a binary32; rounding as c10::BFloat16's round_to_nearest_even.
struct Bf16Bits {
  static RINGX_ELEMENT_OP float toFloat(uint16_t h) {
    return floatOf(static_cast<uint32_t>(h) << 16);
  }

  static RINGX_ELEMENT_OP uint16_t fromFloat(float f) {
    const uint32_t u = bitsOf(f);
    const uint32_t roundingBias = ((u >> 16) & 1u) + 0x7FFFu;
    const uint16_t rounded = static_cast<uint16_t>((u + roundingBias) >> 16);
    return f != f ? static_cast<uint16_t>(0x7FC0u) : rounded;
  }
};

// A float functor applied to 16-bit floats stored as bits: widen, combine, round back.
template <typename Bits, typename FloatOp>
struct HalfOp {
  static RINGX_ELEMENT_OP uint16_t apply(uint16_t a, uint16_t b) {
    return Bits::fromFloat(FloatOp::apply(Bits::toFloat(a), Bits::toFloat(b)));
  }
};

// ---- (ReduceOp, DataType) -> storage type and functor -----------------------------------

// Calls visit.template operator()<Storage, Op>() with the storage type of `type` and the element
// functor of (op, type), and returns true; returns false when the pair is not defined (see
// reduceOpSupports). The CPU and CUDA kernels both choose through this one table. Storage is
// the type an element is read and written as: uint16_t for float16/bfloat16 (Op is a HalfOp),
// ComplexPair<T> for complex, uint8_t for bool.
template <typename Visitor>
bool visitElementOp(ReduceOp op, DataType type, Visitor&& visit) {
  auto floating = [&]<typename T>() {
    switch (op) {
      case ReduceOp::kSum:
        return visit.template operator()<T, FloatSum<T>>(), true;
      case ReduceOp::kProduct:
        return visit.template operator()<T, FloatProduct<T>>(), true;
      case ReduceOp::kMin:
        return visit.template operator()<T, FloatMin<T>>(), true;
      case ReduceOp::kMax:
        return visit.template operator()<T, FloatMax<T>>(), true;
      default:
        return false;
    }
  };
  auto half = [&]<typename Bits>() {
    switch (op) {
      case ReduceOp::kSum:
        return visit.template operator()<uint16_t, HalfOp<Bits, FloatSum<float>>>(), true;
      case ReduceOp::kProduct:
        return visit.template operator()<uint16_t, HalfOp<Bits, FloatProduct<float>>>(), true;
      case ReduceOp::kMin:
        return visit.template operator()<uint16_t, HalfOp<Bits, FloatMin<float>>>(), true;
      case ReduceOp::kMax:
        return visit.template operator()<uint16_t, HalfOp<Bits, FloatMax<float>>>(), true;
      default:
        return false;
    }
  };
  auto complex = [&]<typename T>() {
    switch (op) {
      case ReduceOp::kSum:
        return visit.template operator()<ComplexPair<T>, ComplexSum<T>>(), true;
      case ReduceOp::kProduct:
        return visit.template operator()<ComplexPair<T>, ComplexProduct<T>>(), true;
      default:
        return false;
    }
  };
  auto integer = [&]<typename T>() {
    switch (op) {
      case ReduceOp::kSum:
        return visit.template operator()<T, IntSum<T>>(), true;
      case ReduceOp::kProduct:
        return visit.template operator()<T, IntProduct<T>>(), true;
      case ReduceOp::kMin:
        return visit.template operator()<T, IntMin<T>>(), true;
      case ReduceOp::kMax:
        return visit.template operator()<T, IntMax<T>>(), true;
      case ReduceOp::kBAnd:
        return visit.template operator()<T, BitAnd<T>>(), true;
      case ReduceOp::kBOr:
        return visit.template operator()<T, BitOr<T>>(), true;
      case ReduceOp::kBXor:
        return visit.template operator()<T, BitXor<T>>(), true;
    }
    return false;
  };
  auto boolean = [&]() {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kMax:
      case ReduceOp::kBOr:
        return visit.template operator()<uint8_t, BoolOr>(), true;
      case ReduceOp::kProduct:
      case ReduceOp::kMin:
      case ReduceOp::kBAnd:
        return visit.template operator()<uint8_t, BoolAnd>(), true;
      case ReduceOp::kBXor:
        return visit.template operator()<uint8_t, BoolXor>(), true;
    }
    return false;
  };
  switch (type) {
    case DataType::kFloat32:
      return floating.template operator()<float>();
    case DataType::kFloat64:
      return floating.template operator()<double>();
    case DataType::kFloat16:
      return half.template operator()<Fp16Bits>();
    case DataType::kBFloat16:
      return half.template operator()<Bf16Bits>();
    case DataType::kComplex64:
      return complex.template operator()<float>();
    case DataType::kComplex128:
      return complex.template operator()<double>();
    case DataType::kInt8:
      return integer.template operator()<int8_t>();
    case DataType::kInt16:
      return integer.template operator()<int16_t>();
    case DataType::kInt32:
      return integer.template operator()<int32_t>();
    case DataType::kInt64:
      return integer.template operator()<int64_t>();
    case DataType::kUInt8:
      return integer.template operator()<uint8_t>();
    case DataType::kBool:
      return boolean();
  }
  return false;
}

}  // namespace ringx::reduce
