// ringx::ddp::DistributedDataParallel: data-parallel training for libtorch's C++
// frontend, which has no DDP of its own.
//
//   auto pg = ...;                                 // any c10d::ProcessGroup
//   auto model = torch::nn::Sequential(...);
//   ringx::ddp::DistributedDataParallel ddp(model, pg,
//       ringx::ddp::Options().bucket_cap_mb(4));   // broadcasts rank 0's weights
//   torch::optim::SGD opt(ddp.parameters(), 0.1);
//   auto loss = torch::mse_loss(ddp.forward(x), y);
//   loss.backward();                               // gradients are averaged across ranks
//   opt.step();
//
// forward() forwards its arguments to the wrapped module's forward(); everything
// else lives in Engine (engine.h), shared with the Python front end.
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/c10d/front_end.h"
#include "ddp/comm_hooks.h"
#include "ddp/engine.h"

namespace ringx::ddp {

namespace detail {
NamedTensors named(const torch::OrderedDict<std::string, at::Tensor>& dict);
}  // namespace detail

// `ModuleHolder` is a torch::nn module holder (torch::nn::Linear, Sequential, a
// TORCH_MODULE of your own) or a std::shared_ptr to a module.
template <typename ModuleHolder>
class DistributedDataParallel {
 public:
  DistributedDataParallel(ModuleHolder module,
                          c10::intrusive_ptr<::c10d::ProcessGroup> processGroup,
                          Options options = {})
      : module_(std::move(module)),
        engine_(detail::named(module_->named_parameters(/*recurse=*/true)),
                detail::named(module_->named_buffers(/*recurse=*/true)), std::move(processGroup),
                options) {}

  template <typename... Args>
  auto forward(Args&&... args) {
    engine_.beforeForward();
    auto output = module_->forward(std::forward<Args>(args)...);
    std::vector<at::Tensor> tensors;
    c10d_glue::collectTensors(output, tensors);
    engine_.afterForward(tensors);
    return output;
  }
  template <typename... Args>
  auto operator()(Args&&... args) {
    return forward(std::forward<Args>(args)...);
  }

  // While the guard lives, backward accumulates gradients locally (no communication).
  using NoSyncGuard = c10d_glue::NoSyncScope<Engine>;
  [[nodiscard]] NoSyncGuard noSync() { return NoSyncGuard(engine_); }

  void registerCommHook(std::unique_ptr<::c10d::CommHookInterface> hook) {
    engine_.registerCommHook(std::move(hook));
  }

  std::vector<at::Tensor> parameters() { return module_->parameters(); }
  ModuleHolder& module() { return module_; }
  Engine& engine() { return engine_; }

 private:
  ModuleHolder module_;
  Engine engine_;
};

}  // namespace ringx::ddp
