// ringx._C.trace: the Python face of the trace recorder (python/ringx/trace.py
// wraps it). Only pybind11 here, no torch headers, so it builds in seconds.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>

#include "backend/group/flight_recorder.h"
#include "backend/group/trace_session.h"
#include "observe/torch_callbacks.h"
#include "python/bindings/bindings.h"
#include "trace/format/manifest.h"
#include "trace/record/file_sink.h"
#include "trace/record/recorder.h"

namespace py = pybind11;

namespace ringx::c10d_glue {
namespace {

using trace::Recorder;

trace::Category categoryFromName(const std::string& name) {
  trace::Category category;
  if (!trace::parseCategory(name, &category)) {
    throw py::value_error("ringx.trace: unknown category '" + name +
                          "'; use one of collective, ddp, fsdp, memory, step, user");
  }
  return category;
}

// Python keyword arguments to typed trace arguments: bool and int become ints,
// float doubles, str strings, anything else its str().
uint32_t convertArgs(const py::dict& args, trace::Arg* out) {
  Recorder& r = Recorder::instance();
  uint32_t n = 0;
  for (auto item : args) {
    if (n == Recorder::kMaxArgs) break;
    const uint32_t key = r.intern(py::str(item.first).cast<std::string>());
    py::handle value = item.second;
    if (py::isinstance<py::bool_>(value) || py::isinstance<py::int_>(value)) {
      out[n++] = trace::intArg(key, value.cast<int64_t>());
    } else if (py::isinstance<py::float_>(value)) {
      out[n++] = trace::doubleArg(key, value.cast<double>());
    } else {
      out[n++] = trace::stringArg(key, r.intern(py::str(value).cast<std::string>()));
    }
  }
  return n;
}

}  // namespace

void registerTraceBindings(py::module& parent) {
  py::module m = parent.def_submodule("trace", "The trace recorder (see ringx.trace).");
  m.def("now", &trace::nowNs, "Nanoseconds of this rank's steady clock (the trace's clock).");
  m.def("enabled", [] { return Recorder::enabled(); });
  m.def(
      "span",
      [](const std::string& name, const std::string& track, const std::string& category,
         int64_t beginNs, int64_t endNs, const py::dict& args) {
        if (!Recorder::enabled()) return;
        Recorder& r = Recorder::instance();
        trace::Arg converted[Recorder::kMaxArgs];
        const uint32_t n = convertArgs(args, converted);
        r.span(categoryFromName(category), r.intern(track), r.intern(name), beginNs, endNs,
               converted, n);
      },
      py::arg("name"), py::arg("track"), py::arg("category"), py::arg("begin_ns"),
      py::arg("end_ns"), py::arg("args"));
  m.def(
      "instant",
      [](const std::string& name, const std::string& track, const std::string& category,
         const py::dict& args) {
        if (!Recorder::enabled()) return;
        Recorder& r = Recorder::instance();
        trace::Arg converted[Recorder::kMaxArgs];
        const uint32_t n = convertArgs(args, converted);
        r.instant(categoryFromName(category), r.intern(track), r.intern(name), trace::nowNs(),
                  converted, n);
      },
      py::arg("name"), py::arg("track"), py::arg("category"), py::arg("args"));
  m.def(
      "counter",
      [](const std::string& name, double value, const std::string& category,
         const std::string& track) {
        if (!Recorder::enabled()) return;
        Recorder& r = Recorder::instance();
        r.counter(categoryFromName(category), r.intern(track), r.intern(name), trace::nowNs(),
                  value);
      },
      py::arg("name"), py::arg("value"), py::arg("category"), py::arg("track"));
  m.def("mark_step", &trace::markStep, py::arg("step"));
  m.def(
      "start_local",
      [](const std::string& dir, int rank, int size, int rssIntervalMs) {
        // Without a ringx group there is no store to meet the other ranks
        // through: this rank records its own file, with no manifest and no
        // clock offsets.
        trace::RecorderOptions options;
        options.rank = rank;
        options.worldSize = size;
        options.rssIntervalMs = rssIntervalMs;
        Recorder::instance().start(options);
        try {
          Recorder::instance().addSink(
              std::make_unique<trace::FileSink>(trace::rankFileName(dir, rank)));
        } catch (...) {
          Recorder::instance().stop();
          throw;
        }
      },
      py::arg("dir"), py::arg("rank"), py::arg("size"), py::arg("rss_interval_ms"));
  m.def(
      "stop",
      [] {
        observe::settleWatches(std::chrono::seconds(10));
        TraceSession::stop();
        Recorder::instance().stop();
      },
      py::call_guard<py::gil_scoped_release>(), "Flush and close the trace (every sink).");
  m.def(
      "flush", [] { Recorder::instance().flush(); }, py::call_guard<py::gil_scoped_release>());
  m.def("live_address", &TraceSession::liveAddress);
  m.def("watch_torch_engines", &observe::watchTorchEngines,
        "While tracing records: installs the callbacks that watch torch's DDP and FSDP2 (once "
        "per recording); whether they are installed.");
  m.def("dropped_events", [] { return Recorder::instance().droppedEvents(); });
  // The flight recorder works with tracing off; it lives here for its Python face only.
  m.def(
      "dump_flight_recorder",
      [](const std::string& dir) { return flight::dumpAll("ringx.dump_flight_recorder()", dir); },
      py::arg("dir") = "", py::call_guard<py::gil_scoped_release>(),
      "Writes every ringx group's flight recorder to DIR/flight-rank-<N>.json (DIR empty: "
      "RINGX_DUMP_DIR or its default) and returns the file's path.");
  m.def("flight_dump_directory", &flight::dumpDirectory,
        "Where dumps go: RINGX_DUMP_DIR, else /tmp/ringx-flight-recorder-<user>.");
}

}  // namespace ringx::c10d_glue
