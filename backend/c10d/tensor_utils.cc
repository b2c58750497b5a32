#include "backend/c10d/tensor_utils.h"

#include "backend/c10d/torch_compat.h"
#include "backend/reduce/reduce.h"

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
      TORCH_CHECK_TYPE(false, "ringx: ", collective, " does not support tensors of dtype ",
                       tensor.scalar_type(),
                       "; supported are float16/32/64, bfloat16, complex64/128, "
                       "int8/16/32/64, uint8 and bool");
  }
}

ReduceSpec toReduceSpec(const ::c10d::ReduceOp& op, const at::Tensor& tensor,
                        const char* collective) {
  ReduceSpec spec;
  const bool floating =
      at::isFloatingType(tensor.scalar_type()) || at::isComplexType(tensor.scalar_type());
  switch (op.op_) {
    case ::c10d::ReduceOp::SUM:
      spec.op = ReduceOp::kSum;
      break;
    case ::c10d::ReduceOp::PRODUCT:
      spec.op = ReduceOp::kProduct;
      break;
    case ::c10d::ReduceOp::MIN:
      spec.op = ReduceOp::kMin;
      break;
    case ::c10d::ReduceOp::MAX:
      spec.op = ReduceOp::kMax;
      break;
    case ::c10d::ReduceOp::BAND:
      spec.op = ReduceOp::kBAnd;
      break;
    case ::c10d::ReduceOp::BOR:
      spec.op = ReduceOp::kBOr;
      break;
    case ::c10d::ReduceOp::BXOR:
      spec.op = ReduceOp::kBXor;
      break;
    case ::c10d::ReduceOp::AVG:
      TORCH_CHECK_TYPE(floating, "ringx: ", collective,
                       " with ReduceOp.AVG needs a floating point or complex tensor, got ",
                       tensor.scalar_type(), "; use SUM and divide yourself");
      spec.average = true;
      break;
    case ::c10d::ReduceOp::PREMUL_SUM: {
      TORCH_CHECK_TYPE(floating, "ringx: ", collective,
                       " with PREMUL_SUM needs a floating point or complex tensor, got ",
                       tensor.scalar_type());
      const auto* supplement = dynamic_cast<const PreMulSumSupplement*>(op.supplement_.get());
      TORCH_CHECK_VALUE(supplement, "ringx: ", collective,
                        ": a PREMUL_SUM op without its factor; make it with "
                        "torch.distributed._make_nccl_premul_sum(factor)");
      spec.premul = true;
      if (supplement->tensor_factor.defined()) {
        TORCH_CHECK_VALUE(supplement->tensor_factor.device().is_cpu(), "ringx: ", collective,
                          ": PREMUL_SUM's factor tensor is on ", supplement->tensor_factor.device(),
                          "; ringx needs it on the CPU");
        spec.factorTensor = supplement->tensor_factor;
        spec.factor = spec.factorTensor.item<double>();  // CPU: a read, no device sync
      } else {
        spec.factor = supplement->double_factor;
      }
      break;
    }
    default:
      TORCH_CHECK_VALUE(false, "ringx: ", collective, " does not support this ReduceOp (",
                        static_cast<int>(op.op_),
                        "); use SUM, AVG, PREMUL_SUM, PRODUCT, MIN, MAX, BAND, BOR or BXOR");
  }
  DataType type = toDataType(tensor, collective);
  TORCH_CHECK_TYPE(reduceOpSupports(spec.op, type), "ringx: ", collective,
                   " cannot apply ReduceOp.", reduceOpName(spec.op), " to a ", tensor.scalar_type(),
                   " tensor",
                   (spec.op == ReduceOp::kMin || spec.op == ReduceOp::kMax)
                       ? " (complex numbers have no order)"
                       : " (bitwise ops need an integer or bool tensor)");
  return spec;
}

AskedReduce ReduceSpec::asked() const {
  if (average) return AskedReduce::average();
  if (premul) return AskedReduce::premultiplied(factor);
  return op;
}

void ReduceSpec::premultiplyInPlace(const at::Tensor& t) const {
  if (!premul) return;
  if (factorTensor.defined()) {
    t.mul_(factorTensor.reshape({}));
  } else {
    t.mul_(factor);
  }
}

at::Tensor ReduceSpec::premultiplied(const at::Tensor& t) const {
  if (!premul) return t;
  at::Tensor copy = t.clone(at::MemoryFormat::Contiguous);
  premultiplyInPlace(copy);
  return copy;
}

double ReduceSpec::divideBy(DataType dtype, int groupSize) const {
  return average && reduce::dividesInPlace(dtype) ? static_cast<double>(groupSize) : 0;
}

void ReduceSpec::finish(const at::Tensor& t, int groupSize, double divided) const {
  if (average && divided == 0) t.div_(groupSize);
}

void checkTensor(const at::Tensor& tensor, const char* collective, const char* what, bool cudaToo) {
  TORCH_CHECK_VALUE(tensor.defined(), "ringx: ", collective, ": ", what, " is an undefined tensor");
  TORCH_CHECK_VALUE(
      tensor.device().is_cpu() || (cudaToo && tensor.is_cuda()), "ringx: ", collective, ": ", what,
      " is on ", tensor.device(),
      ", but ringx only handles CPU tensors here (and CUDA tensors in collectives, where "
      "ringx was built with CUDA); move it with .cpu()");
  TORCH_CHECK_TYPE(tensor.layout() == at::kStrided, "ringx: ", collective, ": ", what,
                   " is a sparse tensor, which ringx does not support; call .to_dense() first");
}

at::Tensor& checkSingle(std::vector<at::Tensor>& tensors, const char* collective,
                        const char* what) {
  TORCH_CHECK_VALUE(tensors.size() == 1, "ringx: ", collective, " expects exactly one tensor in ",
                    what, " per process, got ", tensors.size(),
                    " (multi-device collectives are not supported)");
  checkTensor(tensors[0], collective, what);
  return tensors[0];
}

void checkLike(const at::Tensor& tensor, const at::Tensor& reference, const char* collective,
               const std::string& what) {
  checkTensor(tensor, collective, what.c_str());
  TORCH_CHECK_TYPE(tensor.scalar_type() == reference.scalar_type(), "ringx: ", collective, ": ",
                   what, " has dtype ", tensor.scalar_type(), " but the input has ",
                   reference.scalar_type());
  TORCH_CHECK_VALUE(tensor.numel() == reference.numel(), "ringx: ", collective, ": ", what, " has ",
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
