// ringx._C.ddp: the DDP engine for python/ringx/ddp.py. The Python class holds
// an Engine and calls before_forward / after_forward around the module's forward;
// everything else (buckets, hooks, allreduce, timing) happens in C++.
#include <pybind11/stl.h>
#include <torch/csrc/distributed/c10d/python_comm_hook.h>
#include <torch/extension.h>

#include "analysis/figures.h"
#include "ddp/comm_hooks.h"
#include "ddp/engine.h"
#include "ddp/reducer.h"
#include "ddp/watch/ddp_watch.h"
#include "observe/torch_callbacks.h"
#include "python/bindings/bindings.h"
#include "trace/record/recorder.h"

namespace py = pybind11;

namespace ringx::ddp {
namespace {

py::dict bucketTimingDict(const BucketTiming& b) {
  py::dict d;
  d["index"] = b.index;
  d["bytes"] = b.bytes;
  d["params"] = b.params;
  d["first_grad_ns"] = b.firstGradNs;
  d["ready_ns"] = b.readyNs;
  d["launch_ns"] = b.launchNs;
  d["wire_start_ns"] = b.wireStartNs;
  d["wire_end_ns"] = b.wireEndNs;
  d["done_ns"] = b.doneNs;
  d["copy_back_begin_ns"] = b.copyBackBeginNs;
  d["copy_back_end_ns"] = b.copyBackEndNs;
  d["exposed_ns"] = b.exposedNs;
  d["seq"] = b.seq;
  return d;
}

py::dict iterationDict(const IterationTiming& it) {
  py::dict d;
  d["iteration"] = it.iteration;
  d["forward_begin_ns"] = it.forwardBeginNs;
  d["forward_end_ns"] = it.forwardEndNs;
  d["backward_begin_ns"] = it.backwardBeginNs;
  d["backward_end_ns"] = it.backwardEndNs;
  d["finalize_end_ns"] = it.finalizeEndNs;
  d["exposed_ns"] = it.exposedNs;
  py::list buckets;
  analysis::CommOverlap overlap;  // hidden communication as every ringx tool defines it
  for (const BucketTiming& b : it.buckets) {
    buckets.append(bucketTimingDict(b));
    overlap.add(b.wireEndNs - b.wireStartNs, b.exposedNs);
  }
  d["wire_ns"] = overlap.wireNs();
  d["hidden_share"] = overlap.wireNs() > 0 ? py::cast(overlap.hiddenShare()) : py::none();
  d["buckets"] = buckets;
  return d;
}

}  // namespace

void registerDdpBindings(py::module& parent) {
  py::module m = parent.def_submodule("ddp", "The DDP engine (see ringx.ddp).");
  py::class_<Engine>(m, "Engine")
      .def(py::init([](const NamedTensors& parameters, const NamedTensors& buffers,
                       c10::intrusive_ptr<::c10d::ProcessGroup> processGroup, double bucketCapMb,
                       bool findUnusedParameters, bool gradientAsBucketView, bool broadcastBuffers,
                       bool staticGraph, bool autoBucketCap) {
             Options options;
             options.bucket_cap_mb(bucketCapMb)
                 .auto_bucket_cap(autoBucketCap)
                 .find_unused_parameters(findUnusedParameters)
                 .gradient_as_bucket_view(gradientAsBucketView)
                 .broadcast_buffers(broadcastBuffers)
                 .static_graph(staticGraph);
             return std::make_unique<Engine>(parameters, buffers, std::move(processGroup), options);
           }),
           py::arg("parameters"), py::arg("buffers"), py::arg("process_group"),
           py::arg("bucket_cap_mb"), py::arg("find_unused_parameters"),
           py::arg("gradient_as_bucket_view"), py::arg("broadcast_buffers"),
           py::arg("static_graph"), py::arg("auto_bucket_cap") = false,
           py::call_guard<py::gil_scoped_release>())
      .def("auto_choice", [](Engine& e) { return e.reducer().autoChoice(); })
      .def("before_forward", &Engine::beforeForward, py::call_guard<py::gil_scoped_release>())
      .def("after_forward", &Engine::afterForward, py::arg("outputs"),
           py::call_guard<py::gil_scoped_release>())
      .def_property("require_backward_grad_sync", &Engine::requireBackwardGradSync,
                    &Engine::setRequireBackwardGradSync)
      .def(
          "register_comm_hook",
          [](Engine& engine, py::object state, py::object hook) {
            engine.registerCommHook(
                std::make_unique<::c10d::PythonCommHook>(std::move(state), std::move(hook)));
          },
          py::arg("state"), py::arg("hook"))
      .def(
          "register_builtin_comm_hook",
          [](Engine& engine, const std::string& name) {
            if (name == "fp16") {
              engine.registerCommHook(fp16CompressHook(engine.processGroup()));
            } else if (name == "bf16") {
              engine.registerCommHook(bf16CompressHook(engine.processGroup()));
            } else {
              throw std::invalid_argument("ringx.ddp: no built-in hook '" + name +
                                          "' (there are fp16 and bf16)");
            }
          },
          py::arg("name"))
      .def("bucket_assignment", [](Engine& e) { return e.reducer().bucketAssignment(); })
      .def("bucket_bytes", [](Engine& e) { return e.reducer().bucketBytesHeld(); })
      .def_property_readonly("buckets_rebuilt",
                             [](Engine& e) { return e.reducer().bucketsRebuilt(); })
      .def("parameter_names", [](Engine& e) { return e.reducer().parameterNames(); })
      .def("globally_unused_parameters",
           [](Engine& e) {
             std::vector<std::string> names;
             for (size_t i : e.reducer().globallyUnusedParameters()) {
               names.push_back(e.reducer().parameterNames()[i]);
             }
             return names;
           })
      .def("last_iteration", [](Engine& e) { return iterationDict(e.reducer().lastIteration()); });

  // torch's own DistributedDataParallel, watched while tracing (python/ringx/_watch.py).
  using observe::DdpWatch;
  py::class_<DdpWatch, std::shared_ptr<DdpWatch>>(m, "TorchWatch")
      .def(py::init<>())
      .def(
          "set_layout",
          [](DdpWatch& watch, const std::vector<at::Tensor>& params,
             const std::vector<std::vector<size_t>>& buckets,
             const std::vector<int64_t>& bucketBytes, int64_t bucketCapBytes,
             int64_t firstBucketBytes, bool gradientAsBucketView, int64_t worldSize,
             bool findUnused) {
            observe::DdpLayout layout;
            for (const at::Tensor& p : params) {
              layout.params.push_back(p.unsafeGetTensorImpl());
              layout.facts.push_back(
                  {p.numel() * static_cast<int64_t>(p.element_size()), bucketingGroup(p)});
            }
            for (const auto& bucket : buckets) {
              for (size_t i : bucket) {
                if (i >= params.size()) throw py::index_error("bucket names no such parameter");
              }
            }
            layout.buckets = buckets;
            layout.bucketBytes = bucketBytes;
            layout.plan.bucketCapBytes = bucketCapBytes;
            layout.plan.firstBucketBytes = firstBucketBytes;
            layout.plan.gradientAsBucketView = gradientAsBucketView;
            layout.plan.worldSize = worldSize;
            layout.findUnused = findUnused;
            watch.setLayout(std::move(layout));
          },
          py::arg("params"), py::arg("buckets"), py::arg("bucket_bytes"),
          py::arg("bucket_cap_bytes"), py::arg("first_bucket_bytes"),
          py::arg("gradient_as_bucket_view"), py::arg("world_size"),
          py::arg("find_unused_parameters"))
      .def("forward_begin", [](DdpWatch& watch) { watch.forwardBegin(trace::nowNs()); })
      .def(
          "forward_end",
          [](std::shared_ptr<DdpWatch> watch, bool syncsGradients) {
            watch->forwardEnd(trace::nowNs(), syncsGradients);
            if (syncsGradients) observe::watchBackwardOf(watch);
          },
          py::arg("syncs_gradients"))
      .def("record_rebuild", &DdpWatch::recordRebuild, py::arg("begin_ns"), py::arg("end_ns"))
      .def("iterations", &DdpWatch::iterations)
      .def("last_iteration", [](DdpWatch& watch) { return iterationDict(watch.lastIteration()); });
  m.def("observing", &observe::installed,
        "Whether the callbacks that watch torch's engines are installed (tracing is on).");
}

}  // namespace ringx::ddp
