#include "backend/c10d/tensor_utils.h"

#include <cstring>

namespace ringx::c10d_glue {

DataType toDataType(const at::Tensor& tensor, const char* collective) {
  switch (tensor.scalar_type()) {
    case at::kFloat:
      return DataType::kFloat32;
    case at::kDouble:
      return DataType::kFloat64;
    case at::kHalf:
      return DataType::kFloat16;
    case at::kBFloat16:
      return DataType::kBFloat16;
    case at::kComplexFloat:
      return DataType::kComplex64;
    case at::kComplexDouble:
      return DataType::kComplex128;
    case at::kChar:
      return DataType::kInt8;
    case at::kShort:
      return DataType::kInt16;
    case at::kInt:
      return DataType::kInt32;
    case at::kLong:
      return DataType::kInt64;
    case at::kByte:
      return DataType::kUInt8;
    case at::kBool:
      return DataType::kBool;
    default:
      TORCH_CHECK(false, "ringx: ", collective, " does not support tensors of dtype ",
                  tensor.scalar_type(),
                  "; supported are float16/32/64, bfloat16, complex64/128, "
                  "int8/16/32/64, uint8 and bool");
  }
}

ReduceOp toReduceOp(const ::c10d::ReduceOp& op, const at::Tensor& tensor, const char* collective,
                    bool* average) {
  *average = false;
  ReduceOp mapped = ReduceOp::kSum;
  switch (op.op_) {
    case ::c10d::ReduceOp::SUM:
      mapped = ReduceOp::kSum;
      break;
    case ::c10d::ReduceOp::PRODUCT:
      mapped = ReduceOp::kProduct;
      break;
    case ::c10d::ReduceOp::MIN:
      mapped = ReduceOp::kMin;
      break;
    case ::c10d::ReduceOp::MAX:
      mapped = ReduceOp::kMax;
      break;
    case ::c10d::ReduceOp::BAND:
      mapped = ReduceOp::kBAnd;
      break;
    case ::c10d::ReduceOp::BOR:
      mapped = ReduceOp::kBOr;
      break;
    case ::c10d::ReduceOp::BXOR:
      mapped = ReduceOp::kBXor;
      break;
    case ::c10d::ReduceOp::AVG:
      TORCH_CHECK(
          at::isFloatingType(tensor.scalar_type()) || at::isComplexType(tensor.scalar_type()),
          "ringx: ", collective,
          " with ReduceOp.AVG needs a floating point or complex "
          "tensor, got ",
          tensor.scalar_type(), "; use SUM and divide yourself");
      *average = true;
      mapped = ReduceOp::kSum;
      break;
    default:
      TORCH_CHECK(false, "ringx: ", collective, " does not support this ReduceOp (",
                  static_cast<int>(op.op_),
                  "); use SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR "
                  "or BXOR");
  }
  DataType type = toDataType(tensor, collective);
  TORCH_CHECK(reduceOpSupports(mapped, type), "ringx: ", collective, " cannot apply ReduceOp.",
              reduceOpName(mapped), " to a ", tensor.scalar_type(), " tensor",
              (mapped == ReduceOp::kMin || mapped == ReduceOp::kMax)
                  ? " (complex numbers have no order)"
                  : " (bitwise ops need an integer or bool tensor)");
  return mapped;
}

void checkTensor(const at::Tensor& tensor, const char* collective, const char* what) {
  TORCH_CHECK(tensor.defined(), "ringx: ", collective, ": ", what, " is an undefined tensor");
  TORCH_CHECK(tensor.device().is_cpu(), "ringx: ", collective, ": ", what, " is on ",
              tensor.device(),
              ", but ringx only handles CPU tensors so far; move it with "
              ".cpu() or use backend='nccl' for GPU tensors");
  TORCH_CHECK(tensor.layout() == at::kStrided, "ringx: ", collective, ": ", what,
              " is a sparse tensor, which ringx does not support; call .to_dense() first");
}

at::Tensor& checkSingle(std::vector<at::Tensor>& tensors, const char* collective,
                        const char* what) {
  TORCH_CHECK(tensors.size() == 1, "ringx: ", collective, " expects exactly one tensor in ", what,
              " per process, got ", tensors.size(),
              " (multi-device collectives are not supported)");
  checkTensor(tensors[0], collective, what);
  return tensors[0];
}

void checkLike(const at::Tensor& tensor, const at::Tensor& reference, const char* collective,
               const std::string& what) {
  checkTensor(tensor, collective, what.c_str());
  TORCH_CHECK(tensor.scalar_type() == reference.scalar_type(), "ringx: ", collective, ": ", what,
              " has dtype ", tensor.scalar_type(), " but the input has ", reference.scalar_type());
  TORCH_CHECK(tensor.numel() == reference.numel(), "ringx: ", collective, ": ", what, " has ",
              tensor.numel(), " elements but the input has ", reference.numel(),
              "; all tensors of one call must have the same size");
}

size_t byteSize(const at::Tensor& tensor) {
  return static_cast<size_t>(tensor.numel()) * tensor.element_size();
}

at::Tensor flattenBytes(const std::vector<at::Tensor>& tensors, at::Tensor* reuse) {
  size_t total = 0;
  for (const auto& t : tensors) total += byteSize(t);
  at::Tensor flat;
  if (reuse && reuse->defined() && static_cast<size_t>(reuse->numel()) >= total) {
    flat = reuse->narrow(0, 0, static_cast<int64_t>(total));
  } else {
    flat = at::empty({static_cast<int64_t>(total)}, at::kByte);
    if (reuse) *reuse = flat;
  }
  char* out = static_cast<char*>(flat.data_ptr());
  for (const auto& t : tensors) {
    const at::Tensor dense = t.contiguous();
    std::memcpy(out, dense.data_ptr(), byteSize(dense));
    out += byteSize(dense);
  }
  return flat;
}

void unflattenBytes(const at::Tensor& flat, std::vector<at::Tensor>& tensors, size_t offset) {
  const char* in = static_cast<const char*>(flat.data_ptr()) + offset;
  for (auto& t : tensors) {
    size_t bytes = byteSize(t);
    if (t.is_contiguous()) {
      std::memcpy(t.data_ptr(), in, bytes);
    } else {
      at::Tensor dense = at::empty_like(t, at::MemoryFormat::Contiguous);
      std::memcpy(dense.data_ptr(), in, bytes);
      t.copy_(dense);
    }
    in += bytes;
  }
}

}  // namespace ringx::c10d_glue
