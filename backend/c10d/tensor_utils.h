// Tensor checks and staging for the c10d layer: the caller-side checks that
// turn bad arguments into errors naming the collective and the argument (TypeError for a
// dtype, op or layout that does not fit, ValueError for sizes, counts and ranks), the
// mapping of torch dtypes and reduce ops onto the core's enums, and contiguous
// staging so that non-contiguous tensors work.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <string>
#include <vector>

#include "base/types.h"

namespace ringx::c10d_glue {

DataType toDataType(const at::Tensor& tensor, const char* collective);

// A c10d reduce op as ringx runs it: the core reduces with `op`; AVG and PREMUL_SUM are sums
// with a step around them (a division by the group size after, a multiplication by the
// user's factor before), as torch defines them.
struct ReduceSpec {
  ReduceOp op = ReduceOp::kSum;
  bool average = false;  // AVG: divide the sum by the group size
  bool premul = false;   // PREMUL_SUM: multiply every rank's input by the factor first
  // PREMUL_SUM's factor, when given as a number; when given as a tensor, its value when the
  // call was made, for the record only (the multiplication uses the tensor).
  double factor = 1;
  at::Tensor factorTensor;  // ... or as a one-element tensor

  // The op as the caller asked it, for Group::run to record (the trace, the flight recorder):
  // AVG and PREMUL_SUM, not the SUM the core runs for them.
  AskedReduce asked() const;

  // Multiplies `t` in place by the PREMUL_SUM factor (nothing for other ops).
  void premultiplyInPlace(const at::Tensor& t) const;
  // `t` multiplied by the PREMUL_SUM factor in a new tensor, for inputs that must stay as
  // they are; `t` itself for other ops.
  at::Tensor premultiplied(const at::Tensor& t) const;
  // The divisor to hand the algorithms (algorithms.h's divideBy) for AVG on a dtype they divide
  // themselves (reduce::dividesInPlace), fused into the collective; else 0.
  double divideBy(DataType dtype, int groupSize) const;
  // Divides `t` in place by `groupSize` for AVG (nothing for other ops), unless the algorithm
  // already did: `divided` is the divideBy it was given.
  void finish(const at::Tensor& t, int groupSize, double divided = 0) const;
};

// Maps a c10d reduce op for `tensor`, or raises a clear error (an op the dtype cannot take).
ReduceSpec toReduceSpec(const ::c10d::ReduceOp& op, const at::Tensor& tensor,
                        const char* collective);

// A dense CPU tensor (or CUDA tensor, with `cudaToo`: for a caller that handles those), else a
// clear error naming `what` in `collective`.
void checkTensor(const at::Tensor& tensor, const char* collective, const char* what,
                 bool cudaToo = false);
// Exactly one tensor in the list, checked; returns it.
at::Tensor& checkSingle(std::vector<at::Tensor>& tensors, const char* collective, const char* what);
// Same dtype and number of elements as `reference`.
void checkLike(const at::Tensor& tensor, const at::Tensor& reference, const char* collective,
               const std::string& what);

size_t byteSize(const at::Tensor& tensor);

// A contiguous buffer standing in for a tensor: the tensor itself when it is
// contiguous, otherwise a contiguous copy that copyBack() writes into it.
class Staged {
 public:
  explicit Staged(const at::Tensor& tensor)
      : original_(tensor), buffer_(tensor.is_contiguous() ? tensor : tensor.contiguous()) {}
  void* data() const { return buffer_.data_ptr(); }
  const at::Tensor& tensor() const { return buffer_; }
  void copyBack() {
    if (!buffer_.is_same(original_)) original_.copy_(buffer_);
  }

 private:
  at::Tensor original_;
  at::Tensor buffer_;
};

// Concatenates the raw bytes of tensors into one uint8 tensor (inside `reuse`
// when it is defined and large enough), and back.
at::Tensor flattenBytes(const std::vector<at::Tensor>& tensors, at::Tensor* reuse = nullptr);
void unflattenBytes(const at::Tensor& flat, std::vector<at::Tensor>& tensors, size_t offset = 0);

}  // namespace ringx::c10d_glue
