// The parts of the _C extension. module.cc owns the module (PYBIND11_MODULE) and the backend's
// classes, and calls each part's registration declared here; each part's file includes this
// header, so a declaration and its definition cannot drift apart.
#pragma once

#include <pybind11/pybind11.h>

namespace ringx::c10d_glue {
void registerTraceBindings(pybind11::module& parent);     // trace.cc: ringx._C.trace
void registerAnalysisBindings(pybind11::module& parent);  // analysis.cc: ringx._C.analysis
void registerNcclBindings(pybind11::module& parent);      // nccl.cc: ringx._C.nccl
}  // namespace ringx::c10d_glue

namespace ringx::ddp {
void registerDdpBindings(pybind11::module& parent);  // ddp.cc: ringx._C.ddp
}  // namespace ringx::ddp

namespace ringx::fsdp {
void registerFsdpBindings(pybind11::module& parent);  // fsdp.cc: ringx._C.fsdp
}  // namespace ringx::fsdp
