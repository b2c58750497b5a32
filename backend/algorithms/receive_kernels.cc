#include "backend/algorithms/receive_kernels.h"

#include "backend/reduce/copy.h"
#include "backend/reduce/reduce.h"

namespace ringx::algorithms {
namespace {

class CpuReceiveKernels final : public transport::ReceiveKernels {
 public:
  void copyStreaming(void* dst, const void* src, size_t bytes) const override {
    reduce::copyStreaming(dst, src, bytes);
  }
  void reduce(ReduceOp op, DataType type, void* out, const void* a, const void* b,
              size_t count) const override {
    reduce::reduce(op, type, out, a, b, count);
  }
  void reduceDivided(ReduceOp op, DataType type, void* out, const void* a, const void* b,
                     size_t count, double divisor) const override {
    reduce::reduceDivided(op, type, out, a, b, count, divisor);
  }
};

}  // namespace

const transport::ReceiveKernels& cpuReceiveKernels() {
  static const CpuReceiveKernels kernels;
  return kernels;
}

}  // namespace ringx::algorithms
