// Tests for the element-wise reduction kernels (backend/reduce) and the dtype/op tables
// (base/types).
//
// Every (op, dtype) pair is checked against a plain scalar reference written here, for several
// sizes and every aliasing shape reduce() allows. float16/bfloat16 references convert with
// straightforward arithmetic (frexp/ldexp/nearbyint) rather than bit tricks, so they are an
// independent check of the kernels' conversions. Where the machine has AVX2/F16C, each test runs
// both with the fast kernels and with the portable ones forced.
#include <gtest/gtest.h>

#include <cstdlib>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend/reduce/copy.h"
#include "backend/reduce/reduce.h"
#include "base/error.h"
#include "base/types.h"

namespace ringx::reduce::detail {
// Test hooks defined in reduce.cc (not part of reduce.h).
bool forcePortableKernelsForTesting(bool force);
bool fastKernelsAvailableForTesting();
}  // namespace ringx::reduce::detail

namespace ringx::reduce {
namespace {

constexpr ReduceOp kAllOps[] = {ReduceOp::kSum,  ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax,
                                ReduceOp::kBAnd, ReduceOp::kBOr,     ReduceOp::kBXor};
constexpr DataType kAllTypes[] = {DataType::kFloat32,  DataType::kFloat64,   DataType::kFloat16,
                                  DataType::kBFloat16, DataType::kComplex64, DataType::kComplex128,
                                  DataType::kInt8,     DataType::kInt16,     DataType::kInt32,
                                  DataType::kInt64,    DataType::kUInt8,     DataType::kBool};
constexpr size_t kCounts[] = {0, 1, 7, 1000, 4099};

static_assert(sizeof(kAllOps) / sizeof(kAllOps[0]) == kNumReduceOps);
static_assert(sizeof(kAllTypes) / sizeof(kAllTypes[0]) == kNumDataTypes);

template <typename To, typename From>
To bitCast(From from) {
  static_assert(sizeof(To) == sizeof(From));
  To to;
  std::memcpy(&to, &from, sizeof(to));
  return to;
}

// ---- reference float16 / bfloat16 conversions (arithmetic, not bit tricks) ----------------

float refHalfToFloat(uint16_t h) {
  const bool negative = (h & 0x8000) != 0;
  const int exponent = (h >> 10) & 0x1F;
  const int mantissa = h & 0x3FF;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  } else if (exponent == 31) {
    magnitude = mantissa == 0 ? std::numeric_limits<float>::infinity()
                              : std::numeric_limits<float>::quiet_NaN();
  } else {
    magnitude = std::ldexp(static_cast<float>(1024 + mantissa), exponent - 25);
  }
  return negative ? -magnitude : magnitude;
}

// Round to nearest, ties to even; NaN becomes sign|0x7E00 (c10::Half's canonical NaN).
uint16_t refFloatToHalf(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (std::isnan(f)) {
    return sign | 0x7E00;
  }
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 65520.0) {  // halfway between 65504 (largest half) and 2^16 rounds to even: inf
    return sign | 0x7C00;
  }
  int e = 0;
  std::frexp(a, &e);
  int unbiased = a == 0 ? -14 : std::max(e - 1, -14);
  double m = std::nearbyint(a / std::ldexp(1.0, unbiased - 10));
  if (m >= 2048) {
    m /= 2;
    unbiased += 1;
  }
  if (m < 1024) {
    return sign | static_cast<uint16_t>(m);
  }
  return sign | static_cast<uint16_t>((unbiased + 15) << 10) | static_cast<uint16_t>(m - 1024);
}

float refBf16ToFloat(uint16_t h) {
  const bool negative = (h & 0x8000) != 0;
  const int exponent = (h >> 7) & 0xFF;
  const int mantissa = h & 0x7F;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -133);
  } else if (exponent == 255) {
    magnitude = mantissa == 0 ? std::numeric_limits<float>::infinity()
                              : std::numeric_limits<float>::quiet_NaN();
  } else {
    magnitude = std::ldexp(static_cast<float>(128 + mantissa), exponent - 134);
  }
  return negative ? -magnitude : magnitude;
}

// Round to nearest, ties to even; NaN becomes 0x7FC0 (c10::BFloat16's canonical NaN).
uint16_t refFloatToBf16(float f) {
  if (std::isnan(f)) {
    return 0x7FC0;
  }
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(f));
  if (a >= std::ldexp(2.0 - std::ldexp(1.0, -8), 127)) {
    return sign | 0x7F80;
  }
  int e = 0;
  std::frexp(a, &e);
  int unbiased = a == 0 ? -126 : std::max(e - 1, -126);
  double m = std::nearbyint(a / std::ldexp(1.0, unbiased - 7));
  if (m >= 256) {
    m /= 2;
    unbiased += 1;
  }
  if (m < 128) {
    return sign | static_cast<uint16_t>(m);
  }
  return sign | static_cast<uint16_t>((unbiased + 127) << 7) | static_cast<uint16_t>(m - 128);
}

// ---- scalar reference ---------------------------------------------------------------------

bool isMinMax(ReduceOp op) { return op == ReduceOp::kMin || op == ReduceOp::kMax; }

template <typename T>
T refFloat(ReduceOp op, T a, T b) {
  switch (op) {
    case ReduceOp::kSum:
      return a + b;
    case ReduceOp::kProduct:
      return a * b;
    case ReduceOp::kMin:
      return std::isnan(a) || std::isnan(b) ? std::numeric_limits<T>::quiet_NaN() : std::min(a, b);
    case ReduceOp::kMax:
      return std::isnan(a) || std::isnan(b) ? std::numeric_limits<T>::quiet_NaN() : std::max(a, b);
    default:
      ADD_FAILURE() << "no float reference for " << reduceOpName(op);
      return a;
  }
}

template <typename T>
T refInt(ReduceOp op, T a, T b) {
  // uint64_t arithmetic wraps; truncating to T keeps the low bits (two's complement).
  const uint64_t ua = static_cast<uint64_t>(a);
  const uint64_t ub = static_cast<uint64_t>(b);
  switch (op) {
    case ReduceOp::kSum:
      return static_cast<T>(ua + ub);
    case ReduceOp::kProduct:
      return static_cast<T>(ua * ub);
    case ReduceOp::kMin:
      return std::min(a, b);
    case ReduceOp::kMax:
      return std::max(a, b);
    case ReduceOp::kBAnd:
      return static_cast<T>(a & b);
    case ReduceOp::kBOr:
      return static_cast<T>(a | b);
    case ReduceOp::kBXor:
      return static_cast<T>(a ^ b);
  }
  return a;
}

uint8_t refBool(ReduceOp op, uint8_t a, uint8_t b) {
  const bool x = a != 0;
  const bool y = b != 0;
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kMax:
    case ReduceOp::kBOr:
      return x || y;
    case ReduceOp::kProduct:
    case ReduceOp::kMin:
    case ReduceOp::kBAnd:
      return x && y;
    case ReduceOp::kBXor:
      return x != y;
  }
  return 0;
}

template <typename T>
void refComplex(ReduceOp op, const T* a, const T* b, T* out) {
  if (op == ReduceOp::kSum) {
    out[0] = a[0] + b[0];
    out[1] = a[1] + b[1];
  } else {
    ASSERT_EQ(op, ReduceOp::kProduct);
    out[0] = a[0] * b[0] - a[1] * b[1];
    out[1] = a[0] * b[1] + a[1] * b[0];
  }
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
void store(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

// out = op(a, b) for one element of `type`.
void refElement(ReduceOp op, DataType type, const uint8_t* a, const uint8_t* b, uint8_t* out) {
  switch (type) {
    case DataType::kFloat32:
      return store(out, refFloat(op, load<float>(a), load<float>(b)));
    case DataType::kFloat64:
      return store(out, refFloat(op, load<double>(a), load<double>(b)));
    case DataType::kFloat16:
      return store(out, refFloatToHalf(refFloat(op, refHalfToFloat(load<uint16_t>(a)),
                                                refHalfToFloat(load<uint16_t>(b)))));
    case DataType::kBFloat16:
      return store(out, refFloatToBf16(refFloat(op, refBf16ToFloat(load<uint16_t>(a)),
                                                refBf16ToFloat(load<uint16_t>(b)))));
    case DataType::kComplex64: {
      float x[2], y[2], z[2];
      std::memcpy(x, a, sizeof(x));
      std::memcpy(y, b, sizeof(y));
      refComplex(op, x, y, z);
      std::memcpy(out, z, sizeof(z));
      return;
    }
    case DataType::kComplex128: {
      double x[2], y[2], z[2];
      std::memcpy(x, a, sizeof(x));
      std::memcpy(y, b, sizeof(y));
      refComplex(op, x, y, z);
      std::memcpy(out, z, sizeof(z));
      return;
    }
    case DataType::kInt8:
      return store(out, refInt(op, load<int8_t>(a), load<int8_t>(b)));
    case DataType::kInt16:
      return store(out, refInt(op, load<int16_t>(a), load<int16_t>(b)));
    case DataType::kInt32:
      return store(out, refInt(op, load<int32_t>(a), load<int32_t>(b)));
    case DataType::kInt64:
      return store(out, refInt(op, load<int64_t>(a), load<int64_t>(b)));
    case DataType::kUInt8:
      return store(out, refInt(op, load<uint8_t>(a), load<uint8_t>(b)));
    case DataType::kBool:
      return store(out, refBool(op, load<uint8_t>(a), load<uint8_t>(b)));
  }
}

// ---- comparison ---------------------------------------------------------------------------

bool isHalfNan(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0; }

// Compares one floating-point component. Results must be bit-identical, except that a NaN
// produced by SUM/PRODUCT only has to be a NaN: when both operands are NaN, which one the
// hardware propagates depends on instruction operand order. MIN/MAX NaNs are canonical.
template <typename T>
bool sameFloat(ReduceOp op, T expected, T actual) {
  if (std::isnan(expected) && !isMinMax(op)) {
    return std::isnan(actual);
  }
  return std::memcmp(&expected, &actual, sizeof(T)) == 0;
}

// Where the compiler may fuse multiply-adds (-mfma with GCC's default -ffp-contract=fast in gnu++
// modes, or targets where FMA is the norm), the kernel's and this file's (ac - bd) may be rounded
// differently; the complex product is then checked to within a few ulps of its terms instead.
#if defined(__FP_FAST_FMA) || defined(__FP_FAST_FMAF) || defined(__FMA__)
constexpr bool kMayContract = true;
#else
constexpr bool kMayContract = false;
#endif

template <typename T>
bool closeComplexProduct(const uint8_t* x, const uint8_t* y, const uint8_t* expected,
                         const uint8_t* actual) {
  const T a = load<T>(x), b = load<T>(x + sizeof(T));
  const T c = load<T>(y), d = load<T>(y + sizeof(T));
  const T terms[2] = {std::fabs(a * c) + std::fabs(b * d), std::fabs(a * d) + std::fabs(b * c)};
  for (int k = 0; k < 2; ++k) {
    const T e = load<T>(expected + k * sizeof(T));
    const T got = load<T>(actual + k * sizeof(T));
    if (!std::isfinite(terms[k])) {
      continue;  // an intermediate overflowed: fused and unfused results legitimately differ
    }
    if (std::isnan(e) || std::isnan(got) || std::isinf(e) || std::isinf(got)) {
      if (!sameFloat(ReduceOp::kProduct, e, got)) {
        return false;
      }
    } else if (std::fabs(e - got) > 4 * std::numeric_limits<T>::epsilon() * terms[k]) {
      return false;
    }
  }
  return true;
}

// `x` and `y` are the operands, for the FMA-tolerant complex product check.
bool sameElement(ReduceOp op, DataType type, const uint8_t* x, const uint8_t* y,
                 const uint8_t* expected, const uint8_t* actual) {
  if (kMayContract && op == ReduceOp::kProduct) {
    if (type == DataType::kComplex64) {
      return closeComplexProduct<float>(x, y, expected, actual);
    }
    if (type == DataType::kComplex128) {
      return closeComplexProduct<double>(x, y, expected, actual);
    }
  }
  switch (type) {
    case DataType::kFloat32:
      return sameFloat(op, load<float>(expected), load<float>(actual));
    case DataType::kFloat64:
      return sameFloat(op, load<double>(expected), load<double>(actual));
    case DataType::kComplex64:
      return sameFloat(op, load<float>(expected), load<float>(actual)) &&
             sameFloat(op, load<float>(expected + 4), load<float>(actual + 4));
    case DataType::kComplex128:
      return sameFloat(op, load<double>(expected), load<double>(actual)) &&
             sameFloat(op, load<double>(expected + 8), load<double>(actual + 8));
    case DataType::kFloat16: {
      const uint16_t e = load<uint16_t>(expected);
      const uint16_t a = load<uint16_t>(actual);
      if (isHalfNan(e) && !isMinMax(op)) {
        return (a & 0x7FFF) == 0x7E00;  // any sign, canonical payload
      }
      return e == a;
    }
    case DataType::kBFloat16: {
      const uint16_t e = load<uint16_t>(expected);
      const uint16_t a = load<uint16_t>(actual);
      return e == a;  // NaN is always 0x7FC0
    }
    default:
      return std::memcmp(expected, actual, elementSize(type)) == 0;
  }
}

std::string hexBytes(const uint8_t* p, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string s = "0x";
  for (size_t i = n; i-- > 0;) {  // little-endian: most significant byte first
    s += kDigits[p[i] >> 4];
    s += kDigits[p[i] & 15];
  }
  return s;
}

// ---- random inputs ------------------------------------------------------------------------

template <typename T>
T randomFloat(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> pick(0, 99);
  const int p = pick(rng);
  if (p < 8) {
    const T specials[] = {T(0),
                          -T(0),
                          std::numeric_limits<T>::infinity(),
                          -std::numeric_limits<T>::infinity(),
                          std::numeric_limits<T>::quiet_NaN(),
                          -std::numeric_limits<T>::quiet_NaN(),
                          std::numeric_limits<T>::denorm_min(),
                          std::numeric_limits<T>::max(),
                          -std::numeric_limits<T>::max(),
                          T(1),
                          T(-1)};
    return specials[static_cast<size_t>(rng() % (sizeof(specials) / sizeof(specials[0])))];
  }
  std::uniform_real_distribution<T> value(T(-8), T(8));
  std::uniform_int_distribution<int> scale(-20, 20);
  return std::ldexp(value(rng), scale(rng));
}

// Half-width floats: half of them random bit patterns (every class: subnormals, inf, NaN with
// payloads), half moderate values so sums and products round in interesting places.
uint16_t randomHalfBits(std::mt19937_64& rng, bool bf16) {
  if (rng() % 2 == 0) {
    return static_cast<uint16_t>(rng());
  }
  std::uniform_real_distribution<float> value(-4.0f, 4.0f);
  const float f = value(rng);
  return bf16 ? refFloatToBf16(f) : refFloatToHalf(f);
}

void fillRandom(DataType type, std::mt19937_64& rng, uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint8_t* e = p + i * elementSize(type);
    switch (type) {
      case DataType::kFloat32:
        store(e, randomFloat<float>(rng));
        break;
      case DataType::kFloat64:
        store(e, randomFloat<double>(rng));
        break;
      case DataType::kComplex64:
        store(e, randomFloat<float>(rng));
        store(e + 4, randomFloat<float>(rng));
        break;
      case DataType::kComplex128:
        store(e, randomFloat<double>(rng));
        store(e + 8, randomFloat<double>(rng));
        break;
      case DataType::kFloat16:
        store(e, randomHalfBits(rng, false));
        break;
      case DataType::kBFloat16:
        store(e, randomHalfBits(rng, true));
        break;
      case DataType::kBool:
        store(e, static_cast<uint8_t>(rng() & 1));
        break;
      default: {  // integers: full-range bit patterns, so sums and products overflow
        const uint64_t bits = rng();
        std::memcpy(e, &bits, elementSize(type));
        break;
      }
    }
  }
}

// ---- buffers with guard zones -------------------------------------------------------------

constexpr size_t kGuardBytes = 64;
constexpr uint8_t kGuardByte = 0xA5;

// `count` elements starting `offsetBytes` into a guarded allocation, so misaligned starts and
// writes past either end are exercised and detected.
class Buffer {
 public:
  Buffer(DataType type, size_t count, size_t offsetBytes)
      : bytes_(count * elementSize(type)),
        offset_(kGuardBytes + offsetBytes),
        storage_(bytes_ + 2 * kGuardBytes + offsetBytes, kGuardByte) {}

  uint8_t* data() { return storage_.data() + offset_; }
  const uint8_t* data() const { return storage_.data() + offset_; }
  size_t bytes() const { return bytes_; }

  void assign(const std::vector<uint8_t>& values) {
    ASSERT_EQ(values.size(), bytes_);
    if (bytes_ > 0) {
      std::memcpy(data(), values.data(), bytes_);
    }
  }

  bool guardsIntact() const {
    for (size_t i = 0; i < storage_.size(); ++i) {
      const bool inside = i >= offset_ && i < offset_ + bytes_;
      if (!inside && storage_[i] != kGuardByte) {
        return false;
      }
    }
    return true;
  }

 private:
  size_t bytes_;
  size_t offset_;
  std::vector<uint8_t> storage_;
};

std::vector<uint8_t> referenceResult(ReduceOp op, DataType type, const std::vector<uint8_t>& a,
                                     const std::vector<uint8_t>& b) {
  const size_t size = elementSize(type);
  std::vector<uint8_t> out(a.size());
  for (size_t i = 0; i < a.size(); i += size) {
    refElement(op, type, a.data() + i, b.data() + i, out.data() + i);
  }
  return out;
}

void expectMatches(ReduceOp op, DataType type, const std::vector<uint8_t>& a,
                   const std::vector<uint8_t>& b, const std::vector<uint8_t>& expected,
                   const Buffer& actual, const std::string& what) {
  ASSERT_TRUE(actual.guardsIntact()) << what << ": wrote outside the output";
  const size_t size = elementSize(type);
  int failures = 0;
  for (size_t i = 0; i < expected.size(); i += size) {
    if (!sameElement(op, type, a.data() + i, b.data() + i, expected.data() + i,
                     actual.data() + i)) {
      ADD_FAILURE() << what << ": element " << i / size << " of " << expected.size() / size
                    << ": op(" << hexBytes(a.data() + i, size) << ", "
                    << hexBytes(b.data() + i, size) << ") expected "
                    << hexBytes(expected.data() + i, size) << " got "
                    << hexBytes(actual.data() + i, size);
      if (++failures >= 10) {
        return;
      }
    }
  }
}

// Runs every aliasing shape of reduce()/reduceInPlace() on (a, b) and checks the reference.
void checkAllShapes(ReduceOp op, DataType type, const std::vector<uint8_t>& a,
                    const std::vector<uint8_t>& b, size_t offsetBytes, const std::string& what) {
  const size_t count = a.size() / elementSize(type);
  const std::vector<uint8_t> expected = referenceResult(op, type, a, b);
  {
    Buffer x(type, count, offsetBytes), y(type, count, offsetBytes), out(type, count, 0);
    x.assign(a);
    y.assign(b);
    reduce(op, type, out.data(), x.data(), y.data(), count);
    expectMatches(op, type, a, b, expected, out, what + " out distinct");
    EXPECT_TRUE(std::equal(a.begin(), a.end(), x.data())) << what << ": input a modified";
    EXPECT_TRUE(std::equal(b.begin(), b.end(), y.data())) << what << ": input b modified";
  }
  {
    Buffer x(type, count, offsetBytes), y(type, count, 0);
    x.assign(a);
    y.assign(b);
    reduce(op, type, x.data(), x.data(), y.data(), count);
    expectMatches(op, type, a, b, expected, x, what + " out == a");
  }
  {
    Buffer x(type, count, 0), y(type, count, offsetBytes);
    x.assign(a);
    y.assign(b);
    reduce(op, type, y.data(), x.data(), y.data(), count);
    expectMatches(op, type, a, b, expected, y, what + " out == b");
  }
  {
    Buffer x(type, count, offsetBytes), y(type, count, 0);
    x.assign(a);
    y.assign(b);
    reduceInPlace(op, type, x.data(), y.data(), count);
    expectMatches(op, type, a, b, expected, x, what + " reduceInPlace");
  }
  {
    const std::vector<uint8_t> selfExpected = referenceResult(op, type, a, a);
    Buffer x(type, count, offsetBytes), out(type, count, 0);
    x.assign(a);
    reduce(op, type, out.data(), x.data(), x.data(), count);
    expectMatches(op, type, a, a, selfExpected, out, what + " a == b");
    reduce(op, type, x.data(), x.data(), x.data(), count);
    expectMatches(op, type, a, a, selfExpected, x, what + " out == a == b");
  }
}

// Runs `body` with the fast kernels (where the CPU has them) and with the portable ones forced.
template <typename Body>
void forEachKernelFlavour(Body body) {
  const bool fast = detail::fastKernelsAvailableForTesting();
  for (const bool portable : {false, true}) {
    if (!portable && !fast) {
      continue;
    }
    const bool previous = detail::forcePortableKernelsForTesting(portable);
    SCOPED_TRACE(portable ? "portable kernels" : "AVX2/F16C kernels");
    body();
    detail::forcePortableKernelsForTesting(previous);
  }
}

// ---- every (op, dtype) pair ---------------------------------------------------------------

class ReducePairTest : public ::testing::TestWithParam<std::tuple<ReduceOp, DataType>> {};

TEST_P(ReducePairTest, MatchesScalarReferenceOrThrows) {
  const auto [op, type] = GetParam();
  if (!reduceOpSupports(op, type)) {
    EXPECT_THROW(checkSupported(op, type), InvalidArgument);
    std::vector<uint8_t> a(4 * elementSize(type)), b(a.size()), out(a.size());
    EXPECT_THROW(reduce(op, type, out.data(), a.data(), b.data(), 4), InvalidArgument);
    EXPECT_THROW(reduceInPlace(op, type, a.data(), b.data(), 4), InvalidArgument);
    EXPECT_THROW(reduce(op, type, nullptr, nullptr, nullptr, 0), InvalidArgument);
    try {
      checkSupported(op, type);
    } catch (const InvalidArgument& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(reduceOpName(op)), std::string::npos) << message;
      EXPECT_NE(message.find(dataTypeName(type)), std::string::npos) << message;
    }
    return;
  }

  EXPECT_NO_THROW(checkSupported(op, type));
  // count 0 is a no-op, even with null pointers.
  EXPECT_NO_THROW(reduce(op, type, nullptr, nullptr, nullptr, 0));
  EXPECT_NO_THROW(reduceInPlace(op, type, nullptr, nullptr, 0));

  forEachKernelFlavour([&, op = op, type = type] {
    std::mt19937_64 rng(static_cast<uint64_t>(op) * 1000 + static_cast<uint64_t>(type));
    for (const size_t count : kCounts) {
      for (const size_t offset : {size_t{0}, elementSize(type)}) {
        std::vector<uint8_t> a(count * elementSize(type)), b(a.size());
        fillRandom(type, rng, a.data(), count);
        fillRandom(type, rng, b.data(), count);
        checkAllShapes(op, type, a, b, offset,
                       "count " + std::to_string(count) + " offset " + std::to_string(offset));
        if (HasFailure()) {
          return;
        }
      }
    }
  });
}

std::string pairName(const ::testing::TestParamInfo<std::tuple<ReduceOp, DataType>>& info) {
  return std::string(reduceOpName(std::get<0>(info.param))) + "_" +
         dataTypeName(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(AllPairs, ReducePairTest,
                         ::testing::Combine(::testing::ValuesIn(kAllOps),
                                            ::testing::ValuesIn(kAllTypes)),
                         pairName);

// ---- types.h tables -----------------------------------------------------------------------

TEST(TypesTest, NamesAndSizes) {
  const char* names[] = {"float32", "float64", "float16", "bfloat16", "complex64", "complex128",
                         "int8",    "int16",   "int32",   "int64",    "uint8",     "bool"};
  const size_t sizes[] = {4, 8, 2, 2, 8, 16, 1, 2, 4, 8, 1, 1};
  for (int i = 0; i < kNumDataTypes; ++i) {
    EXPECT_STREQ(dataTypeName(kAllTypes[i]), names[i]);
    EXPECT_EQ(elementSize(kAllTypes[i]), sizes[i]) << names[i];
  }
  const char* opNames[] = {"SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"};
  for (int i = 0; i < kNumReduceOps; ++i) {
    EXPECT_STREQ(reduceOpName(kAllOps[i]), opNames[i]);
  }
}

TEST(TypesTest, SupportTable) {
  for (const DataType type : kAllTypes) {
    const bool complex = type == DataType::kComplex64 || type == DataType::kComplex128;
    const bool floating = complex || type == DataType::kFloat32 || type == DataType::kFloat64 ||
                          type == DataType::kFloat16 || type == DataType::kBFloat16;
    SCOPED_TRACE(dataTypeName(type));
    EXPECT_TRUE(reduceOpSupports(ReduceOp::kSum, type));
    EXPECT_TRUE(reduceOpSupports(ReduceOp::kProduct, type));
    EXPECT_EQ(reduceOpSupports(ReduceOp::kMin, type), !complex);
    EXPECT_EQ(reduceOpSupports(ReduceOp::kMax, type), !complex);
    EXPECT_EQ(reduceOpSupports(ReduceOp::kBAnd, type), !floating);
    EXPECT_EQ(reduceOpSupports(ReduceOp::kBOr, type), !floating);
    EXPECT_EQ(reduceOpSupports(ReduceOp::kBXor, type), !floating);
  }
}

TEST(ReduceTest, UnsupportedMessages) {
  try {
    checkSupported(ReduceOp::kBXor, DataType::kFloat32);
    FAIL() << "BXOR on float32 did not throw";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("ringx: reduce op BXOR is not supported for dtype "
                                         "float32 (bitwise ops need an integer or bool tensor)"),
              std::string::npos)
        << e.what();
  }
  try {
    checkSupported(ReduceOp::kMin, DataType::kComplex128);
    FAIL() << "MIN on complex128 did not throw";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("ringx: reduce op MIN is not supported for dtype "
                                         "complex128 (MIN/MAX are not defined for complex "
                                         "tensors)"),
              std::string::npos)
        << e.what();
  }
}

TEST(ReduceTest, PartialOverlapIsRejected) {
  std::vector<float> buffer(64, 1.0f);
  EXPECT_THROW(reduce(ReduceOp::kSum, DataType::kFloat32, buffer.data() + 1, buffer.data(),
                      buffer.data() + 32, 16),
               InvalidArgument);
  EXPECT_THROW(reduce(ReduceOp::kSum, DataType::kFloat32, buffer.data(), buffer.data() + 32,
                      buffer.data() + 8, 16),
               InvalidArgument);
  // Adjacent but disjoint is fine, and the inputs may overlap each other.
  EXPECT_NO_THROW(reduce(ReduceOp::kSum, DataType::kFloat32, buffer.data(), buffer.data() + 16,
                         buffer.data() + 20, 16));
  EXPECT_EQ(buffer[0], 2.0f);
}

// Shared-memory rings are byte streams: after an odd-sized message an operand can start at any
// address. Misaligned operands (each of them, and `out` aliasing an input) give the same bits as
// aligned ones, across the kernels' block boundaries.
TEST(ReduceTest, MisalignedOperandsGiveTheAlignedResult) {
  std::mt19937 random(7);
  for (DataType type : kAllTypes) {
    for (ReduceOp op : kAllOps) {
      if (!reduceOpSupports(op, type)) continue;
      const size_t size = elementSize(type), count = 9000 / size + 3, bytes = count * size;
      // Bools must be 0 or 1; other types take any bits.
      std::vector<unsigned char> a(bytes), b(bytes);
      for (size_t i = 0; i < bytes; ++i) {
        a[i] = type == DataType::kBool ? random() % 2 : random();
        b[i] = type == DataType::kBool ? random() % 2 : random();
      }
      alignas(16) static unsigned char expected[16384];
      alignas(16) static unsigned char alignedA[16384], alignedB[16384];
      std::memcpy(alignedA, a.data(), bytes);
      std::memcpy(alignedB, b.data(), bytes);
      reduce(op, type, expected, alignedA, alignedB, count);
      for (int shape = 0; shape < 4; ++shape) {
        // Offsets 1, 3 and 5 bytes off alignment, on the operands each shape names.
        std::vector<unsigned char> bufOut(bytes + 16), bufA(bytes + 16), bufB(bytes + 16);
        unsigned char* x = bufA.data() + (shape == 0 || shape == 3 ? 1 : 0);
        unsigned char* y = bufB.data() + (shape == 1 || shape == 3 ? 3 : 0);
        unsigned char* o = bufOut.data() + (shape == 2 ? 5 : 0);
        std::memcpy(x, a.data(), bytes);
        std::memcpy(y, b.data(), bytes);
        if (shape == 3) o = x;  // in place, in = out misaligned
        reduce(op, type, o, x, y, count);
        ASSERT_EQ(std::memcmp(o, expected, bytes), 0)
            << reduceOpName(op) << " " << dataTypeName(type) << " shape " << shape;
      }
    }
  }
}

// ---- specific semantics -------------------------------------------------------------------

TEST(ReduceTest, FloatMinMaxPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // 40 elements so both the vector loop and the scalar tail see NaNs.
  std::vector<float> a, b;
  for (int i = 0; i < 10; ++i) {
    a.insert(a.end(), {nan, 1.0f, -nan, -inf});
    b.insert(b.end(), {1.0f, nan, nan, -nan});
  }
  forEachKernelFlavour([&] {
    for (const ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
      std::vector<float> out(a.size());
      reduce(op, DataType::kFloat32, out.data(), a.data(), b.data(), a.size());
      for (const float v : out) {
        EXPECT_TRUE(std::isnan(v)) << reduceOpName(op);
      }
      std::vector<double> a64(a.begin(), a.end()), b64(b.begin(), b.end()), out64(a.size());
      reduce(op, DataType::kFloat64, out64.data(), a64.data(), b64.data(), a.size());
      for (const double v : out64) {
        EXPECT_TRUE(std::isnan(v)) << reduceOpName(op);
      }
      for (const DataType type : {DataType::kFloat16, DataType::kBFloat16}) {
        const bool bf16 = type == DataType::kBFloat16;
        std::vector<uint16_t> ha, hb, hout(a.size());
        for (size_t i = 0; i < a.size(); ++i) {
          ha.push_back(bf16 ? refFloatToBf16(a[i]) : refFloatToHalf(a[i]));
          hb.push_back(bf16 ? refFloatToBf16(b[i]) : refFloatToHalf(b[i]));
        }
        // A float16 NaN with a payload must come out as a NaN too.
        if (!bf16) {
          ha[2] = 0xFC01;
        }
        reduce(op, type, hout.data(), ha.data(), hb.data(), a.size());
        for (const uint16_t h : hout) {
          EXPECT_EQ(h, bf16 ? 0x7FC0 : 0x7E00) << reduceOpName(op) << " " << dataTypeName(type);
        }
      }
    }
  });
  // Without NaNs the order is std::min/std::max's: the first operand wins a tie.
  const float zeros[] = {0.0f, -0.0f};
  const float negZeros[] = {-0.0f, 0.0f};
  float out[2];
  reduce(ReduceOp::kMin, DataType::kFloat32, out, zeros, negZeros, 2);
  EXPECT_FALSE(std::signbit(out[0]));
  EXPECT_TRUE(std::signbit(out[1]));
}

TEST(ReduceTest, BoolSemantics) {
  // Truth tables over (a, b) = (0,0), (0,1), (1,0), (1,1), repeated so vector loops run.
  const uint8_t as[] = {0, 0, 1, 1};
  const uint8_t bs[] = {0, 1, 0, 1};
  struct Case {
    ReduceOp op;
    uint8_t expected[4];
  };
  const Case cases[] = {
      {ReduceOp::kSum, {0, 1, 1, 1}},  {ReduceOp::kProduct, {0, 0, 0, 1}},
      {ReduceOp::kMin, {0, 0, 0, 1}},  {ReduceOp::kMax, {0, 1, 1, 1}},
      {ReduceOp::kBAnd, {0, 0, 0, 1}}, {ReduceOp::kBOr, {0, 1, 1, 1}},
      {ReduceOp::kBXor, {0, 1, 1, 0}},
  };
  constexpr size_t kN = 4 * 33;
  for (const Case& c : cases) {
    std::vector<uint8_t> a(kN), b(kN), out(kN);
    for (size_t i = 0; i < kN; ++i) {
      a[i] = as[i % 4];
      b[i] = bs[i % 4];
    }
    reduce(c.op, DataType::kBool, out.data(), a.data(), b.data(), kN);
    for (size_t i = 0; i < kN; ++i) {
      EXPECT_EQ(out[i], c.expected[i % 4]) << reduceOpName(c.op) << " at " << i;
    }
    // Summing true + true stays 1 (logical or), never 2.
    std::vector<uint8_t> ones(kN, 1);
    reduceInPlace(c.op, DataType::kBool, ones.data(), ones.data(), kN);
    for (const uint8_t v : ones) {
      EXPECT_EQ(v, c.op == ReduceOp::kBXor ? 0 : 1) << reduceOpName(c.op);
    }
    // Any nonzero byte counts as true and results are normalised to 0/1.
    std::vector<uint8_t> odd(kN, 2), oddB(kN, 0xFF);
    reduce(c.op, DataType::kBool, out.data(), odd.data(), oddB.data(), kN);
    for (const uint8_t v : out) {
      EXPECT_EQ(v, c.op == ReduceOp::kBXor ? 0 : 1) << reduceOpName(c.op);
    }
  }
}

TEST(ReduceTest, IntegerOverflowWraps) {
  constexpr size_t kN = 37;
  {
    std::vector<int8_t> a(kN, 127), b(kN, 1);
    reduceInPlace(ReduceOp::kSum, DataType::kInt8, a.data(), b.data(), kN);
    for (const int8_t v : a) EXPECT_EQ(v, -128);
    std::vector<int8_t> c(kN, 16), d(kN, 16);
    reduceInPlace(ReduceOp::kProduct, DataType::kInt8, c.data(), d.data(), kN);
    for (const int8_t v : c) EXPECT_EQ(v, 0);
  }
  {
    std::vector<uint8_t> a(kN, 255), b(kN, 2);
    reduceInPlace(ReduceOp::kSum, DataType::kUInt8, a.data(), b.data(), kN);
    for (const uint8_t v : a) EXPECT_EQ(v, 1);
  }
  {
    std::vector<int16_t> a(kN, -32768), b(kN, -1);
    reduceInPlace(ReduceOp::kProduct, DataType::kInt16, a.data(), b.data(), kN);
    for (const int16_t v : a) EXPECT_EQ(v, -32768);
    std::vector<int16_t> c(kN, -32768), d(kN, -32768);  // 2^30: would overflow int if promoted
    reduceInPlace(ReduceOp::kProduct, DataType::kInt16, c.data(), d.data(), kN);
    for (const int16_t v : c) EXPECT_EQ(v, 0);
  }
  {
    std::vector<int32_t> a(kN, std::numeric_limits<int32_t>::max()), b(kN, 1);
    reduceInPlace(ReduceOp::kSum, DataType::kInt32, a.data(), b.data(), kN);
    for (const int32_t v : a) EXPECT_EQ(v, std::numeric_limits<int32_t>::min());
    std::vector<int32_t> c(kN, 65536), d(kN, 65537);
    reduceInPlace(ReduceOp::kProduct, DataType::kInt32, c.data(), d.data(), kN);
    for (const int32_t v : c) EXPECT_EQ(v, 65536);
  }
  {
    std::vector<int64_t> a(kN, std::numeric_limits<int64_t>::min()), b(kN, -1);
    reduceInPlace(ReduceOp::kSum, DataType::kInt64, a.data(), b.data(), kN);
    for (const int64_t v : a) EXPECT_EQ(v, std::numeric_limits<int64_t>::max());
    std::vector<int64_t> c(kN, int64_t{1} << 62), d(kN, 4);
    reduceInPlace(ReduceOp::kProduct, DataType::kInt64, c.data(), d.data(), kN);
    for (const int64_t v : c) EXPECT_EQ(v, 0);
  }
}

TEST(ReduceTest, ComplexArithmetic) {
  const float a[] = {1, 2, -1.5f, 0.5f};
  const float b[] = {3, 4, 2, -4};
  float out[4];
  reduce(ReduceOp::kProduct, DataType::kComplex64, out, a, b, 2);
  EXPECT_EQ(out[0], -5.0f);  // (1+2i)(3+4i) = -5+10i
  EXPECT_EQ(out[1], 10.0f);
  EXPECT_EQ(out[2], -1.0f);  // (-1.5+0.5i)(2-4i) = -1+7i
  EXPECT_EQ(out[3], 7.0f);
  reduce(ReduceOp::kSum, DataType::kComplex64, out, a, b, 2);
  EXPECT_EQ(out[0], 4.0f);
  EXPECT_EQ(out[1], 6.0f);
  EXPECT_EQ(out[2], 0.5f);
  EXPECT_EQ(out[3], -3.5f);
  const double c[] = {0.5, -2};
  const double d[] = {-2, 0.25};
  double z[2];
  reduce(ReduceOp::kProduct, DataType::kComplex128, z, c, d, 1);
  EXPECT_EQ(z[0], -0.5);  // (0.5-2i)(-2+0.25i) = -1 + 0.5 + (0.125 + 4)i
  EXPECT_EQ(z[1], 4.125);
}

// Bit patterns -> expected results for a few rounding cases a kernel could get wrong.
TEST(ReduceTest, HalfRounding) {
  struct Case {
    DataType type;
    ReduceOp op;
    float a, b;
    uint16_t expected;
  };
  const float tiny = std::ldexp(1.0f, -24);  // smallest float16 subnormal
  const Case cases[] = {
      // float16: 1 + 2^-11 is a tie between 1 and 1 + 2^-10: even wins (1.0).
      {DataType::kFloat16, ReduceOp::kSum, 1.0f, std::ldexp(1.0f, -11), 0x3C00},
      // (1 + 2^-10) + 2^-11 ties between odd 0x3C01 and even 0x3C02: rounds up.
      {DataType::kFloat16, ReduceOp::kSum, 1.0f + std::ldexp(1.0f, -10), std::ldexp(1.0f, -11),
       0x3C02},
      {DataType::kFloat16, ReduceOp::kSum, 65504.0f, 15.0f, 0x7BFF},     // 65519 -> 65504
      {DataType::kFloat16, ReduceOp::kSum, 65504.0f, 16.0f, 0x7C00},     // 65520 -> inf
      {DataType::kFloat16, ReduceOp::kSum, -65504.0f, -16.0f, 0xFC00},   // -inf
      {DataType::kFloat16, ReduceOp::kProduct, tiny, 0.5f, 0x0000},      // tie -> 0 (even)
      {DataType::kFloat16, ReduceOp::kProduct, -tiny, 0.5f, 0x8000},     // -0
      {DataType::kFloat16, ReduceOp::kProduct, tiny, 1.5f, 0x0002},      // tie -> 2 tiny (even)
      {DataType::kFloat16, ReduceOp::kProduct, tiny * 3, 0.5f, 0x0002},  // 1.5 tiny -> 2
      {DataType::kFloat16, ReduceOp::kSum, std::ldexp(1.0f, -14), -tiny, 0x03FF},  // subnormal
      {DataType::kFloat16, ReduceOp::kProduct, 256.0f, 256.0f, 0x7C00},            // overflow
      {DataType::kFloat16, ReduceOp::kSum, std::numeric_limits<float>::infinity(),
       -std::numeric_limits<float>::infinity(), 0x7E00},  // NaN (either sign; checked below)
      // bfloat16: 1 + 2^-8 ties between 1 and 1 + 2^-7: even (1.0).
      {DataType::kBFloat16, ReduceOp::kSum, 1.0f, std::ldexp(1.0f, -8), 0x3F80},
      {DataType::kBFloat16, ReduceOp::kSum, 1.0f + std::ldexp(1.0f, -7), std::ldexp(1.0f, -8),
       0x3F82},
      {DataType::kBFloat16, ReduceOp::kProduct, std::ldexp(1.0f, 100), std::ldexp(1.0f, 100),
       0x7F80},
      {DataType::kBFloat16, ReduceOp::kSum, std::numeric_limits<float>::infinity(),
       -std::numeric_limits<float>::infinity(), 0x7FC0},
  };
  forEachKernelFlavour([&] {
    for (const Case& c : cases) {
      const bool bf16 = c.type == DataType::kBFloat16;
      // Replicate across 20 elements so the vector loop and the tail both see the case.
      constexpr size_t kN = 20;
      std::vector<uint16_t> a(kN, bf16 ? refFloatToBf16(c.a) : refFloatToHalf(c.a));
      std::vector<uint16_t> b(kN, bf16 ? refFloatToBf16(c.b) : refFloatToHalf(c.b));
      ASSERT_EQ(bf16 ? refBf16ToFloat(a[0]) : refHalfToFloat(a[0]), c.a) << "not representable";
      ASSERT_EQ(bf16 ? refBf16ToFloat(b[0]) : refHalfToFloat(b[0]), c.b) << "not representable";
      std::vector<uint16_t> out(kN);
      reduce(c.op, c.type, out.data(), a.data(), b.data(), kN);
      for (const uint16_t v : out) {
        const uint16_t got = c.expected == 0x7E00 ? (v & 0x7FFF) : v;
        EXPECT_EQ(got, c.expected)
            << reduceOpName(c.op) << "(" << c.a << ", " << c.b << ") as " << dataTypeName(c.type);
      }
    }
  });
}

// Every float16 / bfloat16 bit pattern as the first operand against random second operands.
TEST(ReduceTest, HalfTypesAllBitPatterns) {
  std::vector<uint8_t> a(65536 * 2);
  for (uint32_t i = 0; i < 65536; ++i) {
    store(a.data() + 2 * i, static_cast<uint16_t>(i));
  }
  std::mt19937_64 rng(7);
  forEachKernelFlavour([&] {
    for (const DataType type : {DataType::kFloat16, DataType::kBFloat16}) {
      for (const ReduceOp op :
           {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax}) {
        for (int round = 0; round < 3; ++round) {
          std::vector<uint8_t> b(a.size());
          if (round == 0) {
            // Identity operands: every value must survive the float round trip exactly.
            const float identity = op == ReduceOp::kProduct ? 1.0f
                                   : op == ReduceOp::kSum   ? -0.0f
                                   : op == ReduceOp::kMin   ? std::numeric_limits<float>::infinity()
                                                          : -std::numeric_limits<float>::infinity();
            const uint16_t bits =
                type == DataType::kBFloat16 ? refFloatToBf16(identity) : refFloatToHalf(identity);
            for (size_t i = 0; i < 65536; ++i) {
              store(b.data() + 2 * i, bits);
            }
          } else {
            fillRandom(type, rng, b.data(), 65536);
          }
          Buffer out(type, 65536, 0);
          reduce(op, type, out.data(), a.data(), b.data(), 65536);
          expectMatches(op, type, a, b, referenceResult(op, type, a, b), out,
                        std::string(dataTypeName(type)) + " " + reduceOpName(op));
          if (HasFailure()) {
            return;
          }
        }
      }
    }
  });
}

#if defined(__FLT16_MAX__)
// The reference float16 conversions agree with the compiler's _Float16.
TEST(ReduceTest, ReferenceHalfConversionsMatchFloat16) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    const float expected = static_cast<float>(bitCast<_Float16>(h));
    const float actual = refHalfToFloat(h);
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(actual)) << h;
    } else {
      EXPECT_EQ(bitCast<uint32_t>(expected), bitCast<uint32_t>(actual)) << h;
    }
  }
  std::mt19937_64 rng(11);
  for (int i = 0; i < 1 << 20; ++i) {
    // Random float bit patterns, biased toward the float16 exponent range.
    uint32_t bits = static_cast<uint32_t>(rng());
    if (i % 2 == 0) {
      bits = (bits & 0x807FFFFFu) | ((100u + static_cast<uint32_t>(rng() % 60)) << 23);
    }
    const float f = bitCast<float>(bits);
    if (std::isnan(f)) {
      continue;
    }
    ASSERT_EQ(bitCast<uint16_t>(static_cast<_Float16>(f)), refFloatToHalf(f)) << f;
  }
}
#endif

TEST(CopyStreaming, EveryAlignmentAndSize) {
  std::vector<unsigned char> source(5000), target(5000);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<unsigned char>(i * 131 + 7);
  for (size_t dstOffset : {0, 1, 8, 15}) {
    for (size_t srcOffset : {0, 3}) {
      for (size_t bytes : {0, 1, 15, 16, 63, 64, 65, 127, 4000}) {
        std::fill(target.begin(), target.end(), 0xEE);
        copyStreaming(target.data() + dstOffset, source.data() + srcOffset, bytes);
        for (size_t i = 0; i < target.size(); ++i) {
          const bool inside = i >= dstOffset && i < dstOffset + bytes;
          const unsigned char want = inside ? source[srcOffset + i - dstOffset] : 0xEE;
          ASSERT_EQ(target[i], want)
              << "dst+" << dstOffset << " src+" << srcOffset << " bytes " << bytes << " at " << i;
        }
      }
    }
  }
}

TEST(CopyStreaming, ThresholdFollowsTheEnvironment) {
  ::setenv("RINGX_STREAMING_MIN_BYTES", "12345", 1);
  EXPECT_EQ(streamingMinBytes(), 12345u);
  ::unsetenv("RINGX_STREAMING_MIN_BYTES");
  EXPECT_GE(streamingMinBytes(), size_t{1} << 20);  // a last-level cache, or the 32 MiB default
}

// AVG's fused division (divide.cc) gives the bits of a true division for every float, on the
// corrected-reciprocal path and the portable one: ordinary values, both zeros, infinities, NaN,
// subnormals, the extremes, at aligned and misaligned addresses.
TEST(ReduceTest, DivideGivesTheBitsOfTrueDivision) {
  std::mt19937 rng(7);
  std::vector<float> values;
  for (int i = 0; i < 20000; ++i) {
    uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    values.push_back(f);  // every exponent, NaNs and infinities included
  }
  for (float special : {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::max(),
                        -std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
                        std::numeric_limits<float>::denorm_min(), 0x1p-100f, 0x1.fffffep-101f}) {
    values.insert(values.begin() + static_cast<long>(rng() % values.size()), special);
  }
  for (bool portable : {false, true}) {
    const bool previous = detail::forcePortableKernelsForTesting(portable);
    for (double divisor : {1.0, 2.0, 3.0, 7.0, 24.0, 1000.0, 3000000.0}) {
      for (size_t offset : {size_t{0}, size_t{1}}) {  // bytes: the misaligned path too
        std::vector<char> storage(values.size() * sizeof(float) + offset);
        std::memcpy(storage.data() + offset, values.data(), values.size() * sizeof(float));
        divide(DataType::kFloat32, storage.data() + offset, divisor, values.size());
        for (size_t i = 0; i < values.size(); ++i) {
          float got;
          std::memcpy(&got, storage.data() + offset + i * sizeof(float), sizeof(got));
          const float want = values[i] / static_cast<float>(divisor);
          ASSERT_EQ(0, std::memcmp(&got, &want, sizeof(got)))
              << values[i] << " / " << divisor << ": " << got << " != " << want
              << (portable ? " (portable)" : "");
        }
      }
    }
    detail::forcePortableKernelsForTesting(previous);
  }
  // Combined and divided in L1-sized blocks: the bits of the two calls one after the other.
  for (DataType type : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
    const size_t count = 40000;  // several blocks and a partial one
    std::vector<char> a(count * elementSize(type)), b(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = static_cast<char>(rng());
      b[i] = static_cast<char>(rng());
    }
    std::vector<char> want(a.size()), got = a;
    reduce(ReduceOp::kSum, type, want.data(), a.data(), b.data(), count);
    divide(type, want.data(), 3, count);
    reduceDivided(ReduceOp::kSum, type, got.data(), got.data(), b.data(), count, 3);
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size())) << dataTypeName(type);
  }
  EXPECT_FALSE(dividesInPlace(DataType::kComplex64));
  EXPECT_FALSE(dividesInPlace(DataType::kInt32));
  EXPECT_THROW(divide(DataType::kInt32, values.data(), 2, 1), Error);
}

}  // namespace
}  // namespace ringx::reduce
