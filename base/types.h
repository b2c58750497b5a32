// Element types and reduction operators understood by the torch-free core.
//
// The c10d layer maps at::ScalarType and c10d::ReduceOp onto these; the
// algorithms and reduction kernels only ever see these enums.
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

size_t elementSize(DataType type);
const char* dataTypeName(DataType type);
const char* reduceOpName(ReduceOp op);

// Whether `op` is defined for `type` (MIN/MAX need an order, bitwise ops need
// integers or bool). The kernels reject the others with a clear error.
bool reduceOpSupports(ReduceOp op, DataType type);

}  // namespace ringx
