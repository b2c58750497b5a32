// ringx::fsdp::FullyShardedDataParallel: fully sharded data parallel for
// libtorch's C++ frontend, the same engine as ringx.fsdp in Python.
//
//   struct NetImpl : torch::nn::Module {
//     NetImpl() {
//       for (int i = 0; i < 8; ++i)  // every block is its own unit
//         blocks.push_back(register_module("block" + std::to_string(i),
//                                          ringx::fsdp::Sharded(Block(256))));
//       head = register_module("head", torch::nn::Linear(256, 10));  // the root unit
//     }
//     torch::Tensor forward(torch::Tensor x) {
//       for (auto& b : blocks) x = b->forward(x);
//       return head(x);
//     }
//     std::vector<std::shared_ptr<ringx::fsdp::ShardedImpl<Block>>> blocks;
//     torch::nn::Linear head{nullptr};
//   };
//   TORCH_MODULE(Net);
//
//   ringx::fsdp::FullyShardedDataParallel<Net> fsdp(Net(), group);  // shards every unit
//   torch::optim::SGD opt(fsdp.parameters(), 0.1);  // the shards, not the module's tensors
//   torch::mse_loss(fsdp.forward(x), y).backward();
//   opt.step();
//   auto state = fsdp.stateDict();                  // full tensors, the module's names
//
// Units are the Sharded<> submodules (nested ones too) plus the root, which holds
// every parameter no Sharded<> unit does. The wrapped module's own parameters
// keep their names but are empty outside a unit's forward and backward: give
// the optimizer fsdp.parameters(), and read weights with stateDict().
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/c10d/front_end.h"
#include "fsdp/engine.h"
#include "fsdp/unit.h"

namespace ringx::fsdp {

namespace detail {

// What the root needs from every Sharded<> unit, whatever module it wraps.
class ShardedBase : public torch::nn::Module {
 public:
  Engine* engine = nullptr;
  size_t index = 0;
};

// Builds the units of `root` (the root's own first, then every Sharded<> in
// module order) and tells each Sharded<> its engine index. Collective.
std::vector<std::shared_ptr<Unit>> buildUnits(torch::nn::Module& root, const Groups& groups,
                                              const Options& options,
                                              std::vector<ShardedBase*>* nested);
// A module path without the wrappers' own "_fsdp_wrapped_module" level.
std::string cleanName(const std::string& name);

}  // namespace detail

// A unit inside a model: use Sharded(module) where the model registers `module`.
template <typename ModuleHolder>
class ShardedImpl : public detail::ShardedBase {
 public:
  explicit ShardedImpl(ModuleHolder module)
      : module_(register_module("_fsdp_wrapped_module", std::move(module))) {}

  template <typename... Args>
  auto forward(Args&&... args) {
    TORCH_CHECK(engine,
                "ringx.fsdp: a Sharded<> unit was called before a FullyShardedDataParallel "
                "was built around the model that holds it");
    engine->preForward(index);
    auto output = module_->forward(std::forward<Args>(args)...);
    std::vector<at::Tensor> tensors;
    c10d_glue::collectTensors(output, tensors);
    engine->postForward(index, tensors);
    return output;
  }
  ModuleHolder& module() { return module_; }

 private:
  ModuleHolder module_;
};

template <typename ModuleHolder>
std::shared_ptr<ShardedImpl<ModuleHolder>> Sharded(ModuleHolder module) {
  return std::make_shared<ShardedImpl<ModuleHolder>>(std::move(module));
}

template <typename ModuleHolder>
class FullyShardedDataParallel {
 public:
  // `shardGroup` and `replicateGroup` are for HYBRID_SHARD only; `gatherLane`
  // (optional) is a second group over the shard group's ranks for the gathers.
  FullyShardedDataParallel(ModuleHolder module, ProcessGroupPtr processGroup, Options options = {},
                           ProcessGroupPtr shardGroup = {}, ProcessGroupPtr replicateGroup = {},
                           ProcessGroupPtr gatherLane = {})
      : module_(std::move(module)) {
    std::vector<detail::ShardedBase*> nested;
    Groups groups =
        makeGroups(options.sharding_strategy(), std::move(processGroup), std::move(shardGroup),
                   std::move(replicateGroup), std::move(gatherLane));
    engine_ = std::make_unique<Engine>(detail::buildUnits(*module_, groups, options, &nested));
    for (size_t i = 0; i < nested.size(); ++i) {
      nested[i]->engine = engine_.get();
      nested[i]->index = i + 1;
    }
  }

  template <typename... Args>
  auto forward(Args&&... args) {
    engine_->preForward(0);
    auto output = module_->forward(std::forward<Args>(args)...);
    std::vector<at::Tensor> tensors;
    c10d_glue::collectTensors(output, tensors);
    engine_->postForward(0, tensors);
    return output;
  }
  template <typename... Args>
  auto operator()(Args&&... args) {
    return forward(std::forward<Args>(args)...);
  }

  // The fp32 shards the optimizer updates, one per unit.
  std::vector<at::Tensor> parameters() const {
    std::vector<at::Tensor> shards;
    for (const auto& unit : engine_->units()) {
      if (unit->trainable()) shards.push_back(unit->shard());
    }
    return shards;
  }

  // Full parameters (gathered: collective) and buffers, named as in the module.
  NamedTensors stateDict() {
    NamedTensors state;
    for (const auto& unit : engine_->units()) {
      std::vector<at::Tensor> full = unit->gatherFullParameters();
      for (size_t i = 0; i < full.size(); ++i) state.emplace_back(unit->paramNames()[i], full[i]);
    }
    for (const auto& item : module_->named_buffers(/*recurse=*/true)) {
      state.emplace_back(detail::cleanName(item.key()), item.value().detach().clone());
    }
    return state;
  }

  // Loads what stateDict() returned (on any world size): every name must be there.
  void loadStateDict(const NamedTensors& state) {
    std::unordered_map<std::string, at::Tensor> byName(state.begin(), state.end());
    for (const auto& unit : engine_->units()) {
      std::vector<at::Tensor> full;
      for (const std::string& name : unit->paramNames()) {
        auto it = byName.find(name);
        TORCH_CHECK(it != byName.end(), "ringx.fsdp: loadStateDict: '", name, "' is missing");
        full.push_back(it->second);
      }
      unit->loadFullParameters(full);
    }
    at::NoGradGuard noGrad;
    for (const auto& item : module_->named_buffers(/*recurse=*/true)) {
      auto it = byName.find(detail::cleanName(item.key()));
      TORCH_CHECK(it != byName.end(), "ringx.fsdp: loadStateDict: buffer '", item.key(),
                  "' is missing");
      item.value().copy_(it->second);
    }
  }

  // While the guard lives, backward keeps unsharded gradients and reduces nothing.
  using NoSyncGuard = c10d_glue::NoSyncScope<Engine>;
  [[nodiscard]] NoSyncGuard noSync() { return NoSyncGuard(*engine_); }

  MemoryCounters memory() const { return engine_->memory(); }
  ModuleHolder& module() { return module_; }
  Engine& engine() { return *engine_; }

 private:
  ModuleHolder module_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace ringx::fsdp
