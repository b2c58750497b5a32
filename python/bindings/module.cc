// The Python extension ringx._C: the process group class and the creator that
// python/ringx/__init__.py registers with torch.distributed.Backend.
#include <pybind11/chrono.h>
#include <torch/extension.h>

#include <optional>

#include "backend/c10d/cuda_staging.h"
#include "backend/c10d/process_group_ringx.h"
#include "backend/c10d/torch_compat.h"
#include "backend/device/work_queue.h"
#include "observe/torch_callbacks.h"
#include "python/bindings/bindings.h"

namespace py = pybind11;
using ringx::c10d_glue::BackendBase;
using ringx::c10d_glue::ProcessGroupRingx;

PYBIND11_MODULE(_C, m) {
  ProcessGroupRingx::setGilRelease(
      {[]() -> void* {
         return Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
       },
       [](void* state) { PyEval_RestoreThread(static_cast<PyThreadState*>(state)); }});
  m.doc() = "ringx: a c10d backend with its own ring collectives";
  // The base class must be registered with pybind before we derive from it.
  py::module::import("torch.distributed");

  py::class_<ProcessGroupRingx, BackendBase, c10::intrusive_ptr<ProcessGroupRingx>>(
      m, "ProcessGroupRingx",
      "A ringx process group. Create it with torch.distributed.init_process_group("
      "backend='ringx') or new_group(..., backend='ringx').")
      .def(py::init([](const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout) {
             return c10::make_intrusive<ProcessGroupRingx>(store, rank, size, timeout);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::call_guard<py::gil_scoped_release>())
      .def(
          "broadcast_coalesced",
          [](ProcessGroupRingx& self, std::vector<at::Tensor> tensors, int src,
             int64_t bucketBytes) { self.broadcastCoalesced(tensors, src, bucketBytes); },
          py::arg("tensors"), py::arg("src"), py::arg("bucket_bytes"),
          py::call_guard<py::gil_scoped_release>(),
          "Broadcast many tensors from src in flat buckets (at most two in flight).")
      .def(
          "_shrink",
          [](ProcessGroupRingx& self, const std::vector<int64_t>& ranksToExclude, bool abortFirst,
             std::chrono::milliseconds timeout) {
            return self.shrinkTo(ranksToExclude, abortFirst, timeout);
          },
          py::arg("ranks_to_exclude"), py::arg("abort_first"), py::arg("timeout"),
          py::call_guard<py::gil_scoped_release>(),
          "The group without ranks_to_exclude, renumbered (what ringx.shrink_group calls on a "
          "torch without dist.shrink_group).")
      .def_property_readonly("timeout", &ProcessGroupRingx::timeout)
      .def("set_timeout", &ProcessGroupRingx::setTimeout, py::arg("timeout"),
           "The timeout of the collectives issued from now on: what torch's set_timeout and "
           "_set_pg_timeout set (ringx/_timeout.py).")
      .def_property_readonly("group_name", &ProcessGroupRingx::groupName,
                             "The group's name in traces ('world' for the default group).")
      .def_property_readonly(
          "error",
          [](const ProcessGroupRingx& self) -> std::optional<std::string> {
            std::string text = self.errorText();
            if (text.empty()) return std::nullopt;
            return text;
          },
          "The group's first failure (a collective's error, a dead peer, an abort), or None "
          "while it works: what torchft's errored() asks.")
      .def(
          "_start_tracing",
          [](ProcessGroupRingx& self, const std::string& dir, const std::string& listen,
             const std::string& token, int rssIntervalMs, int clockSyncIntervalMs) {
            ringx::TraceConfig config = ringx::traceConfigFromEnvironment();
            config.dir = dir;
            config.listen = listen;
            config.token = token;
            config.rssIntervalMs = rssIntervalMs;
            config.clockSyncIntervalMs = clockSyncIntervalMs;
            self.startTracing(config);
          },
          py::arg("dir"), py::arg("listen"), py::arg("token"), py::arg("rss_interval_ms"),
          py::arg("clock_sync_interval_ms"), py::call_guard<py::gil_scoped_release>(),
          "Starts tracing over this group's ranks (every rank must call it); see ringx.trace.")
      .def(
          "calls",
          [](const ProcessGroupRingx& self) {
            const auto calls = self.callsRun();
            py::dict out;
            out["caller_thread"] = calls.callerThread;
            out["in_place"] = calls.inPlace;
            out["comm_thread"] = calls.commThread;
            return out;
          },
          "How many collectives ran on the calling thread, in place inside another of the "
          "group's collectives (issued by a Future callback), and on the group's "
          "communication thread.")
      .def("transports", &ProcessGroupRingx::transports,
           "The transport to each rank of the group: 'shm', 'tcp', or 'self'.")
      .def("cuda_transport", &ProcessGroupRingx::cudaTransport,
           "What the group's collectives on CUDA tensors use within its host: ('cuda-ipc', '') "
           "for the device ring, or ('', why not).")
      .def(
          "traffic",
          [](const ProcessGroupRingx& self) {
            py::list out;
            for (const ringx::ConnectionTraffic& c : self.traffic()) {
              py::dict entry;
              entry["peer"] = c.peer;
              entry["channel"] = c.channel;
              entry["transport"] = c.transport;
              entry["sent"] = c.sent;
              entry["received"] = c.received;
              out.append(entry);
            }
            return out;
          },
          "Bytes sent and received over each connection to another rank, cumulative: one "
          "dict per (peer, channel) with peer, channel ('collective' or 'p2p'), transport, "
          "sent, received.");

  m.def(
      "create_process_group",
      [](const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
         std::chrono::milliseconds timeout, const std::string& groupName, bool connect) {
        return ringx::c10d_glue::createProcessGroupRingx(store, rank, size, timeout, groupName,
                                                         connect);
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
      py::arg("group_name") = "world", py::arg("connect") = true,
      py::call_guard<py::gil_scoped_release>(),
      "The creator given to torch.distributed.Backend.register_backend (connect=False: a group "
      "that joins its peers at dist._reconfigure).");

  m.def("cuda_built", &ringx::c10d_glue::cudaBuilt,
        "Whether this build of ringx runs collectives on CUDA tensors (it was built against a "
        "torch with CUDA, with nvcc).");

  m.def(
      "torch_features",
      []() {
        py::list out;
        for (const auto& feature : ringx::c10d_glue::torchFeatures()) {
          py::dict entry;
          entry["name"] = feature.name;
          entry["on"] = feature.on;
          entry["since"] = feature.since;
          entry["what"] = feature.what;
          out.append(entry);
        }
        return out;
      },
      "The features that depend on the torch release this build was compiled against "
      "(backend/c10d/torch_compat.h); ringx.features() reports them.");

  m.def(
      "drain_communication_threads",
      [](double seconds) {
        return ringx::WorkQueue::drainAll(
            std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
      },
      py::arg("seconds"), py::call_guard<py::gil_scoped_release>(),
      "Waits until every ringx communication thread has finished and released the work issued "
      "so far (registered with atexit by ringx/__init__.py).");

  ringx::c10d_glue::registerTraceBindings(m);
  // torch's own DDP and FSDP2 are watched whenever tracing records (observe/, ddp/watch,
  // fsdp/watch).
  ringx::observe::followTracing();
  ringx::c10d_glue::registerAnalysisBindings(m);
  ringx::c10d_glue::registerNcclBindings(m);
  // The engines' classes are registered when ringx.ddp or ringx.fsdp is first imported, not
  // with the module: registering them took half of this module's initialisation (~1 ms), which
  // every rank paid at `import ringx`, 32 ranks at once on 2 cores, most never training.
  m.def(
      "_register_engines",
      [](py::module& module) {
        if (py::hasattr(module, "ddp")) return;
        ringx::ddp::registerDdpBindings(module);
        ringx::fsdp::registerFsdpBindings(module);
      },
      py::arg("module"),
      "Registers ringx._C.ddp and ringx._C.fsdp (once; ringx/ddp.py and fsdp.py call it).");
}
