// ringx._C.nccl: what the NCCL loader (backend/transport/nccl/loader.h) found, for ringx.nccl()
// and ringx.features(). Only pybind11 here, no torch headers.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "backend/transport/nccl/loader.h"
#include "base/error.h"
#include "python/bindings/bindings.h"

namespace py = pybind11;

namespace ringx::c10d_glue {
namespace {

py::dict asDict(const transport::nccl::LoadReport& report) {
  py::dict out;
  out["attempted"] = report.attempted;
  out["loaded"] = report.loaded;
  out["version"] = report.loaded ? py::object(py::str(report.version)) : py::none();
  out["path"] = report.loaded ? py::object(py::str(report.path)) : py::none();
  out["tried"] = report.tried;
  out["error"] = report.error.empty() ? py::none() : py::object(py::str(report.error));
  return out;
}

}  // namespace

void registerNcclBindings(py::module& parent) {
  py::module m = parent.def_submodule(
      "nccl", "NCCL loaded at run time (backend/transport/nccl/loader.h): load and report.");
  m.def(
      "load",
      [](const std::vector<std::string>& candidates) {
        {
          py::gil_scoped_release release;  // dlopen of a large library; other threads go on
          try {
            transport::nccl::load(candidates);
          } catch (const Error&) {
            // The report holds the error; the diagnostics return it rather than raise.
          }
        }
        return asDict(transport::nccl::report());
      },
      py::arg("candidates"),
      "Loads NCCL once per process (RINGX_NCCL_LIBRARY, else `candidates`, else the system's "
      "libnccl.so.2; a later call changes nothing) and returns report().");
  m.def(
      "report", []() { return asDict(transport::nccl::report()); },
      "What loading NCCL found, without loading: {attempted, loaded, version, path, tried, "
      "error}.");
}

}  // namespace ringx::c10d_glue
