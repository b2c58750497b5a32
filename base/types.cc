// Sizes, names and op/dtype compatibility for ringx's element types.
#include "base/types.h"

#include "base/error.h"

namespace ringx {

size_t elementSize(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return 4;
    case DataType::kFloat64:
      return 8;
    case DataType::kFloat16:
      return 2;
    case DataType::kBFloat16:
      return 2;
    case DataType::kComplex64:
      return 8;
    case DataType::kComplex128:
      return 16;
    case DataType::kInt8:
      return 1;
    case DataType::kInt16:
      return 2;
    case DataType::kInt32:
      return 4;
    case DataType::kInt64:
      return 8;
    case DataType::kUInt8:
      return 1;
    case DataType::kBool:
      return 1;
  }
  RINGX_THROW(InvalidArgument, "ringx: unknown dtype ", static_cast<int>(type));
}

const char* dataTypeName(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return "float32";
    case DataType::kFloat64:
      return "float64";
    case DataType::kFloat16:
      return "float16";
    case DataType::kBFloat16:
      return "bfloat16";
    case DataType::kComplex64:
      return "complex64";
    case DataType::kComplex128:
      return "complex128";
    case DataType::kInt8:
      return "int8";
    case DataType::kInt16:
      return "int16";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
    case DataType::kUInt8:
      return "uint8";
    case DataType::kBool:
      return "bool";
  }
  return "unknown";
}

const char* reduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "SUM";
    case ReduceOp::kProduct:
      return "PRODUCT";
    case ReduceOp::kMin:
      return "MIN";
    case ReduceOp::kMax:
      return "MAX";
    case ReduceOp::kBAnd:
      return "BAND";
    case ReduceOp::kBOr:
      return "BOR";
    case ReduceOp::kBXor:
      return "BXOR";
  }
  return "unknown";
}

AskedReduce AskedReduce::average() {
  AskedReduce asked;
  asked.scale = Scale::kAverage;
  return asked;
}

AskedReduce AskedReduce::premultiplied(double factor) {
  AskedReduce asked;
  asked.scale = Scale::kPremultiply;
  asked.factor = factor;
  return asked;
}

const char* reduceOpName(const AskedReduce& asked) {
  switch (asked.scale) {
    case AskedReduce::Scale::kAverage:
      return "AVG";
    case AskedReduce::Scale::kPremultiply:
      return "PREMUL_SUM";
    case AskedReduce::Scale::kNone:
      break;
  }
  return reduceOpName(asked.op);
}

namespace {

bool isKnownType(DataType type) { return static_cast<int>(type) < kNumDataTypes; }

bool isComplex(DataType type) {
  return type == DataType::kComplex64 || type == DataType::kComplex128;
}

bool isIntegerOrBool(DataType type) {
  switch (type) {
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64:
    case DataType::kUInt8:
    case DataType::kBool:
      return true;
    default:
      return false;
  }
}

}  // namespace

bool reduceOpSupports(ReduceOp op, DataType type) {
  if (!isKnownType(type)) {
    return false;
  }
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kProduct:
      return true;
    case ReduceOp::kMin:
    case ReduceOp::kMax:
      return !isComplex(type);
    case ReduceOp::kBAnd:
    case ReduceOp::kBOr:
    case ReduceOp::kBXor:
      return isIntegerOrBool(type);
  }
  return false;
}

}  // namespace ringx
