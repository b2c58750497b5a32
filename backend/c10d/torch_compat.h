// The one place that knows which torch we compile against.
//
// PyTorch 1.13 has backends subclass c10d::ProcessGroup and the creator given to
// Backend.register_backend returns that object. PyTorch 2.x has them subclass
// c10d::Backend (torch wraps it in a ProcessGroup itself). Everything else in
// backend/c10d/ writes `BackendBase` and stays version-agnostic.
#pragma once

#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
namespace ringx::c10d_glue {
using BackendBase = ::c10d::Backend;
// The Python class that the binding derives from.
inline constexpr const char* kPythonBaseClass = "Backend";
}  // namespace ringx::c10d_glue
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
namespace ringx::c10d_glue {
using BackendBase = ::c10d::ProcessGroup;
inline constexpr const char* kPythonBaseClass = "ProcessGroup";
}  // namespace ringx::c10d_glue
#endif
