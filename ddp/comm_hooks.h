// Built-in communication hooks for ringx.ddp (C++; Python hooks written against
// torch.distributed.GradBucket work too, see python/bindings/ddp.cc).
//
// A hook replaces the default "allreduce the bucket and average" step. The
// compression hooks cast each bucket to a 16-bit type, average it in that type
// (dividing before the sum keeps fp16 from overflowing), and cast the result
// back into the bucket: half the bytes on the wire, at 16-bit precision.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>

#include <memory>

namespace ringx::ddp {

std::unique_ptr<::c10d::CommHookInterface> makeCompressionHook(
    c10::intrusive_ptr<::c10d::ProcessGroup> processGroup, at::ScalarType wireType);

inline std::unique_ptr<::c10d::CommHookInterface> fp16CompressHook(
    c10::intrusive_ptr<::c10d::ProcessGroup> processGroup) {
  return makeCompressionHook(std::move(processGroup), at::kHalf);
}
inline std::unique_ptr<::c10d::CommHookInterface> bf16CompressHook(
    c10::intrusive_ptr<::c10d::ProcessGroup> processGroup) {
  return makeCompressionHook(std::move(processGroup), at::kBFloat16);
}

}  // namespace ringx::ddp
