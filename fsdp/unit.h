// One FSDP unit: a module's parameters as one sharded FlatParameter.
//
// At construction the unit's parameters (the module's, minus those of nested
// units) are flattened into one buffer laid out by planFlatLayout(), and this
// rank keeps its 1/S shard as an fp32 leaf tensor: the "master" shard the
// optimizer updates. The original parameter tensors stay the module's
// attributes, but their data is pointed at an empty tensor while the unit is
// sharded.
//
// Unsharding all-gathers every rank's shard (cast to the mixed-precision
// parameter dtype first, when there is one) into one unsharded buffer, whose
// storage lives for as long as the unit but is freed (resized to 0 bytes) when
// the unit reshards. Each original parameter is then pointed at its slice of
// that buffer. Because the storage object survives a free/re-allocate cycle,
// the views autograd saved during forward see the re-gathered values in
// backward: the same trick as PyTorch's FSDP.
//
// Gradients: before the unit's backward, one zeroed flat gradient buffer is
// allocated and every parameter's .grad is pointed at its slice, so autograd's
// gradient accumulators sum straight into it. A post-hook on each accumulator
// counts ready gradients; when all are ready the engine launches the reduction:
// reduce_scatter_base over the shard group (pre-divided, then post-divided, by
// the world size as PyTorch does, to keep low-precision sums in range), then an
// allreduce across replicas for HYBRID_SHARD (an allreduce alone for NO_SHARD).
// The result is added to the shard's .grad in fp32.
//
// A parameter may belong to one unit only: a second unit taking it is an error
// naming both units.
#pragma once

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/c10d/model_sync.h"
#include "backend/c10d/torch_compat.h"
#include "fsdp/flat_layout.h"
#include "fsdp/timing.h"

namespace ringx::fsdp {

enum class ShardingStrategy { kFullShard, kShardGradOp, kNoShard, kHybridShard };
enum class BackwardPrefetch { kNone, kBackwardPre, kBackwardPost };

// "FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD" (PyTorch's names).
ShardingStrategy parseShardingStrategy(const std::string& name);
// "BACKWARD_PRE", "BACKWARD_POST", "NONE".
BackwardPrefetch parseBackwardPrefetch(const std::string& name);
const char* shardingStrategyName(ShardingStrategy strategy);
const char* backwardPrefetchName(BackwardPrefetch prefetch);

// torch.distributed.fsdp.FullyShardedDataParallel's arguments that ringx.fsdp
// implements, with the same defaults.
struct Options {
  TORCH_ARG(ShardingStrategy, sharding_strategy) = ShardingStrategy::kFullShard;
  TORCH_ARG(BackwardPrefetch, backward_prefetch) = BackwardPrefetch::kBackwardPre;
  TORCH_ARG(bool, forward_prefetch) = false;
  TORCH_ARG(bool, limit_all_gathers) = true;
  // Mixed precision: parameters are gathered and computed in param_dtype,
  // gradients reduced in reduce_dtype (default: param_dtype); shards stay fp32.
  TORCH_ARG(c10::optional<at::ScalarType>, param_dtype) = c10::nullopt;
  TORCH_ARG(c10::optional<at::ScalarType>, reduce_dtype) = c10::nullopt;
  TORCH_ARG(bool, sync_module_states) = false;
};

using ProcessGroupPtr = c10::intrusive_ptr<::c10d::ProcessGroup>;
using c10d_glue::NamedTensors;

// Whom a unit talks to.
//   FULL_SHARD, SHARD_GRAD_OP: shard = world, no replicate group
//   NO_SHARD:                  no shard group (S = 1), replicate = world
//   HYBRID_SHARD:              shard = this rank's group of S ranks,
//                              replicate = the ranks holding the same shard
struct Groups {
  ProcessGroupPtr world;       // shape checks, sync_module_states
  ProcessGroupPtr shard;       // null: not sharded
  ProcessGroupPtr replicate;   // null: no replicas
  ProcessGroupPtr gatherLane;  // optional: a second group over the shard group's ranks for
                               // gathers, so that they overlap reduce-scatters
  int shardFactor() const { return shard ? shard->getSize() : 1; }
  int dataParallelSize() const { return shardFactor() * (replicate ? replicate->getSize() : 1); }
};

// Builds Groups for a strategy. HYBRID_SHARD needs `shard` and `replicate`;
// the others use `world`. `gatherLane`: see Groups.
Groups makeGroups(ShardingStrategy strategy, ProcessGroupPtr world, ProcessGroupPtr shard = {},
                  ProcessGroupPtr replicate = {}, ProcessGroupPtr gatherLane = {});

class Unit : public std::enable_shared_from_this<Unit> {
 public:
  enum class State { kSharded, kGathering, kUnsharded };

  // `name`: the unit's module path ("" for a root with no name). `params`: names
  // relative to the unit's module, no duplicates. Collective on groups.world
  // (shape check, and the broadcast of sync_module_states).
  static std::shared_ptr<Unit> create(std::string name, NamedTensors params, Groups groups,
                                      Options options);
  ~Unit();
  Unit(const Unit&) = delete;
  Unit& operator=(const Unit&) = delete;

  const std::string& name() const { return name_; }
  void setName(std::string name) { name_ = std::move(name); }
  const std::vector<std::string>& paramNames() const { return names_; }
  const std::vector<at::Tensor>& params() const { return params_; }
  const FlatLayout& layout() const { return layout_; }
  const Options& options() const { return options_; }
  const Groups& groups() const { return groups_; }
  // The fp32 master shard: the tensor the optimizer owns.
  const at::Tensor& shard() const { return shard_; }
  // Makes `parameter`, a tensor on the same storage (Python's nn.Parameter
  // around shard()), the master shard, so that .grad lands where the optimizer looks.
  void adoptShard(const at::Tensor& parameter);
  bool empty() const { return params_.empty(); }
  bool trainable() const { return trainable_; }
  State state() const { return state_; }
  bool reshardAfterForward() const;

  // Parameters. beginUnshard issues the gather (no-op unless sharded);
  // finishUnshard waits for it and points the parameters at the gathered data.
  void beginUnshard(bool backward, bool prefetched, int64_t step);
  void finishUnshard();
  void reshard();

  // Gradients.
  void setGradientsReadyCallback(std::function<void()> callback) {
    onAllGradientsReady_ = std::move(callback);
  }
  void prepareGradients();  // before this unit's backward
  bool gradientsPending() const { return readyCount_ > 0 && !reduceLaunched_; }
  void launchReduce(int64_t step);
  // Moves a launched reduction on: issues the replica allreduce once the
  // reduce-scatter is done (HYBRID_SHARD). `wait`: block until it is all done
  // and the sharded gradient is updated. Returns false while the reduce-scatter
  // is still running: the engine then moves no later unit on, so that every
  // rank issues the replica allreduces in the same (launch) order.
  bool progressReduce(bool wait);
  bool reduceInFlight() const { return reduceLaunched_ && !reduceFinished_; }
  // After a reduction (or a no_sync backward): ready for the next backward.
  void endBackward(bool keepUnshardedGradients);

  // Full fp32 parameters (collective on the shard group), in paramNames() order.
  std::vector<at::Tensor> gatherFullParameters();
  // Loads full parameters (shapes must match) into this rank's shard.
  void loadFullParameters(const std::vector<at::Tensor>& full);

  // Exactly what the unit holds now, in bytes.
  int64_t shardedBytes() const;
  int64_t unshardedBytes() const;
  int64_t gradBytes() const;

 private:
  Unit(std::string name, NamedTensors params, Groups groups, Options options);
  void installHooks();
  void onGradientReady(size_t param);
  void releaseUnshardedGradients();
  void pointParamsAtUnsharded();
  void pointParamsAtEmpty();
  void allocateUnsharded();
  void freeUnsharded();
  at::ScalarType paramDtype() const;
  at::ScalarType reduceDtype() const;

  std::string name_;
  std::vector<std::string> names_;
  std::vector<at::Tensor> params_;
  std::vector<std::vector<int64_t>> shapes_;
  Groups groups_;
  Options options_;
  FlatLayout layout_;
  int shardIndex_ = 0;
  bool trainable_ = false;
  bool viewsIntoShard_ = false;  // NO_SHARD in full precision: parameters are views of the shard

  at::Tensor shard_;               // fp32 leaf, layout_.shardNumel elements
  at::Tensor unsharded_;           // param dtype, layout_.paddedNumel; storage freed while sharded
  std::vector<at::Tensor> views_;  // per parameter, into unsharded_ (or shard_)
  at::Tensor emptyData_;           // what parameters point at while sharded
  at::Tensor gatherInput_;         // the low-precision copy of the shard, while gathering
  State state_ = State::kSharded;
  c10::intrusive_ptr<::c10d::Work> gatherWork_;
  GatherTiming gather_;

  // Gradients.
  std::vector<c10d_glue::GradAccumulatorPtr> accumulators_;
  std::vector<uintptr_t> hookKeys_;
  std::vector<char> ready_;
  size_t readyCount_ = 0;
  size_t trainableCount_ = 0;
  std::function<void()> onAllGradientsReady_;
  at::Tensor flatGrad_;      // param dtype, paddedNumel: the parameters' .grad live here
  at::Tensor reduceInput_;   // flatGrad_ or its reduce-dtype copy
  at::Tensor reduceOutput_;  // this rank's reduced shard (reduce dtype)
  c10::intrusive_ptr<::c10d::Work> reduceScatterWork_;
  c10::intrusive_ptr<::c10d::Work> replicaWork_;
  bool reduceLaunched_ = false;
  bool reduceFinished_ = false;
  double postDivide_ = 1;
  ReduceTiming reduceScatterTiming_;
  ReduceTiming replicaTiming_;
};

}  // namespace ringx::fsdp
