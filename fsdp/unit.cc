#include "fsdp/unit.h"

#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <mutex>
#include <sstream>
#include <unordered_map>

#include "backend/c10d/model_sync.h"
#include "backend/c10d/work.h"
#include "trace/record/recorder.h"

namespace ringx::fsdp {
namespace {

// Which unit owns each parameter, process-wide: a parameter shared by two units
// would be flattened twice and trained as two copies.
struct Ownership {
  std::mutex mutex;
  std::unordered_map<const c10::TensorImpl*, std::string> owner;  // "unit:param"
};
Ownership& ownership() {
  static Ownership o;
  return o;
}

void wireTimes(const c10::intrusive_ptr<::c10d::Work>& work, int64_t* start, int64_t* end) {
  if (auto* ringxWork = dynamic_cast<c10d_glue::RingxWork*>(work.get())) {
    *start = ringxWork->startedNs();
    *end = ringxWork->finishedNs();
  }
}

// PyTorch's split of 1/world into a division before the reduction and one
// after, so that sums in low precision neither overflow nor underflow.
double preDivideFactor(int worldSize) {
  double factor = 1;
  while (worldSize % static_cast<int>(factor) == 0 && worldSize / factor > factor) factor *= 2;
  return factor;
}

}  // namespace

ShardingStrategy parseShardingStrategy(const std::string& name) {
  if (name == "FULL_SHARD") return ShardingStrategy::kFullShard;
  if (name == "SHARD_GRAD_OP") return ShardingStrategy::kShardGradOp;
  if (name == "NO_SHARD") return ShardingStrategy::kNoShard;
  if (name == "HYBRID_SHARD") return ShardingStrategy::kHybridShard;
  TORCH_CHECK(false, "ringx.fsdp: unknown sharding_strategy '", name,
              "'; use FULL_SHARD, SHARD_GRAD_OP, NO_SHARD or HYBRID_SHARD");
}

BackwardPrefetch parseBackwardPrefetch(const std::string& name) {
  if (name == "BACKWARD_PRE") return BackwardPrefetch::kBackwardPre;
  if (name == "BACKWARD_POST") return BackwardPrefetch::kBackwardPost;
  if (name == "NONE" || name.empty()) return BackwardPrefetch::kNone;
  TORCH_CHECK(false, "ringx.fsdp: unknown backward_prefetch '", name,
              "'; use BACKWARD_PRE, BACKWARD_POST or None");
}

const char* backwardPrefetchName(BackwardPrefetch prefetch) {
  switch (prefetch) {
    case BackwardPrefetch::kNone:
      return "NONE";
    case BackwardPrefetch::kBackwardPre:
      return "BACKWARD_PRE";
    case BackwardPrefetch::kBackwardPost:
      return "BACKWARD_POST";
  }
  return "?";
}

const char* shardingStrategyName(ShardingStrategy strategy) {
  switch (strategy) {
    case ShardingStrategy::kFullShard:
      return "FULL_SHARD";
    case ShardingStrategy::kShardGradOp:
      return "SHARD_GRAD_OP";
    case ShardingStrategy::kNoShard:
      return "NO_SHARD";
    case ShardingStrategy::kHybridShard:
      return "HYBRID_SHARD";
  }
  return "?";
}

Groups makeGroups(ShardingStrategy strategy, ProcessGroupPtr world, ProcessGroupPtr shard,
                  ProcessGroupPtr replicate, ProcessGroupPtr gatherLane) {
  TORCH_CHECK(world, "ringx.fsdp: no process group (initialise torch.distributed first)");
  Groups groups;
  groups.world = world;
  switch (strategy) {
    case ShardingStrategy::kFullShard:
    case ShardingStrategy::kShardGradOp:
      groups.shard = world;
      break;
    case ShardingStrategy::kNoShard:
      groups.replicate = world;
      break;
    case ShardingStrategy::kHybridShard:
      TORCH_CHECK(shard && replicate,
                  "ringx.fsdp: HYBRID_SHARD needs a shard group and a replicate group");
      TORCH_CHECK(shard->getSize() * replicate->getSize() == world->getSize(),
                  "ringx.fsdp: HYBRID_SHARD groups of ", shard->getSize(), " x ",
                  replicate->getSize(), " ranks do not cover the world of ", world->getSize());
      groups.shard = shard;
      groups.replicate = replicate;
      break;
  }
  if (groups.shard && groups.shard->getSize() == 1) groups.shard.reset();
  if (groups.replicate && groups.replicate->getSize() == 1) groups.replicate.reset();
  if (groups.shard && gatherLane) {
    TORCH_CHECK(gatherLane->getSize() == groups.shard->getSize() &&
                    gatherLane->getRank() == groups.shard->getRank(),
                "ringx.fsdp: the gather lane must be a group over the same ranks as the shard "
                "group (",
                groups.shard->getSize(), " ranks), with the same rank order");
    groups.gatherLane = std::move(gatherLane);
  }
  return groups;
}

std::shared_ptr<Unit> Unit::create(std::string name, NamedTensors params, Groups groups,
                                   Options options) {
  std::shared_ptr<Unit> unit(
      new Unit(std::move(name), std::move(params), std::move(groups), options));
  unit->installHooks();
  return unit;
}

Unit::Unit(std::string name, NamedTensors params, Groups groups, Options options)
    : name_(std::move(name)), groups_(std::move(groups)), options_(options) {
  TORCH_CHECK(groups_.world, "ringx.fsdp: no process group (initialise torch.distributed first)");
  const std::string label = name_.empty() ? "(root)" : name_;
  {
    std::lock_guard<std::mutex> lock(ownership().mutex);
    for (const auto& [paramName, p] : params) {
      auto it = ownership().owner.find(p.unsafeGetTensorImpl());
      TORCH_CHECK(it == ownership().owner.end(), "ringx.fsdp: parameter '", paramName,
                  "' of unit '", label, "' is already managed by ", it->second,
                  "; a parameter shared between FSDP units is not supported: wrap the modules "
                  "that share it in one unit");
    }
  }
  size_t trainable = 0;
  for (const auto& [paramName, p] : params) {
    TORCH_CHECK(p.is_floating_point(), "ringx.fsdp: parameter '", paramName, "' of unit '", label,
                "' is ", p.scalar_type(), "; only floating-point parameters can be sharded");
    TORCH_CHECK(params.empty() || p.device() == params.front().second.device(),
                "ringx.fsdp: unit '", label, "' mixes devices (", params.front().second.device(),
                " and ", p.device(), " for '", paramName, "'); wrap them in separate units");
    TORCH_CHECK(p.scalar_type() == params.front().second.scalar_type(), "ringx.fsdp: unit '", label,
                "' mixes dtypes (", params.front().second.scalar_type(), " and ", p.scalar_type(),
                " for '", paramName, "'); wrap them in separate units");
    trainable += p.requires_grad() ? 1 : 0;
  }
  TORCH_CHECK(trainable == 0 || trainable == params.size(), "ringx.fsdp: unit '", label,
              "' mixes frozen and trainable parameters; wrap the frozen ones in their own unit");
  trainable_ = trainable > 0;
  trainableCount_ = trainable;

  // Every rank must be sharding the same thing, or the gathers would mix
  // unrelated bytes (and could hang on uneven sizes).
  c10d_glue::verifyParameterShapes(groups_.world, params, "ringx.fsdp");
  if (options_.sync_module_states()) {
    std::vector<at::Tensor> tensors;
    for (const auto& named : params) tensors.push_back(named.second);
    c10d_glue::broadcastFromRankZero(groups_.world, tensors);
  }

  at::NoGradGuard noGrad;
  std::vector<int64_t> numels;
  for (auto& [paramName, p] : params) {
    names_.push_back(paramName);
    params_.push_back(p);
    shapes_.push_back(p.sizes().vec());
    numels.push_back(p.numel());
  }
  layout_ = planFlatLayout(numels, groups_.shardFactor());
  shardIndex_ = groups_.shard ? groups_.shard->getRank() : 0;

  const at::TensorOptions device =
      params_.empty() ? at::TensorOptions().dtype(at::kFloat) : params_.front().options();
  // The master shard: this rank's chunk of the padded flat parameters, in fp32.
  at::Tensor full = at::zeros({layout_.paddedNumel}, device.dtype(at::kFloat));
  for (size_t i = 0; i < params_.size(); ++i) {
    full.narrow(0, layout_.offsets[i], layout_.numels[i]).copy_(params_[i].reshape(-1));
  }
  shard_ = full.narrow(0, layout_.shardBegin(shardIndex_), layout_.shardNumel).clone();
  full = at::Tensor();
  shard_.set_requires_grad(trainable_);

  viewsIntoShard_ = !groups_.shard && !options_.param_dtype().has_value();
  const at::Tensor base = viewsIntoShard_
                              ? shard_.detach()
                              : at::empty({layout_.paddedNumel}, device.dtype(paramDtype()));
  if (!viewsIntoShard_) unsharded_ = base;
  for (size_t i = 0; i < params_.size(); ++i) {
    views_.push_back(base.narrow(0, layout_.offsets[i], layout_.numels[i]).view(shapes_[i]));
  }
  emptyData_ = at::empty({0}, device.dtype(paramDtype()));

  // Point the parameters at their full-size views before their gradient
  // accumulators are created (installHooks): an accumulator remembers the
  // parameter's shape and dtype when it is made.
  pointParamsAtUnsharded();
  {
    std::lock_guard<std::mutex> lock(ownership().mutex);
    for (size_t i = 0; i < params_.size(); ++i) {
      ownership().owner[params_[i].unsafeGetTensorImpl()] =
          "unit '" + label + "' (as '" + names_[i] + "')";
    }
  }
}

void Unit::installHooks() {
  std::weak_ptr<Unit> weak = weak_from_this();
  ready_.assign(params_.size(), 0);
  if (!trainable_) {
    reshard();
    return;
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    c10d_glue::GradAccumulatorPtr accumulator = torch::autograd::impl::grad_accumulator(params_[i]);
    hookKeys_.push_back(
        accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
            [weak, i](const torch::autograd::variable_list& outputs,
                      const torch::autograd::variable_list&) {
              if (auto self = weak.lock()) self->onGradientReady(i);
              return outputs;
            })));
    accumulators_.push_back(std::move(accumulator));
  }
  reshard();
}

Unit::~Unit() {
  for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(hookKeys_[i]);
  std::lock_guard<std::mutex> lock(ownership().mutex);
  for (const at::Tensor& p : params_) ownership().owner.erase(p.unsafeGetTensorImpl());
}

void Unit::adoptShard(const at::Tensor& parameter) {
  TORCH_CHECK(parameter.numel() == shard_.numel() && parameter.data_ptr() == shard_.data_ptr(),
              "ringx.fsdp: adoptShard needs a tensor on the shard's own storage");
  shard_ = parameter;
}

at::ScalarType Unit::paramDtype() const {
  return options_.param_dtype().value_or(params_.empty() ? at::kFloat
                                                         : params_.front().scalar_type());
}

at::ScalarType Unit::reduceDtype() const { return options_.reduce_dtype().value_or(paramDtype()); }

bool Unit::reshardAfterForward() const {
  return options_.sharding_strategy() == ShardingStrategy::kFullShard ||
         options_.sharding_strategy() == ShardingStrategy::kHybridShard;
}

void Unit::pointParamsAtUnsharded() {
  for (size_t i = 0; i < params_.size(); ++i) params_[i].set_data(views_[i]);
}

void Unit::pointParamsAtEmpty() {
  for (at::Tensor& p : params_) p.set_data(emptyData_);
}

void Unit::allocateUnsharded() {
  c10::StorageImpl* storage = unsharded_.storage().unsafeGetStorageImpl();
  const size_t bytes = static_cast<size_t>(layout_.paddedNumel) * unsharded_.element_size();
  if (storage->nbytes() == bytes) return;
  storage->set_data_ptr_noswap(storage->allocator()->allocate(bytes));
  storage->set_nbytes(bytes);
}

void Unit::freeUnsharded() {
  // Resize the storage to nothing but keep the storage object: the views saved
  // by autograd refer to it and see the next gather's data.
  c10::StorageImpl* storage = unsharded_.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(at::DataPtr(nullptr, unsharded_.device()));
  storage->set_nbytes(0);
}

void Unit::beginUnshard(bool backward, bool prefetched, int64_t step) {
  if (state_ != State::kSharded || empty()) return;
  at::NoGradGuard noGrad;
  gather_ = GatherTiming{};
  gather_.backward = backward;
  gather_.prefetched = prefetched;
  gather_.step = step;
  gather_.bytes = layout_.paddedNumel * unsharded_.element_size();
  gather_.issueNs = trace::nowNs();
  allocateUnsharded();
  at::Tensor input = shard_.detach();
  if (input.scalar_type() != unsharded_.scalar_type()) input = input.to(unsharded_.scalar_type());
  gatherInput_ = input;  // alive until the gather is done
  if (groups_.shard) {
    // On their own lane (a second group over the same ranks) when there is one,
    // so that a gather never queues behind a reduce-scatter.
    gatherWork_ = (groups_.gatherLane ? groups_.gatherLane : groups_.shard)
                      ->_allgather_base(unsharded_, input);
  } else {
    unsharded_.copy_(input);  // NO_SHARD in mixed precision: a low-precision copy
  }
  state_ = State::kGathering;
}

void Unit::finishUnshard() {
  if (empty()) return;
  if (state_ == State::kUnsharded) return;
  gather_.waitBeginNs = trace::nowNs();
  if (gatherWork_) {
    gatherWork_->wait();
    wireTimes(gatherWork_, &gather_.wireStartNs, &gather_.wireEndNs);
    gatherWork_.reset();
  }
  gatherInput_ = at::Tensor();
  pointParamsAtUnsharded();
  gather_.readyNs = trace::nowNs();
  state_ = State::kUnsharded;
  recordGather(name_, gather_);
}

void Unit::reshard() {
  if (viewsIntoShard_) {
    state_ = State::kUnsharded;  // the parameters are the shard: nothing to free
    return;
  }
  if (state_ == State::kGathering) {
    gatherWork_->wait();  // never free memory a collective is still writing into
    gatherWork_.reset();
    gatherInput_ = at::Tensor();
  }
  pointParamsAtEmpty();
  freeUnsharded();
  state_ = State::kSharded;
}

void Unit::prepareGradients() {
  readyCount_ = 0;
  std::fill(ready_.begin(), ready_.end(), 0);
  reduceLaunched_ = false;
  reduceFinished_ = false;
  if (!trainable_) return;
  at::NoGradGuard noGrad;
  if (!flatGrad_.defined()) {
    flatGrad_ = at::zeros({layout_.paddedNumel}, shard_.options().dtype(paramDtype()));
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    at::Tensor slot = flatGrad_.narrow(0, layout_.offsets[i], layout_.numels[i]).view(shapes_[i]);
    at::Tensor& grad = params_[i].mutable_grad();
    if (grad.defined() && !grad.is_same(slot)) {
      if (grad.data_ptr() != slot.data_ptr()) slot.add_(grad.to(slot.scalar_type()));
    }
    grad = slot;
  }
}

void Unit::onGradientReady(size_t param) {
  if (ready_[param]) return;
  at::Tensor& grad = params_[param].mutable_grad();
  if (!flatGrad_.defined()) prepareGradients();  // the unit's backward ran without its pre-hook
  at::Tensor slot =
      flatGrad_.narrow(0, layout_.offsets[param], layout_.numels[param]).view(shapes_[param]);
  if (grad.defined() && grad.data_ptr() != slot.data_ptr()) {
    // Autograd replaced the view (e.g. a sparse or differently laid-out gradient).
    at::NoGradGuard noGrad;
    slot.copy_(grad.to(slot.scalar_type()));
    grad = slot;
  }
  ready_[param] = 1;
  if (++readyCount_ == trainableCount_ && onAllGradientsReady_) onAllGradientsReady_();
}

void Unit::launchReduce(int64_t step) {
  if (reduceLaunched_ || !trainable_ || empty()) return;
  at::NoGradGuard noGrad;
  reduceLaunched_ = true;
  reduceFinished_ = false;
  const int worldSize = groups_.dataParallelSize();
  const double preDivide = preDivideFactor(worldSize);
  postDivide_ = worldSize / preDivide;
  reduceInput_ = flatGrad_.scalar_type() == reduceDtype() ? flatGrad_ : flatGrad_.to(reduceDtype());
  if (preDivide != 1) reduceInput_.div_(preDivide);
  reduceScatterTiming_ = ReduceTiming{};
  replicaTiming_ = ReduceTiming{};
  replicaTiming_.op = "allreduce";
  reduceScatterTiming_.step = replicaTiming_.step = step;
  if (groups_.shard) {
    reduceOutput_ = at::empty({layout_.shardNumel}, reduceInput_.options());
    reduceScatterTiming_.bytes = reduceInput_.numel() * reduceInput_.element_size();
    reduceScatterTiming_.launchNs = trace::nowNs();
    reduceScatterWork_ = groups_.shard->_reduce_scatter_base(reduceOutput_, reduceInput_);
  } else {
    reduceOutput_ = reduceInput_;  // NO_SHARD: the replica allreduce is the reduction
  }
}

bool Unit::progressReduce(bool wait) {
  if (!reduceLaunched_ || reduceFinished_) return true;
  at::NoGradGuard noGrad;
  if (reduceScatterWork_) {
    if (!wait && !reduceScatterWork_->isCompleted()) return false;
    reduceScatterWork_->wait();
    wireTimes(reduceScatterWork_, &reduceScatterTiming_.wireStartNs,
              &reduceScatterTiming_.wireEndNs);
    reduceScatterTiming_.doneNs = trace::nowNs();
    reduceScatterWork_.reset();
    // The reduce-scatter consumed the unsharded gradient: free it now, not at the
    // end of backward, or every unit's full gradient would be alive at once.
    releaseUnshardedGradients();
    recordReduce(name_, reduceScatterTiming_);
    if (groups_.replicate) {
      std::vector<at::Tensor> tensors{reduceOutput_};
      replicaTiming_.bytes = reduceOutput_.numel() * reduceOutput_.element_size();
      replicaTiming_.launchNs = trace::nowNs();
      replicaWork_ = groups_.replicate->allreduce(tensors);
    }
  } else if (groups_.replicate && !replicaWork_ && replicaTiming_.launchNs == 0) {
    std::vector<at::Tensor> tensors{reduceOutput_};
    replicaTiming_.bytes = reduceOutput_.numel() * reduceOutput_.element_size();
    replicaTiming_.launchNs = trace::nowNs();
    replicaWork_ = groups_.replicate->allreduce(tensors);
  }
  if (replicaWork_) {
    if (!wait && !replicaWork_->isCompleted()) return true;
    replicaWork_->wait();
    wireTimes(replicaWork_, &replicaTiming_.wireStartNs, &replicaTiming_.wireEndNs);
    replicaTiming_.doneNs = trace::nowNs();
    replicaWork_.reset();
    recordReduce(name_, replicaTiming_);
  }
  // Done: the reduced shard, averaged, joins the master shard's gradient in fp32.
  // reduceOutput_ holds exactly this shard and is no view: it can become .grad
  // as it is (optimizers detach_() gradients in place, which views refuse).
  at::Tensor reduced = reduceOutput_;
  if (postDivide_ != 1) reduced = reduced.div(postDivide_);
  reduced = reduced.to(at::kFloat);
  at::Tensor& shardGrad = shard_.mutable_grad();
  if (shardGrad.defined()) {
    shardGrad.add_(reduced);
  } else {
    shardGrad = reduced;
  }
  reduceInput_ = at::Tensor();
  reduceOutput_ = at::Tensor();
  reduceFinished_ = true;
  return true;
}

void Unit::releaseUnshardedGradients() {
  flatGrad_ = at::Tensor();
  for (at::Tensor& p : params_) p.mutable_grad().reset();  // their .grad were views of it
  if (reduceInput_.defined() && !reduceInput_.is_same(reduceOutput_)) reduceInput_ = at::Tensor();
}

void Unit::endBackward(bool keepUnshardedGradients) {
  readyCount_ = 0;
  std::fill(ready_.begin(), ready_.end(), 0);
  reduceLaunched_ = false;
  reduceFinished_ = false;
  if (keepUnshardedGradients) return;  // no_sync: .grad keeps accumulating into flatGrad_
  releaseUnshardedGradients();
}

std::vector<at::Tensor> Unit::gatherFullParameters() {
  at::NoGradGuard noGrad;
  at::Tensor full;
  if (groups_.shard) {
    full = at::empty({layout_.paddedNumel}, shard_.options());
    at::Tensor shard = shard_.detach();
    groups_.shard->_allgather_base(full, shard)->wait();
  } else {
    full = shard_.detach();
  }
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < params_.size(); ++i) {
    out.push_back(full.narrow(0, layout_.offsets[i], layout_.numels[i]).view(shapes_[i]).clone());
  }
  return out;
}

void Unit::loadFullParameters(const std::vector<at::Tensor>& full) {
  TORCH_CHECK(full.size() == params_.size(), "ringx.fsdp: unit '", name_, "' has ", params_.size(),
              " parameters but ", full.size(), " were given");
  at::NoGradGuard noGrad;
  const int64_t begin = layout_.shardBegin(shardIndex_);
  const int64_t end = layout_.shardEnd(shardIndex_);
  for (size_t i = 0; i < params_.size(); ++i) {
    TORCH_CHECK(full[i].sizes().vec() == shapes_[i], "ringx.fsdp: '", names_[i], "' of unit '",
                name_, "' has shape ", c10::IntArrayRef(shapes_[i]), " but the state dict has ",
                full[i].sizes());
    // The part of parameter i that falls inside this rank's shard.
    const int64_t from = std::max(begin, layout_.offsets[i]);
    const int64_t to = std::min(end, layout_.offsets[i] + layout_.numels[i]);
    if (from >= to) continue;
    shard_.detach()
        .narrow(0, from - begin, to - from)
        .copy_(full[i].reshape(-1).narrow(0, from - layout_.offsets[i], to - from));
  }
  if (state_ == State::kUnsharded && !viewsIntoShard_) reshard();
}

int64_t Unit::shardedBytes() const { return shard_.numel() * shard_.element_size(); }

int64_t Unit::unshardedBytes() const {
  int64_t bytes = 0;
  if (unsharded_.defined()) bytes += static_cast<int64_t>(unsharded_.storage().nbytes());
  if (gatherInput_.defined() && gatherInput_.scalar_type() != shard_.scalar_type()) {
    bytes += gatherInput_.numel() * gatherInput_.element_size();
  }
  return bytes;
}

int64_t Unit::gradBytes() const {
  auto bytes = [](const at::Tensor& t) { return t.defined() ? t.numel() * t.element_size() : 0; };
  int64_t total = bytes(flatGrad_) + bytes(shard_.grad());
  if (reduceInput_.defined() && !reduceInput_.is_same(flatGrad_)) total += bytes(reduceInput_);
  if (reduceOutput_.defined() && !reduceOutput_.is_same(reduceInput_))
    total += bytes(reduceOutput_);
  return total;
}

}  // namespace ringx::fsdp
