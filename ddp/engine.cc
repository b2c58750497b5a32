#include "ddp/engine.h"
#include "ddp/distributed_data_parallel.h"

#include <ATen/core/grad_mode.h>
#include <c10/core/TensorImpl.h>

#include <sstream>
#include <unordered_set>

#include "backend/c10d/process_group_ringx.h"

namespace ringx::ddp {

Engine::Engine(const NamedTensors& parameters, const NamedTensors& buffers,
               c10::intrusive_ptr<::c10d::ProcessGroup> processGroup, Options options)
    : processGroup_(std::move(processGroup)), options_(options) {
  TORCH_CHECK(processGroup_, "ringx.ddp: no process group (initialise torch.distributed first)");
  TORCH_CHECK(options_.bucket_cap_mb() > 0, "ringx.ddp: bucket_cap_mb must be positive, got ",
              options_.bucket_cap_mb());
  // A parameter shared by two modules appears twice; it is one gradient.
  NamedTensors unique;
  std::unordered_set<const c10::TensorImpl*> seen;
  for (const auto& named : parameters) {
    if (seen.insert(named.second.unsafeGetTensorImpl()).second) unique.push_back(named);
  }
  c10d_glue::verifyParameterShapes(processGroup_, unique);

  std::vector<at::Tensor> state;
  for (const auto& named : unique) state.push_back(named.second);
  for (const auto& named : buffers) {
    buffers_.push_back(named.second);
    state.push_back(named.second);
  }
  c10d_glue::broadcastFromRankZero(processGroup_, state);

  std::vector<at::Tensor> trainable;
  std::vector<std::string> names;
  for (const auto& [name, p] : unique) {
    if (!p.requires_grad()) continue;
    trainable.push_back(p);
    names.push_back(name);
  }
  ReducerOptions reducerOptions;
  const replay::BucketLimits limits =
      replay::limitsForCap(static_cast<int64_t>(options_.bucket_cap_mb() * 1024 * 1024));
  reducerOptions.bucketCapBytes = limits.bucketBytes;
  reducerOptions.firstBucketBytes = limits.firstBucketBytes;
  reducerOptions.autoBucketCap = options_.auto_bucket_cap();
  TORCH_CHECK(
      !options_.auto_bucket_cap() || !options_.find_unused_parameters() || options_.static_graph(),
      "ringx.ddp: bucket_cap_mb=\"auto\" rebuilds the buckets after timing a few steps, "
      "which find_unused_parameters=True turns off (as it turns off the rebuild in "
      "gradient-ready order); pass static_graph=True as well, or a fixed bucket_cap_mb");
  reducerOptions.findUnusedParameters = options_.find_unused_parameters();
  reducerOptions.gradientAsBucketView = options_.gradient_as_bucket_view();
  reducerOptions.staticGraph = options_.static_graph();
  reducer_ = std::make_unique<Reducer>(std::move(trainable), std::move(names), processGroup_,
                                       reducerOptions);
}

void Engine::beforeForward() {
  armed_ = at::GradMode::is_enabled() && requireBackwardGradSync_;
  if (armed_) reducer_->prepareForForward();
  if (options_.broadcast_buffers() && !buffers_.empty()) {
    c10d_glue::broadcastFromRankZero(processGroup_, buffers_);
  }
}

void Engine::afterForward(const std::vector<at::Tensor>& outputs) {
  if (!armed_) return;
  armed_ = false;
  reducer_->prepareForBackward(outputs);
}

namespace detail {
NamedTensors named(const torch::OrderedDict<std::string, at::Tensor>& dict) {
  NamedTensors out;
  for (const auto& item : dict) out.emplace_back(item.key(), item.value());
  return out;
}
}  // namespace detail

}  // namespace ringx::ddp
