#include "ddp/comm_hooks.h"

namespace ringx::ddp {
namespace {

class CompressionHook : public ::c10d::CommHookInterface {
 public:
  CompressionHook(c10::intrusive_ptr<::c10d::ProcessGroup> processGroup, at::ScalarType wireType)
      : processGroup_(std::move(processGroup)), wireType_(wireType) {}

  c10::intrusive_ptr<c10::ivalue::Future> runHook(::c10d::GradBucket& bucket) override {
    at::Tensor buffer = bucket.getBufferRef();
    at::Tensor compressed = buffer.to(wireType_).div_(processGroup_->getSize());
    std::vector<at::Tensor> tensors{compressed};
    c10::intrusive_ptr<c10::ivalue::Future> sent = processGroup_->allreduce(tensors)->getFuture();
    return sent->then(
        [buffer, compressed](c10::ivalue::Future& done) {
          done.value();  // rethrows the allreduce's error
          buffer.copy_(compressed);
          return c10::IValue(buffer);
        },
        c10::TensorType::get());
  }

  at::Tensor parseHookResult(const c10::IValue& result) override {
    TORCH_CHECK(result.isTensor(), "ringx.ddp: compression hook produced no tensor");
    return result.toTensor();
  }

 private:
  c10::intrusive_ptr<::c10d::ProcessGroup> processGroup_;
  at::ScalarType wireType_;
};

}  // namespace

std::unique_ptr<::c10d::CommHookInterface> makeCompressionHook(
    c10::intrusive_ptr<::c10d::ProcessGroup> processGroup, at::ScalarType wireType) {
  TORCH_CHECK(processGroup, "ringx.ddp: compression hook needs a process group");
  TORCH_CHECK(wireType == at::kHalf || wireType == at::kBFloat16,
              "ringx.ddp: compression hooks send float16 or bfloat16, not ", wireType);
  return std::make_unique<CompressionHook>(std::move(processGroup), wireType);
}

}  // namespace ringx::ddp
