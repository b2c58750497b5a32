// The one place that knows which torch we compile against.
//
// ringx builds against torch 2.x, where a backend subclasses c10d::Backend and torch wraps it
// in a ProcessGroup per device type. Differences between 2.x minor versions are decided here,
// with RINGX_TORCH_AT_LEAST(2, N), never with a bare MINOR comparison (which breaks at 3.0).
#pragma once

#include <torch/csrc/autograd/variable.h>
#include <torch/version.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <utility>

static_assert(TORCH_VERSION_MAJOR >= 2, "ringx needs torch 2.x (c10d::Backend)");

#define RINGX_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||        \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace ringx::c10d_glue {
using BackendBase = ::c10d::Backend;

// The node that accumulates a parameter's gradient (a shared_ptr before torch 2.12, an
// intrusive_ptr since): the DDP and FSDP engines keep them alive to keep their hooks.
using GradAccumulatorPtr =
    decltype(torch::autograd::impl::grad_accumulator(std::declval<const at::Tensor&>()));
}  // namespace ringx::c10d_glue
