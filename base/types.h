// Element types and reduction operators understood by the torch-free core.
//
// The c10d layer maps at::ScalarType and c10d::ReduceOp onto these; the
// algorithms and reduction kernels only ever see these enums. What ringx records of a
// reduction (trace, flight recorder) is the op the caller asked, AskedReduce.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ringx {

enum class DataType : uint8_t {
  kFloat32,
  kFloat64,
  kFloat16,
  kBFloat16,
  kComplex64,
  kComplex128,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kUInt8,
  kBool,
};
constexpr int kNumDataTypes = 12;

enum class ReduceOp : uint8_t {
  kSum,
  kProduct,
  kMin,
  kMax,
  kBAnd,
  kBOr,
  kBXor,
};
constexpr int kNumReduceOps = 7;

// A reduction as its caller asked for it. torch's AVG and PREMUL_SUM are no ops of the core:
// the c10d layer runs them as a SUM with a scale around it (divided by the group size after;
// every input multiplied by `factor` before), so the op the core ran says SUM for both. What
// ringx records names the asked op; the algorithms only see `op`. Implicit from a ReduceOp:
// an op asked as the core runs it.
struct AskedReduce {
  enum class Scale : uint8_t { kNone, kAverage, kPremultiply };
  ReduceOp op = ReduceOp::kSum;  // what the core runs (kSum for AVG and PREMUL_SUM)
  Scale scale = Scale::kNone;
  double factor = 0;  // PREMUL_SUM's factor (kPremultiply only)

  AskedReduce(ReduceOp run = ReduceOp::kSum) : op(run) {}
  static AskedReduce average();
  static AskedReduce premultiplied(double factor);
};

size_t elementSize(DataType type);
const char* dataTypeName(DataType type);
const char* reduceOpName(ReduceOp op);
// "AVG", "PREMUL_SUM" (its factor apart), else reduceOpName(op): static strings.
const char* reduceOpName(const AskedReduce& asked);

// Whether `op` is defined for `type` (MIN/MAX need an order, bitwise ops need
// integers or bool). The kernels reject the others with a clear error.
bool reduceOpSupports(ReduceOp op, DataType type);

}  // namespace ringx
