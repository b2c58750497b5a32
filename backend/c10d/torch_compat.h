// The one place that knows which torch we compile against.
//
// ringx builds against every torch release from 2.9 to 2.15 (make torch-matrix compiles each).
// A backend subclasses c10d::Backend and torch wraps it in a ProcessGroup per device type; the
// releases differ in a few symbols, and each difference is decided here, in the full form
// RINGX_TORCH_AT_LEAST(2, N) (a bare MINOR comparison breaks at 3.0), citing the release that
// brought the symbol. Code elsewhere uses the names below and never tests the version itself.
// A feature that needs a newer torch than 2.9 is built only where torch has what it needs (an
// older torch offers no call to make), and torchFeatures() lists it, on or off, for
// ringx.features().
#pragma once

#include <torch/csrc/autograd/variable.h>
#include <torch/version.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <utility>
#include <vector>

static_assert(TORCH_VERSION_MAJOR >= 2, "ringx needs torch 2.x (c10d::Backend)");

#define RINGX_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||        \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

static_assert(RINGX_TORCH_AT_LEAST(2, 9),
              "ringx supports torch 2.9 to 2.15: this torch is older than 2.9");

namespace ringx::c10d_glue {
using BackendBase = ::c10d::Backend;

// The node that accumulates a parameter's gradient (a shared_ptr before torch 2.12, an
// intrusive_ptr since): the DDP and FSDP engines keep them alive to keep their hooks.
using GradAccumulatorPtr =
    decltype(torch::autograd::impl::grad_accumulator(std::declval<const at::Tensor&>()));

// The Work type of reduce_scatter_tensor_coalesced. OpType::REDUCE_SCATTER_TENSOR_COALESCED
// came in torch 2.12; before, torch's own backends label such a call COALESCED.
#if RINGX_TORCH_AT_LEAST(2, 12)
inline constexpr ::c10d::OpType kReduceScatterTensorCoalesced =
    ::c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED;
#else
inline constexpr ::c10d::OpType kReduceScatterTensorCoalesced = ::c10d::OpType::COALESCED;
#endif

// The factor a PREMUL_SUM ReduceOp carries: c10d::PreMulSumSupplement since torch 2.13, named
// NCCLPreMulSumSupplement before (the same fields: double_factor, tensor_factor).
#if RINGX_TORCH_AT_LEAST(2, 13)
using PreMulSumSupplement = ::c10d::PreMulSumSupplement;
#else
using PreMulSumSupplement = ::c10d::NCCLPreMulSumSupplement;
#endif

// The backend `group` uses for `device`, or nullptr when it has none.
// ProcessGroup::hasBackendForDeviceType came in torch 2.13; before, getBackend raises for a
// device without a backend.
inline c10::intrusive_ptr<BackendBase> backendForDevice(
    const c10::intrusive_ptr<::c10d::ProcessGroup>& group, c10::DeviceType device) {
#if RINGX_TORCH_AT_LEAST(2, 13)
  if (!group->hasBackendForDeviceType(device)) return {};
  return group->getBackend(device);
#else
  try {
    return group->getBackend(device);
  } catch (const c10::Error&) {
    return {};
  }
#endif
}

// Backend::gather_single (dist.gather_single, dist.gather_into_tensor: a gather into one
// tensor on the root) came in torch 2.14; ringx implements it there.
#define RINGX_HAS_GATHER_SINGLE RINGX_TORCH_AT_LEAST(2, 14)

// Backend::supportsShrinking / shrink (dist.shrink_group: a group without some of its ranks)
// came in torch 2.10 (ringx.shrink_group is the same call, and does torch's part itself before).
#define RINGX_HAS_SHRINK RINGX_TORCH_AT_LEAST(2, 10)

// Backend::getError (what failed first: a timeout, a peer, this rank). Read in torch 2.11's and
// 2.13's headers; not checked in older ones.
#define RINGX_HAS_GET_ERROR RINGX_TORCH_AT_LEAST(2, 11)

// Backend::supportsReconfigure / get_reconfigure_handle / reconfigure (dist._reconfigure: the
// group remade over any set of processes, init_process_group(enable_reconfigure=True)): torch
// names them by its own macro, which Backend.hpp defines from 2.14 on.
#ifdef C10D_BACKEND_HAS_RECONFIGURE
#define RINGX_HAS_RECONFIGURE 1
#else
#define RINGX_HAS_RECONFIGURE 0
#endif

// The features of ringx that depend on the torch release, for ringx.features(): each is on
// or off for the torch this build was compiled against, and `since` names the release that
// brought what it needs.
struct TorchFeature {
  const char* name;
  bool on;
  const char* since;  // the torch release that brought what it needs
  const char* what;
};
inline std::vector<TorchFeature> torchFeatures() {
  return {
      {"gather_single", RINGX_HAS_GATHER_SINGLE, "2.14",
       "dist.gather_single and dist.gather_into_tensor: a gather into one tensor on the root"},
      {"shrink_group", RINGX_HAS_SHRINK, "2.10",
       "dist.shrink_group: the group without some of its ranks (ringx.shrink_group on "
       "every torch)"},
      {"reconfigure", RINGX_HAS_RECONFIGURE, "2.14",
       "dist._reconfigure and init_process_group(enable_reconfigure=True): the group remade "
       "over any set of processes"},
  };
}

}  // namespace ringx::c10d_glue
