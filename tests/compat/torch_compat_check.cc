// Compiled, never linked or run, against another torch release's headers by make test
// (scripts/torch_matrix.py --header-check): the version shims of backend/c10d/torch_compat.h and
// the backend class with its overrides must compile against releases other than the one the
// build uses. make torch-matrix compiles the whole extension against every release.
#include "backend/c10d/process_group_ringx.h"
#include "backend/c10d/torch_compat.h"

namespace ringx::c10d_glue {

// Every name torch_compat.h defines, used as the backend uses it.
[[maybe_unused]] static void useEveryShim(const c10::intrusive_ptr<::c10d::ProcessGroup>& group,
                                          const ::c10d::ReduceOp& op, const at::Tensor& param) {
  (void)backendForDevice(group, c10::DeviceType::CPU);
  (void)dynamic_cast<const PreMulSumSupplement*>(op.supplement_.get());
  static_assert(kReduceScatterTensorCoalesced != ::c10d::OpType::UNKNOWN);
  GradAccumulatorPtr accumulator = torch::autograd::impl::grad_accumulator(param);
  (void)accumulator;
  (void)torchFeatures();
  // The class is complete only if every override (RINGX_HAS_* ones included) matches a virtual.
  static_assert(sizeof(ProcessGroupRingx) > sizeof(BackendBase));
}

}  // namespace ringx::c10d_glue
