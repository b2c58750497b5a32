// ringx._C.analysis: the figures of analysis/figures.h for Python (ringx.analysis),
// so the benchmarks print busbw and hidden communication by the same definitions
// as ringx-trace summary and the viewer. Only pybind11 here, no torch headers.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <utility>
#include <vector>

#include "analysis/figures.h"
#include "python/bindings/bindings.h"

namespace py = pybind11;

namespace ringx::c10d_glue {

void registerAnalysisBindings(py::module& parent) {
  py::module m = parent.def_submodule(
      "analysis", "ringx's reported figures, each defined once (analysis/figures.h).");
  m.def("bus_bandwidth_factor", &analysis::busBandwidthFactor, py::arg("op"), py::arg("group_size"),
        "nccl-tests' bus bandwidth factor: 2(n-1)/n for allreduce, (n-1)/n for all_gather and "
        "reduce_scatter, 1 for the rest.");
  m.def("bus_bandwidth_gbps", &analysis::busBandwidthGBps, py::arg("op"), py::arg("bytes"),
        py::arg("duration_ns"), py::arg("group_size"),
        "bytes / duration x bus_bandwidth_factor, in GB/s; 0 without bytes or duration.");
  m.def(
      "hidden_share",
      [](const std::vector<std::pair<int64_t, int64_t>>& transfers) {
        analysis::CommOverlap overlap;
        for (const auto& [wire, exposed] : transfers) overlap.add(wire, exposed);
        return overlap.wireNs() > 0 ? py::cast(overlap.hiddenShare()) : py::none();
      },
      py::arg("transfers"),
      "Share of wire time hidden behind compute over (wire_ns, exposed_ns) pairs: "
      "1 - sum(min(exposed, wire)) / sum(wire); None without wire time.");
}

}  // namespace ringx::c10d_glue
