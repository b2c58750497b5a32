// The CUDA reduction kernels against the CPU kernels, bit for bit: every (op, dtype) pair, packed
// and unaligned pointers, in place and out of place, and the AVG/PREMUL_SUM scaling against the
// same arithmetic on the host. Skips with "no CUDA device" where there is none (CI, the
// development machine); runs on the GPU machine.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backend/device/cuda/reduce_kernels.h"
#include "backend/reduce/element_ops.h"
#include "backend/reduce/reduce.h"
#include "base/error.h"
#include "tests/cpp/cuda/gpu_test.h"

namespace ringx {
namespace {

void check(cudaError_t error) { ASSERT_EQ(error, cudaSuccess) << cudaGetErrorString(error); }

// A device buffer with `extra` bytes of slack in front, so tests can offset pointers.
struct DeviceBuffer {
  explicit DeviceBuffer(size_t bytes) { check(cudaMalloc(&base, bytes + 64)); }
  ~DeviceBuffer() { cudaFree(base); }
  char* at(size_t offset) { return static_cast<char*>(base) + offset; }
  void* base = nullptr;
};

// Clears the highest exponent bit of every element whose exponent is all ones (NaN, inf). GPUs
// write their own NaN bits for arithmetic on a NaN, as x86 does not; NaN handling is checked
// where it is defined (MIN/MAX, and the canonical NaN of 16-bit floats) in reduce_test.cc.
template <typename Bits>
void finite(char* bytes, size_t count, Bits exponent) {
  for (size_t i = 0; i < count; ++i) {
    Bits v;
    std::memcpy(&v, bytes + i * sizeof(Bits), sizeof(Bits));
    const Bits topBit = exponent & ~(exponent >> 1);
    if ((v & exponent) == exponent) v = static_cast<Bits>(v & ~topBit);
    std::memcpy(bytes + i * sizeof(Bits), &v, sizeof(Bits));
  }
}

// Random elements of `type`: any bit pattern but NaN and inf for floating types, 0 or a
// nonzero byte for bool.
std::vector<char> randomElements(size_t count, uint32_t seed, DataType type) {
  std::mt19937 gen(seed);
  const size_t bytes = count * elementSize(type);
  std::vector<char> out(bytes);
  for (auto& c : out) c = static_cast<char>(gen());
  switch (type) {
    case DataType::kFloat32:
    case DataType::kComplex64:
      finite<uint32_t>(out.data(), bytes / 4, 0x7F800000u);
      break;
    case DataType::kFloat64:
    case DataType::kComplex128:
      finite<uint64_t>(out.data(), bytes / 8, 0x7FF0000000000000ull);
      break;
    case DataType::kFloat16:
      finite<uint16_t>(out.data(), count, 0x7C00u);
      break;
    case DataType::kBFloat16:
      finite<uint16_t>(out.data(), count, 0x7F80u);
      break;
    default:
      break;
  }
  return out;
}

// Where two results first differ, element part by element part ("lanes": a complex has two),
// or -1. Bit for bit, except that any NaN equals any NaN: x86 makes the "real indefinite" NaN
// (0xFFC00000 for float) for inf - inf or 0 * inf, CUDA a canonical 0x7FFFFFFF, and NaN
// payloads carry no meaning (torch does not keep them either). Seen on an H100 for complex64
// PRODUCT, where random operands overflow to inf - inf.
long firstMismatch(const std::vector<char>& got, const std::vector<char>& expected, DataType type) {
  uint64_t exponent = 0, mantissa = 0;
  size_t lane = 1;
  switch (type) {
    case DataType::kFloat32:
    case DataType::kComplex64:
      lane = 4, exponent = 0x7F800000u, mantissa = 0x007FFFFFu;
      break;
    case DataType::kFloat64:
    case DataType::kComplex128:
      lane = 8, exponent = 0x7FF0000000000000ull, mantissa = 0x000FFFFFFFFFFFFFull;
      break;
    case DataType::kFloat16:
      lane = 2, exponent = 0x7C00u, mantissa = 0x03FFu;
      break;
    case DataType::kBFloat16:
      lane = 2, exponent = 0x7F80u, mantissa = 0x007Fu;
      break;
    default:
      break;
  }
  auto isNaN = [&](const char* p) {
    if (exponent == 0) return false;
    uint64_t bits = 0;
    std::memcpy(&bits, p, lane);  // little-endian: the lane's value
    return (bits & exponent) == exponent && (bits & mantissa) != 0;
  };
  for (size_t i = 0; i + lane <= got.size(); i += lane) {
    if (std::memcmp(&got[i], &expected[i], lane) == 0) continue;
    if (isNaN(&got[i]) && isNaN(&expected[i])) continue;
    return static_cast<long>(i / lane);
  }
  return -1;
}

TEST(CudaReduce, EveryOpAndDtypeMatchesTheCpuBitForBit) {
  SKIP_WITHOUT_GPU();
  for (int t = 0; t < kNumDataTypes; ++t) {
    for (int o = 0; o < kNumReduceOps; ++o) {
      const auto type = static_cast<DataType>(t);
      const auto op = static_cast<ReduceOp>(o);
      if (!reduceOpSupports(op, type)) continue;
      for (size_t count : {size_t{1}, size_t{37}, size_t{4096}, size_t{1000003}}) {
        for (size_t offset : {size_t{0}, elementSize(type)}) {  // packed, then unaligned
          const size_t bytes = count * elementSize(type);
          const auto a = randomElements(count, 1 + t * 7 + o, type);
          const auto b = randomElements(count, 2 + t * 7 + o, type);
          std::vector<char> expected(bytes);
          reduce::reduce(op, type, expected.data(), a.data(), b.data(), count);

          DeviceBuffer da(bytes), db(bytes), dout(bytes);
          check(cudaMemcpy(da.at(offset), a.data(), bytes, cudaMemcpyHostToDevice));
          check(cudaMemcpy(db.at(offset), b.data(), bytes, cudaMemcpyHostToDevice));
          cuda::reduce(op, type, dout.at(offset), da.at(offset), db.at(offset), count, nullptr);
          // In place as well: a = op(a, b).
          cuda::reduce(op, type, da.at(offset), da.at(offset), db.at(offset), count, nullptr);
          check(cudaDeviceSynchronize());
          std::vector<char> got(bytes), inPlace(bytes);
          check(cudaMemcpy(got.data(), dout.at(offset), bytes, cudaMemcpyDeviceToHost));
          check(cudaMemcpy(inPlace.data(), da.at(offset), bytes, cudaMemcpyDeviceToHost));
          ASSERT_EQ(-1, firstMismatch(got, expected, type))
              << reduceOpName(op) << " " << dataTypeName(type) << " count " << count << " offset "
              << offset << " (the element part where they first differ)";
          ASSERT_EQ(-1, firstMismatch(inPlace, expected, type))
              << "in place: " << reduceOpName(op) << " " << dataTypeName(type);
        }
      }
    }
  }
}

TEST(CudaReduce, DivideAndMultiplyUseTheTypesArithmetic) {
  SKIP_WITHOUT_GPU();
  const size_t count = 10007;
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = static_cast<float>(i) * 0.37f - 1000.0f;
  DeviceBuffer d(count * sizeof(float));
  check(cudaMemcpy(d.at(0), values.data(), count * sizeof(float), cudaMemcpyHostToDevice));
  cuda::divide(DataType::kFloat32, d.at(0), 3.0, count, nullptr);
  cuda::multiply(DataType::kFloat32, d.at(0), 0.5, count, nullptr);
  std::vector<float> got(count);
  check(cudaMemcpy(got.data(), d.at(0), count * sizeof(float), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(got[i], values[i] / 3.0f * 0.5f) << i;

  // bfloat16: widened, divided in float, rounded with c10's rounding.
  std::vector<uint16_t> halves(count);
  for (size_t i = 0; i < count; ++i) halves[i] = reduce::Bf16Bits::fromFloat(values[i]);
  check(cudaMemcpy(d.at(0), halves.data(), count * 2, cudaMemcpyHostToDevice));
  cuda::divide(DataType::kBFloat16, d.at(0), 3.0, count, nullptr);
  std::vector<uint16_t> gotHalves(count);
  check(cudaMemcpy(gotHalves.data(), d.at(0), count * 2, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(gotHalves[i],
              reduce::Bf16Bits::fromFloat(reduce::Bf16Bits::toFloat(halves[i]) / 3.0f))
        << i;
  }
}

TEST(CudaReduce, BadInputIsAClearError) {
  // No device needed: the checks come before any launch.
  try {
    cuda::reduce(ReduceOp::kBXor, DataType::kFloat32, nullptr, nullptr, nullptr, 4, nullptr);
    FAIL() << "BXOR on float32 was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("BXOR"), std::string::npos) << e.what();
  }
  try {
    cuda::divide(DataType::kInt32, nullptr, 2.0, 4, nullptr);
    FAIL() << "AVG on int32 was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("floating point"), std::string::npos) << e.what();
  }
}

TEST(CudaReduce, DeviceAvailabilitySaysWhy) {
  std::string why;
  if (!cuda::deviceAvailable(&why)) {
    EXPECT_NE(why.find("no CUDA device"), std::string::npos) << why;
  } else {
    EXPECT_TRUE(why.empty());
  }
}

}  // namespace
}  // namespace ringx
