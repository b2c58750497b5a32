// What the C++ front ends (ddp::DistributedDataParallel, fsdp::FullyShardedDataParallel) share
// around a module's forward: the tensors of its output, and no_sync().
#pragma once

#include <ATen/core/Tensor.h>

#include <tuple>
#include <vector>

namespace ringx::c10d_glue {

// The tensors of a forward's output, for the unused-parameter walk.
inline void collectTensors(const at::Tensor& t, std::vector<at::Tensor>& out) { out.push_back(t); }
inline void collectTensors(const std::vector<at::Tensor>& ts, std::vector<at::Tensor>& out) {
  out.insert(out.end(), ts.begin(), ts.end());
}
template <typename... T>
void collectTensors(const std::tuple<T...>& tuple, std::vector<at::Tensor>& out) {
  std::apply([&](const auto&... items) { (collectTensors(items, out), ...); }, tuple);
}
template <typename T>
void collectTensors(const T&, std::vector<at::Tensor>&) {}  // not a tensor: nothing to walk

// no_sync() for the C++ front ends (ddp::Engine, fsdp::Engine): while it lives,
// backward keeps gradients local and communicates nothing.
template <typename EngineT>
class NoSyncScope {
 public:
  explicit NoSyncScope(EngineT& engine)
      : engine_(engine), previous_(engine.requireBackwardGradSync()) {
    engine_.setRequireBackwardGradSync(false);
  }
  ~NoSyncScope() { engine_.setRequireBackwardGradSync(previous_); }
  NoSyncScope(const NoSyncScope&) = delete;
  NoSyncScope& operator=(const NoSyncScope&) = delete;

 private:
  EngineT& engine_;
  bool previous_;
};

}  // namespace ringx::c10d_glue
