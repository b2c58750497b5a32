// ringx._C.fsdp: the FSDP engine for python/ringx/fsdp.py. Each Python wrapper
// owns a Unit (made when it is constructed: that is when its parameters are
// sharded); the root wrapper builds the Engine over its own unit and every
// nested one at its first forward, and calls pre_forward / post_forward around
// each wrapped module's forward.
#include <pybind11/stl.h>
#include <torch/extension.h>

#include "fsdp/engine.h"
#include "fsdp/unit.h"
#include "observe/torch_callbacks.h"
#include "python/bindings/bindings.h"

namespace py = pybind11;

namespace ringx::fsdp {
namespace {

c10::optional<at::ScalarType> parseDtype(const c10::optional<std::string>& name) {
  if (!name) return c10::nullopt;
  std::string n = *name;
  if (n.rfind("torch.", 0) == 0) n = n.substr(6);
  if (n == "float32" || n == "float") return at::kFloat;
  if (n == "bfloat16") return at::kBFloat16;
  if (n == "float16" || n == "half") return at::kHalf;
  if (n == "float64" || n == "double") return at::kDouble;
  throw std::invalid_argument("ringx.fsdp: mixed precision dtype '" + *name +
                              "' is not a floating-point dtype (use torch.bfloat16, "
                              "torch.float16 or torch.float32)");
}

const char* stateName(Unit::State state) {
  switch (state) {
    case Unit::State::kSharded:
      return "sharded";
    case Unit::State::kGathering:
      return "gathering";
    case Unit::State::kUnsharded:
      return "unsharded";
  }
  return "?";
}

py::dict memoryDict(const MemoryCounters& m) {
  py::dict d;
  d["sharded_bytes"] = m.shardedBytes;
  d["unsharded_bytes"] = m.unshardedBytes;
  d["grad_bytes"] = m.gradBytes;
  d["peak_bytes"] = m.peakBytes;
  return d;
}

}  // namespace

void registerFsdpBindings(py::module& parent) {
  py::module m = parent.def_submodule("fsdp", "The FSDP engine (see ringx.fsdp).");
  py::class_<Unit, std::shared_ptr<Unit>>(m, "Unit")
      .def(py::init([](std::string name, const NamedTensors& params, const std::string& strategy,
                       ProcessGroupPtr world, ProcessGroupPtr shard, ProcessGroupPtr replicate,
                       ProcessGroupPtr gatherLane, const c10::optional<std::string>& paramDtype,
                       const c10::optional<std::string>& reduceDtype, bool syncModuleStates,
                       const std::string& backwardPrefetch, bool forwardPrefetch,
                       bool limitAllGathers) {
             Options options;
             options.sharding_strategy(parseShardingStrategy(strategy))
                 .backward_prefetch(parseBackwardPrefetch(backwardPrefetch))
                 .forward_prefetch(forwardPrefetch)
                 .limit_all_gathers(limitAllGathers)
                 .param_dtype(parseDtype(paramDtype))
                 .reduce_dtype(parseDtype(reduceDtype))
                 .sync_module_states(syncModuleStates);
             return Unit::create(
                 std::move(name), params,
                 makeGroups(options.sharding_strategy(), std::move(world), std::move(shard),
                            std::move(replicate), std::move(gatherLane)),
                 options);
           }),
           py::arg("name"), py::arg("params"), py::arg("sharding_strategy"),
           py::arg("process_group"), py::arg("shard_group"), py::arg("replicate_group"),
           py::arg("gather_lane"), py::arg("param_dtype"), py::arg("reduce_dtype"),
           py::arg("sync_module_states"), py::arg("backward_prefetch"), py::arg("forward_prefetch"),
           py::arg("limit_all_gathers"), py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("name", &Unit::name)
      .def("set_name", &Unit::setName, py::arg("name"))
      .def_property_readonly("param_names", &Unit::paramNames)
      .def_property_readonly("shard", &Unit::shard)
      .def("adopt_shard", &Unit::adoptShard, py::arg("parameter"))
      .def_property_readonly("state", [](const Unit& u) { return stateName(u.state()); })
      .def_property_readonly(
          "sharding_strategy",
          [](const Unit& u) { return shardingStrategyName(u.options().sharding_strategy()); })
      .def_property_readonly("shard_factor", [](const Unit& u) { return u.layout().shardFactor; })
      .def_property_readonly("total_numel", [](const Unit& u) { return u.layout().totalNumel; })
      .def_property_readonly("padded_numel", [](const Unit& u) { return u.layout().paddedNumel; })
      .def_property_readonly("shard_numel", [](const Unit& u) { return u.layout().shardNumel; })
      .def("full_parameters", &Unit::gatherFullParameters, py::call_guard<py::gil_scoped_release>())
      .def("load_full_parameters", &Unit::loadFullParameters, py::arg("tensors"),
           py::call_guard<py::gil_scoped_release>());

  py::class_<Engine>(m, "Engine")
      .def(py::init<std::vector<std::shared_ptr<Unit>>>(), py::arg("units"))
      .def("pre_forward", &Engine::preForward, py::arg("unit"),
           py::call_guard<py::gil_scoped_release>())
      .def("post_forward", &Engine::postForward, py::arg("unit"), py::arg("outputs"),
           py::call_guard<py::gil_scoped_release>())
      .def_property("require_backward_grad_sync", &Engine::requireBackwardGradSync,
                    &Engine::setRequireBackwardGradSync)
      .def("unshard_all", &Engine::unshardAll, py::call_guard<py::gil_scoped_release>())
      .def("reshard_all", &Engine::reshardAll, py::call_guard<py::gil_scoped_release>())
      .def("memory", [](const Engine& e) { return memoryDict(e.memory()); })
      .def("reset_peak_memory", &Engine::resetPeakMemory)
      .def_property_readonly("step", &Engine::step)
      .def_property_readonly("forward_order", &Engine::forwardOrder);

  // torch's FSDP2, watched while tracing (python/ringx/_watch.py): its units' sizes.
  m.def(
      "watch_torch_units",
      [](const std::vector<
             std::tuple<std::string, int64_t, int64_t, int64_t, int64_t, bool, int64_t>>& units,
         const std::string& strategy, const std::string& backwardPrefetch, bool forwardPrefetch,
         int64_t shardSize, bool blocking) {
        auto watch = observe::fsdpWatch();
        if (!watch) return false;  // not tracing
        std::vector<observe::FsdpUnit> converted;
        for (const auto& [name, sharded, unsharded, grads, shardedGrads, reshards, held] : units) {
          converted.push_back({name, sharded, unsharded, grads, shardedGrads, reshards, held});
        }
        watch->setUnits(std::move(converted),
                        {strategy, backwardPrefetch, forwardPrefetch, shardSize, blocking});
        return true;
      },
      py::arg("units"), py::arg("sharding_strategy"), py::arg("backward_prefetch"),
      py::arg("forward_prefetch"), py::arg("shard_size"), py::arg("blocking"),
      "Hands the FSDP2 watch each unit (name, sharded bytes, unsharded bytes, gradient bytes, "
      "sharded gradient bytes, reshards after forward, bytes held after forward) and the schedule "
      "(blocking: collectives "
      "block the issuing thread); False when not tracing.");
  m.def("torch_units_known", [] {
    auto watch = observe::fsdpWatch();
    return watch && watch->hasUnits();
  });
  m.def("torch_memory", [] {
    auto watch = observe::fsdpWatch();
    return watch ? py::object(memoryDict(watch->memory())) : py::object(py::none());
  });
}

}  // namespace ringx::fsdp
