// Tensor checks and staging for the c10d layer: the caller-side checks that
// turn bad arguments into errors naming the collective and the argument, the
// mapping of torch dtypes and reduce ops onto the core's enums, and contiguous
// staging so that non-contiguous tensors work.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <string>
#include <vector>

#include "backend/common/types.h"

namespace ringx::c10d_glue {

DataType toDataType(const at::Tensor& tensor, const char* collective);

// Maps a c10d reduce op; AVG is reported as SUM with *average set.
ReduceOp toReduceOp(const ::c10d::ReduceOp& op, const at::Tensor& tensor, const char* collective,
                    bool* average);

// A dense CPU tensor, else a clear error naming `what` in `collective`.
void checkTensor(const at::Tensor& tensor, const char* collective, const char* what);
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
