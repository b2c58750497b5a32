// The DDP engine behind both front ends (ringx.ddp.DistributedDataParallel in
// Python, ringx::ddp::DistributedDataParallel in C++): everything DDP does that
// does not depend on how the module is called.
//
// Construction, as in PyTorch's DDP:
//   1. every rank describes its parameters (count, dtype, shape) and the
//      descriptions are all-gathered: a mismatch is an error on every rank that
//      names the first differing parameter;
//   2. rank 0's parameters and buffers are broadcast to all ranks (ringx's
//      coalesced broadcast on a ringx group, torch's on any other), so every rank
//      starts from the same weights;
//   3. a Reducer is built over the trainable parameters (reducer.h).
// Per iteration the front end calls beforeForward() and afterForward(outputs)
// around the module's forward. beforeForward re-broadcasts buffers (batch-norm
// statistics) when broadcast_buffers is on.
#pragma once

#include <torch/arg.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/c10d/model_sync.h"
#include "ddp/reducer.h"

namespace ringx::ddp {

// The constructor arguments of torch.nn.parallel.DistributedDataParallel that
// ringx.ddp implements, with the same defaults.
struct Options {
  TORCH_ARG(double, bucket_cap_mb) = 25;
  // bucket_cap_mb="auto": start at bucket_cap_mb, then choose the cap the replay of the first
  // steps after the rebuild predicts fastest (Reducer::autoChoice() says what and why).
  TORCH_ARG(bool, auto_bucket_cap) = false;
  TORCH_ARG(bool, find_unused_parameters) = false;
  TORCH_ARG(bool, gradient_as_bucket_view) = false;
  TORCH_ARG(bool, broadcast_buffers) = true;
  TORCH_ARG(bool, static_graph) = false;
};

using c10d_glue::NamedTensors;

class Engine {
 public:
  // `parameters` and `buffers` as the module names them (shared parameters may
  // appear twice: the first name is kept).
  Engine(const NamedTensors& parameters, const NamedTensors& buffers,
         c10::intrusive_ptr<::c10d::ProcessGroup> processGroup, Options options = {});

  void beforeForward();
  void afterForward(const std::vector<at::Tensor>& outputs);

  // no_sync(): while false, backward only accumulates gradients locally.
  void setRequireBackwardGradSync(bool enabled) { requireBackwardGradSync_ = enabled; }
  bool requireBackwardGradSync() const { return requireBackwardGradSync_; }

  void registerCommHook(std::unique_ptr<::c10d::CommHookInterface> hook) {
    reducer_->registerCommHook(std::move(hook));
  }
  Reducer& reducer() { return *reducer_; }
  const c10::intrusive_ptr<::c10d::ProcessGroup>& processGroup() const { return processGroup_; }
  const Options& options() const { return options_; }

 private:
  c10::intrusive_ptr<::c10d::ProcessGroup> processGroup_;
  Options options_;
  std::vector<at::Tensor> buffers_;
  std::unique_ptr<Reducer> reducer_;
  bool requireBackwardGradSync_ = true;
  bool armed_ = false;  // this forward will be followed by a synchronised backward
};

}  // namespace ringx::ddp
