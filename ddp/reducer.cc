#include "ddp/reducer.h"

#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <string>
#include <unordered_set>

#include "backend/bootstrap/host_identity.h"
#include "backend/c10d/work.h"
#include "backend/transport/core_contention.h"
#include "trace/record/recorder.h"

namespace ringx::ddp {
namespace {

using torch::autograd::variable_list;

// Records when the autograd engine reaches one of the forward's outputs: the
// start of backward as far as the model is concerned.
class BackwardStartHook : public torch::autograd::FunctionPreHook {
 public:
  BackwardStartHook(std::shared_ptr<std::atomic<int64_t>> firstNs) : firstNs_(std::move(firstNs)) {}
  variable_list operator()(const variable_list& grads) override {
    int64_t expected = 0;
    firstNs_->compare_exchange_strong(expected, trace::nowNs());
    return grads;
  }

 private:
  std::shared_ptr<std::atomic<int64_t>> firstNs_;
};

// The tensor a bucket's future resolved to: a tensor, or the first of a list
// (what ProcessGroup futures hold).
at::Tensor futureTensor(const c10::IValue& value) {
  if (value.isTensor()) return value.toTensor();
  if (value.isTensorList()) return value.toTensorVector().at(0);
  if (value.isList()) return value.toList().get(0).toTensor();
  TORCH_CHECK(false,
              "ringx.ddp: a bucket's communication future must hold a tensor or a list of "
              "tensors, got ",
              value.tagKind());
}

std::string joinNames(const std::vector<std::string>& names, const std::vector<size_t>& indices) {
  std::ostringstream out;
  const size_t shown = std::min<size_t>(indices.size(), 10);
  for (size_t i = 0; i < shown; ++i) out << (i ? ", " : "") << names[indices[i]];
  if (indices.size() > shown) out << " and " << indices.size() - shown << " more";
  return out.str();
}

}  // namespace

std::string bucketingGroup(const at::Tensor& t) {
  return std::string(c10::toString(t.scalar_type())) + "@" + t.device().str();
}

Reducer::Reducer(std::vector<at::Tensor> params, std::vector<std::string> names,
                 c10::intrusive_ptr<::c10d::ProcessGroup> processGroup, ReducerOptions options)
    : params_(std::move(params)),
      names_(std::move(names)),
      processGroup_(std::move(processGroup)),
      options_(options) {
  TORCH_CHECK(processGroup_, "ringx.ddp: no process group (initialise torch.distributed first)");
  TORCH_CHECK(!params_.empty(),
              "ringx.ddp: the module has no parameters that require gradients; there is nothing "
              "to synchronise");
  TORCH_CHECK(names_.size() == params_.size(), "ringx.ddp: ", params_.size(), " parameters but ",
              names_.size(), " names");
  TORCH_CHECK(options_.bucketCapBytes > 0 && options_.firstBucketBytes > 0,
              "ringx.ddp: bucket sizes must be positive (bucket_cap_mb > 0)");
  worldSize_ = processGroup_->getSize();
  for (size_t i = 0; i < params_.size(); ++i) {
    const at::Tensor& p = params_[i];
    TORCH_CHECK(p.requires_grad(), "ringx.ddp: parameter '", names_[i],
                "' does not require gradients; pass only trainable parameters");
    TORCH_CHECK(p.layout() == at::kStrided, "ringx.ddp: parameter '", names_[i],
                "' is not a dense tensor; sparse parameters are not supported");
    TORCH_CHECK(p.is_floating_point() || p.is_complex(), "ringx.ddp: parameter '", names_[i],
                "' has dtype ", p.scalar_type(), "; gradients need a floating-point dtype");
    layouts_.push_back({p.numel() * static_cast<int64_t>(p.element_size()), bucketingGroup(p)});
    facts_.push_back({layouts_.back().bytes, layouts_.back().group});
  }
  self_ = std::make_shared<Reducer*>(this);
  buildBuckets(reverseOrder(params_.size()));
  installHooks();
}

Reducer::~Reducer() {
  self_.reset();  // hooks and callbacks that still run see the reducer is gone
  for (size_t i = 0; i < gradAccumulators_.size(); ++i) {
    gradAccumulators_[i]->del_post_hook(hookKeys_[i]);
  }
}

void Reducer::installHooks() {
  std::weak_ptr<Reducer*> weak = self_;
  for (size_t i = 0; i < params_.size(); ++i) {
    // The accumulator is the node that writes .grad; autograd holds it weakly, so
    // keep it alive for as long as the hook should fire.
    c10d_glue::GradAccumulatorPtr accumulator = torch::autograd::impl::grad_accumulator(params_[i]);
    hookKeys_.push_back(
        accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
            [weak, i](const variable_list& outputs, const variable_list&) {
              if (auto self = weak.lock()) (*self)->autogradHook(i);
              return outputs;
            })));
    gradAccumulators_.push_back(std::move(accumulator));
  }
}

void Reducer::buildBuckets(const std::vector<size_t>& order) {
  at::NoGradGuard noGrad;
  std::vector<BucketSpec> specs =
      assignBuckets(layouts_, order, {options_.firstBucketBytes, options_.bucketCapBytes});
  std::vector<Bucket> buckets(specs.size());
  locations_.assign(params_.size(), Location{});
  for (size_t b = 0; b < specs.size(); ++b) {
    Bucket& bucket = buckets[b];
    bucket.spec = std::move(specs[b]);
    int64_t elements = 0;
    for (size_t p : bucket.spec.params) elements += params_[p].numel();
    const at::Tensor& first = params_[bucket.spec.params.front()];
    bucket.flat = at::zeros({elements},
                            at::TensorOptions().dtype(first.scalar_type()).device(first.device()));
    int64_t offset = 0;
    for (size_t slot = 0; slot < bucket.spec.params.size(); ++slot) {
      const size_t p = bucket.spec.params[slot];
      const int64_t numel = params_[p].numel();
      bucket.views.push_back(bucket.flat.narrow(0, offset, numel).view(params_[p].sizes()));
      bucket.offsets.push_back(static_cast<size_t>(offset));
      bucket.lengths.push_back(static_cast<size_t>(numel));
      bucket.shapes.push_back(params_[p].sizes().vec());
      locations_[p] = {b, slot};
      offset += numel;
      // With gradient_as_bucket_view the bucket is the gradient's storage from now on.
      at::Tensor& grad = params_[p].mutable_grad();
      if (options_.gradientAsBucketView && grad.defined()) {
        bucket.views.back().copy_(grad);
        grad = bucket.views.back();
      }
    }
    bucket.pending = bucket.spec.params.size();
    bucket.timing.index = b;
    bucket.timing.bytes = bucket.spec.bytes;
    bucket.timing.params = bucket.spec.params.size();
  }
  buckets_ = std::move(buckets);
  recordBucketBytes(bucketBytesHeld());
  PlanRecord plan;
  plan.step = iteration_;
  plan.bucketCapBytes = options_.bucketCapBytes;
  plan.firstBucketBytes = options_.firstBucketBytes;
  plan.gradientAsBucketView = options_.gradientAsBucketView;
  plan.worldSize = worldSize_;
  plan.buckets = buckets_.size();
  plan.reason = autoReason_;
  recordBucketPlan(plan);
}

bool Reducer::tracksUsage() const {
  return options_.findUnusedParameters || (options_.staticGraph && !staticUnusedKnown_);
}

void Reducer::registerCommHook(std::unique_ptr<::c10d::CommHookInterface> hook) {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(hook, "ringx.ddp: register_comm_hook got no hook");
  TORCH_CHECK(!commHook_,
              "ringx.ddp: a communication hook is already registered; it can be "
              "registered only once");
  TORCH_CHECK(iteration_ == 0,
              "ringx.ddp: register the communication hook before the first "
              "forward (it changes how every bucket is reduced)");
  commHook_ = std::move(hook);
}

std::string Reducer::pendingParameterNames() const {
  std::vector<size_t> missing;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!readyThisIteration_[i]) missing.push_back(i);
  }
  return joinNames(names_, missing);
}

void Reducer::resetIterationState() {
  expectHooks_ = false;
  requireFinalize_ = false;
  nextBucket_ = 0;
  for (Bucket& b : buckets_) {
    b.pending = b.spec.params.size();
    b.future.reset();
    b.work.reset();
  }
}

void Reducer::prepareForForward() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (requireFinalize_) {
    const bool anyReady = std::find(readyThisIteration_.begin(), readyThisIteration_.end(), true) !=
                          readyThisIteration_.end();
    const std::string missing = pendingParameterNames();
    resetIterationState();
    if (!anyReady) {
      TORCH_CHECK(false,
                  "ringx.ddp: the previous forward (with gradients enabled) was not followed by "
                  "a backward through the model, so its gradients were never reduced. Run "
                  "backward on a loss computed from the outputs, or run forwards that need no "
                  "gradients under torch.no_grad() / no_sync().");
    }
    TORCH_CHECK(false,
                "ringx.ddp: the previous backward ended before every bucket was reduced: these "
                "parameters got no gradient: ",
                missing,
                ". Their modules were not used in forward, or the loss does not depend on "
                "them. If some parameters go unused, pass find_unused_parameters=True (the "
                "engine then finds them by walking the autograd graph from the outputs).");
  }
  if (!autoSamples_.empty() && autoSamples_.back().step == last_.iteration &&
      last_.finalizeEndNs > 0) {
    autoSamples_.back().optimizerNs = trace::nowNs() - last_.finalizeEndNs;
  }
  rebuildBucketsIfDue();
  chooseBucketCapIfDue();
  current_ = IterationTiming{};
  current_.iteration = iteration_++;
  current_.forwardBeginNs = trace::nowNs();
  current_.previousFinalizeEndNs = last_.finalizeEndNs;
}

void Reducer::rebuildBucketsIfDue() {
  if (!rebuildDue_) return;
  rebuildDue_ = false;
  rebuilt_ = true;
  const int64_t begin = trace::nowNs();
  // Rank 0's order, so that every rank builds the same buckets.
  const std::vector<size_t> local = completeOrder(readyOrder_, params_.size());
  at::Tensor order = at::empty({static_cast<int64_t>(local.size())}, at::kLong);
  for (size_t i = 0; i < local.size(); ++i) order.data_ptr<int64_t>()[i] = local[i];
  std::vector<at::Tensor> tensors{order};
  ::c10d::BroadcastOptions broadcastOptions;
  broadcastOptions.rootRank = 0;
  processGroup_->broadcast(tensors, broadcastOptions)->wait();
  std::vector<size_t> agreed(local.size());
  for (size_t i = 0; i < agreed.size(); ++i) {
    agreed[i] = static_cast<size_t>(order.data_ptr<int64_t>()[i]);
  }
  buildBuckets(agreed);
  recordBucketRebuild(begin, trace::nowNs(), iteration_, buckets_.size());
}

void Reducer::prepareForBackward(const std::vector<at::Tensor>& outputs) {
  std::lock_guard<std::mutex> lock(mutex_);
  current_.forwardEndNs = trace::nowNs();
  resetIterationState();
  expectHooks_ = true;
  requireFinalize_ = true;
  unusedMarked_ = false;
  readyThisIteration_.assign(params_.size(), false);
  unusedThisIteration_.clear();
  for (Bucket& b : buckets_) {
    b.timing = BucketTiming{};
    b.timing.index = &b - buckets_.data();
    b.timing.bytes = b.spec.bytes;
    b.timing.params = b.spec.params.size();
    b.doneNs->store(0);
  }
  if (tracksUsage()) {
    localUsed_ = at::zeros({static_cast<int64_t>(params_.size())}, at::kInt);
    unusedThisIteration_ = unreachableParameters(outputs);
  } else if (staticUnusedKnown_) {
    unusedThisIteration_ = staticLocallyUnused_;
  }
  backwardBeginNs_ = std::make_shared<std::atomic<int64_t>>(0);
  for (const at::Tensor& out : outputs) {
    if (out.defined() && out.grad_fn()) {
      out.grad_fn()->add_pre_hook(std::make_unique<BackwardStartHook>(backwardBeginNs_));
    }
  }
}

std::vector<size_t> Reducer::unreachableParameters(const std::vector<at::Tensor>& outputs) const {
  std::unordered_set<torch::autograd::Node*> seen;
  std::vector<torch::autograd::Node*> stack;
  for (const at::Tensor& out : outputs) {
    if (!out.defined() || !out.requires_grad()) continue;
    if (out.grad_fn()) {
      stack.push_back(out.grad_fn().get());
    } else if (auto accumulator = torch::autograd::impl::try_get_grad_accumulator(out)) {
      stack.push_back(accumulator.get());  // an output that is a parameter itself
    }
  }
  while (!stack.empty()) {
    torch::autograd::Node* node = stack.back();
    stack.pop_back();
    if (!seen.insert(node).second) continue;
    for (const torch::autograd::Edge& edge : node->next_edges()) {
      if (edge.function) stack.push_back(edge.function.get());
    }
  }
  std::vector<size_t> unused;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!seen.count(gradAccumulators_[i].get())) unused.push_back(i);
  }
  return unused;
}

void Reducer::autogradHook(size_t param) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Not armed: no_sync(), a forward without gradients, or a second backward.
  if (!expectHooks_) return;
  if (tracksUsage() && params_[param].grad().defined()) {
    localUsed_.data_ptr<int32_t>()[param] = 1;
  }
  if (!unusedMarked_) {
    // Unused parameters are marked at the first hook, not in prepareForBackward,
    // so that their buckets do not launch before backward has begun.
    unusedMarked_ = true;
    for (size_t unused : unusedThisIteration_) {
      if (unused != param && !readyThisIteration_[unused]) markParamReady(unused, false);
    }
  }
  markParamReady(param, true);
}

void Reducer::markParamReady(size_t param, bool fromHook) {
  TORCH_CHECK(!readyThisIteration_[param], "ringx.ddp: parameter '", names_[param],
              "' received its gradient twice in one backward. Either it is used in more than "
              "one reentrant backward (activation checkpointing), or it was found unused by "
              "find_unused_parameters and still got a gradient, or static_graph=True was "
              "given for a graph that changes between iterations.");
  readyThisIteration_[param] = true;
  // The first iteration's order is what the buckets are rebuilt in.
  const bool rebuildAllowed = !options_.findUnusedParameters || options_.staticGraph;
  if (fromHook && iteration_ == 1 && !rebuilt_ && rebuildAllowed) readyOrder_.push_back(param);

  const Location where = locations_[param];
  Bucket& bucket = buckets_[where.bucket];
  const int64_t now = trace::nowNs();
  if (bucket.timing.firstGradNs == 0) bucket.timing.firstGradNs = now;
  if (gradSampled(current_.iteration)) current_.grads.push_back({param, where.bucket, now});
  copyGradIntoBucket(param);
  if (--bucket.pending == 0) {
    bucket.timing.readyNs = trace::nowNs();
    launchReadyBuckets();
  }
}

void Reducer::copyGradIntoBucket(size_t param) {
  at::NoGradGuard noGrad;
  const Location where = locations_[param];
  at::Tensor& view = buckets_[where.bucket].views[where.slot];
  at::Tensor& grad = params_[param].mutable_grad();
  if (!grad.defined()) {
    view.zero_();  // an unused parameter contributes nothing
    return;
  }
  TORCH_CHECK(grad.layout() == at::kStrided, "ringx.ddp: parameter '", names_[param],
              "' got a sparse gradient; ringx.ddp reduces dense gradients only");
  TORCH_CHECK(grad.scalar_type() == view.scalar_type() && grad.sizes() == view.sizes(),
              "ringx.ddp: the gradient of '", names_[param], "' has dtype ", grad.scalar_type(),
              " and shape ", grad.sizes(), ", but the parameter has ", view.scalar_type(), " and ",
              view.sizes());
  if (!grad.is_alias_of(view)) {
    // The default path averages while copying; a comm hook gets the plain sum
    // and averages itself, as in PyTorch.
    if (commHook_) {
      view.copy_(grad);
    } else {
      // A scalar of the gradient's own dtype, flagged as a wrapped number, keeps
      // the multiply on the vectorised same-dtype path (no per-element cast).
      at::Tensor scale = at::scalar_tensor(1.0 / worldSize_, grad.options());
      scale.unsafeGetTensorImpl()->set_wrapped_number(true);
      at::mul_out(view, grad, scale);
    }
    if (options_.gradientAsBucketView) grad = view;
  } else if (!commHook_) {
    view.div_(worldSize_);
  }
}

void Reducer::launchReadyBuckets() {
  // Strictly in bucket order: every rank must issue the same collectives in the
  // same order, whatever order its gradients arrive in.
  while (nextBucket_ < buckets_.size() && buckets_[nextBucket_].pending == 0) {
    launchBucket(nextBucket_);
    ++nextBucket_;
  }
  if (nextBucket_ < buckets_.size()) return;
  if (tracksUsage()) {
    usedReduced_ = localUsed_.clone();
    std::vector<at::Tensor> tensors{usedReduced_};
    usedWork_ = processGroup_->allreduce(tensors);
  }
  std::weak_ptr<Reducer*> weak = self_;
  torch::autograd::Engine::get_default_engine().queue_callback([weak] {
    if (auto self = weak.lock()) (*self)->finalizeBackward();
  });
}

void Reducer::launchBucket(size_t index) {
  Bucket& bucket = buckets_[index];
  bucket.timing.launchNs = trace::nowNs();
  if (!commHook_) {
    std::vector<at::Tensor> tensors{bucket.flat};
    bucket.work = processGroup_->allreduce(tensors);
    bucket.future = bucket.work->getFuture();
  } else {
    std::vector<c10::IntArrayRef> sizes(bucket.shapes.begin(), bucket.shapes.end());
    std::vector<at::Tensor> bucketParams;
    for (size_t p : bucket.spec.params) bucketParams.push_back(params_[p]);
    ::c10d::GradBucket gradBucket(index, buckets_.size(), bucket.flat, bucket.offsets,
                                  bucket.lengths, sizes, bucketParams,
                                  /*sparse_grad_indices=*/std::nullopt);
    bucket.future = commHook_->runHook(gradBucket);
    TORCH_CHECK(bucket.future, "ringx.ddp: the communication hook returned no future");
  }
  std::shared_ptr<std::atomic<int64_t>> done = bucket.doneNs;
  bucket.future->addCallback([done](c10::ivalue::Future&) { done->store(trace::nowNs()); });
}

void Reducer::finalizeBackward() {
  std::lock_guard<std::mutex> lock(mutex_);
  current_.backwardEndNs = trace::nowNs();
  current_.backwardBeginNs = backwardBeginNs_ ? backwardBeginNs_->load() : 0;
  const bool hadUsage = tracksUsage();
  try {
    std::vector<bool> used(params_.size(), true);
    if (hadUsage) {
      usedWork_->wait();
      const int32_t* counts = usedReduced_.data_ptr<int32_t>();
      for (size_t i = 0; i < used.size(); ++i) used[i] = counts[i] > 0;
      if (options_.staticGraph) {
        // The graph is promised not to change: what this rank did not use, and
        // what no rank used, stay as the first iteration found them.
        staticLocallyUnused_ = unusedThisIteration_;
        staticGloballyUsed_ = used;
        staticUnusedKnown_ = true;
      }
    } else if (staticUnusedKnown_) {
      used = staticGloballyUsed_;
    }
    globallyUsed_ = used;
    int64_t lastDone = current_.backwardEndNs;
    for (Bucket& bucket : buckets_) {
      bucket.future->wait();
      if (bucket.future->hasError()) {
        std::string what = bucket.future->tryRetrieveErrorMessage();
        TORCH_CHECK(false, "ringx.ddp: reducing bucket ", bucket.timing.index, " (",
                    bucket.spec.bytes, " bytes, ", bucket.spec.params.size(),
                    " parameters) failed: ", what);
      }
      BucketTiming& t = bucket.timing;
      // wait() returns as soon as the future is marked completed, before its callbacks run
      // (c10::ivalue::Future wakes its waiters first), so the callback that stamps doneNs may
      // not have run yet: then the future completed no later than now. Taking launchNs instead
      // made a bucket that finished long after backward's compute look not exposed at all.
      const int64_t stamped = bucket.doneNs->load();
      t.doneNs = stamped >= t.launchNs ? stamped : trace::nowNs();
      if (auto* ringxWork = dynamic_cast<c10d_glue::RingxWork*>(bucket.work.get())) {
        t.wireStartNs = ringxWork->startedNs();
        t.wireEndNs = ringxWork->finishedNs();
        t.seq = ringxWork->seq();
      } else {
        t.wireStartNs = t.launchNs;
        t.wireEndNs = t.doneNs;
      }
      t.exposedNs = std::max<int64_t>(0, t.doneNs - current_.backwardEndNs);
      lastDone = std::max(lastDone, t.doneNs);
      t.copyBackBeginNs = trace::nowNs();
      finalizeBucket(bucket, used);
      t.copyBackEndNs = trace::nowNs();
    }
    current_.exposedNs = lastDone - current_.backwardEndNs;
  } catch (...) {
    resetIterationState();
    throw;
  }
  const bool rebuildAllowed = !options_.findUnusedParameters || options_.staticGraph;
  if (current_.iteration == 0 && !rebuilt_ && rebuildAllowed) rebuildDue_ = true;
  resetIterationState();
  current_.finalizeEndNs = trace::nowNs();
  for (const Bucket& bucket : buckets_) current_.buckets.push_back(bucket.timing);
  last_ = current_;
  recordIteration(last_, facts_);
  keepAutoSample();
}

void Reducer::keepAutoSample() {
  if (!options_.autoBucketCap || autoChosen_ || !rebuilt_ || !gradSampled(last_.iteration)) return;
  replay::DdpStepRecord s;
  s.step = last_.iteration;
  s.forwardBeginNs = last_.forwardBeginNs;
  s.forwardEndNs = last_.forwardEndNs;
  s.backwardBeginNs = last_.backwardBeginNs ? last_.backwardBeginNs : last_.forwardEndNs;
  s.computeEndNs = last_.backwardEndNs;
  s.finalizeEndNs = last_.finalizeEndNs;
  for (const GradReady& g : last_.grads) s.grads.emplace_back(g.param, g.ns);
  for (const BucketTiming& b : last_.buckets) {
    s.buckets.push_back(
        {static_cast<int64_t>(b.index), b.bytes,
         b.wireEndNs >= b.wireStartNs && b.wireStartNs > 0 ? b.wireEndNs - b.wireStartNs : -1,
         b.copyBackEndNs >= b.copyBackBeginNs && b.copyBackBeginNs > 0
             ? b.copyBackEndNs - b.copyBackBeginNs
             : -1,
         b.launchNs, b.wireEndNs});
  }
  autoSamples_.push_back(std::move(s));
}

void Reducer::chooseBucketCapIfDue() {
  if (!options_.autoBucketCap || autoChosen_ || autoSamples_.size() < kAutoSteps) return;
  autoChosen_ = true;
  const int64_t begin = trace::nowNs();
  // Each bucket's wire time as the last rank to arrive saw it (the others waited for it):
  // the shortest over the ranks, as the what-if analysis takes it from a trace.
  const size_t nb = buckets_.size();
  at::Tensor wires = at::full({static_cast<int64_t>(autoSamples_.size() * nb)},
                              std::numeric_limits<double>::infinity(), at::kDouble);
  double* w = wires.data_ptr<double>();
  for (size_t i = 0; i < autoSamples_.size(); ++i) {
    for (const replay::DdpStepRecord::Bucket& b : autoSamples_[i].buckets) {
      if (b.wireNs >= 0 && static_cast<size_t>(b.index) < nb) w[i * nb + b.index] = b.wireNs;
    }
  }
  std::vector<at::Tensor> wireTensors{wires};
  ::c10d::AllreduceOptions minimum;
  minimum.reduceOp = ::c10d::ReduceOp::MIN;
  processGroup_->allreduce(wireTensors, minimum)->wait();
  // The hosts' cores, which the replay shares out among the ranks' threads (core_shares.h):
  // this rank's, torch's compute threads, and how many hosts the ranks are on (each rank's
  // host identity hashed into its slot, summed across ranks).
  at::Tensor hostIds = at::zeros({worldSize_}, at::kLong);
  hostIds.data_ptr<int64_t>()[processGroup_->getRank()] =
      static_cast<int64_t>(std::hash<std::string>{}(bootstrap::hostIdentity()) &
                           0x3fffffffffffffff) |
      1;
  std::vector<at::Tensor> hostTensors{hostIds};
  processGroup_->allreduce(hostTensors)->wait();
  replay::HostCores host;
  host.cores = transport::usableCores();
  host.threadsPerRank = std::max<int64_t>(1, at::get_num_threads());
  const int64_t* ids = hostIds.data_ptr<int64_t>();
  host.hosts = static_cast<int64_t>(std::unordered_set<int64_t>(ids, ids + worldSize_).size());

  // Rank 0 replays its own steps with those wire times and chooses; every rank builds its pick.
  at::Tensor choice = at::zeros({2}, at::kLong);
  std::string reason;
  if (processGroup_->getRank() == 0) {
    const int64_t defaultCap = options_.bucketCapBytes;
    int64_t cap = defaultCap;
    try {
      replay::DdpRecording rec;
      rec.params = layouts_;
      rec.limits = {options_.firstBucketBytes, options_.bucketCapBytes};
      rec.gradientAsBucketView = options_.gradientAsBucketView;
      rec.worldSize = worldSize_;
      rec.host = host;
      rec.ranks.push_back({0, autoSamples_});
      for (size_t i = 0; i < autoSamples_.size(); ++i) {
        for (replay::DdpStepRecord::Bucket& b : rec.ranks[0].steps[i].buckets) {
          const double shortest = static_cast<size_t>(b.index) < nb ? w[i * nb + b.index] : -1;
          b.wireNs = std::isfinite(shortest) ? static_cast<int64_t>(shortest) : -1;
        }
      }
      const replay::DdpFit fit = replay::fitDdpModel(rec);
      std::vector<int64_t> candidates;
      for (int64_t kib : {256, 512, 1024, 2048, 4096, 8192, 16384, 25600, 51200, 102400}) {
        candidates.push_back(kib << 10);
      }
      // 3%: what the replay's own error on a recorded step leaves it unable to tell apart.
      const replay::CapChoice c = replay::chooseBucketCap(fit.model, candidates, defaultCap, 0.03);
      cap = c.capBytes;
      reason = c.reason + " (the replay of steps " + std::to_string(autoSamples_.front().step) +
               "-" + std::to_string(autoSamples_.back().step) + " on rank 0)";
    } catch (const std::exception& e) {
      reason = "bucket_cap_mb kept: the replay could not be fitted (" + std::string(e.what()) + ")";
    }
    choice.data_ptr<int64_t>()[0] = cap;
    choice.data_ptr<int64_t>()[1] = static_cast<int64_t>(reason.size());
  }
  ::c10d::BroadcastOptions fromZero;
  fromZero.rootRank = 0;
  std::vector<at::Tensor> choiceTensors{choice};
  processGroup_->broadcast(choiceTensors, fromZero)->wait();
  at::Tensor text = at::zeros({choice.data_ptr<int64_t>()[1]}, at::kByte);
  std::copy(reason.begin(), reason.end(), text.data_ptr<uint8_t>());
  std::vector<at::Tensor> textTensors{text};
  if (text.numel() > 0) processGroup_->broadcast(textTensors, fromZero)->wait();
  autoReason_.assign(reinterpret_cast<const char*>(text.data_ptr<uint8_t>()), text.numel());
  autoSamples_.clear();

  // Rebuild in the order the buckets are in now (every rank's is the same).
  const replay::BucketLimits limits = replay::limitsForCap(choice.data_ptr<int64_t>()[0]);
  options_.bucketCapBytes = limits.bucketBytes;
  options_.firstBucketBytes = limits.firstBucketBytes;
  std::vector<size_t> order;
  for (const Bucket& b : buckets_)
    order.insert(order.end(), b.spec.params.begin(), b.spec.params.end());
  buildBuckets(order);
  recordBucketRebuild(begin, trace::nowNs(), iteration_, buckets_.size());
  if (processGroup_->getRank() == 0) {
    std::fprintf(stderr, "ringx.ddp: bucket_cap_mb=\"auto\": %s\n", autoReason_.c_str());
  }
}

std::string Reducer::autoChoice() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return autoReason_;
}

void Reducer::finalizeBucket(Bucket& bucket, const std::vector<bool>& globallyUsed) {
  at::NoGradGuard noGrad;
  at::Tensor result = commHook_ ? commHook_->parseHookResult(bucket.future->value())
                                : futureTensor(bucket.future->value());
  if (!result.is_same(bucket.flat)) {
    TORCH_CHECK(result.numel() == bucket.flat.numel(),
                "ringx.ddp: the communication hook's "
                "result for bucket ",
                bucket.timing.index, " has ", result.numel(), " elements, the bucket has ",
                bucket.flat.numel());
    bucket.flat.copy_(result.view(-1));
  }
  for (size_t slot = 0; slot < bucket.spec.params.size(); ++slot) {
    const size_t p = bucket.spec.params[slot];
    if (!globallyUsed[p]) continue;  // no rank produced a gradient: leave .grad alone
    at::Tensor& grad = params_[p].mutable_grad();
    const at::Tensor& view = bucket.views[slot];
    if (options_.gradientAsBucketView) {
      if (!grad.defined() || !grad.is_alias_of(view)) grad = view;
    } else if (grad.defined()) {
      grad.copy_(view);
    } else {
      grad = view.clone();  // unused here, used elsewhere: it gets the average
    }
  }
}

std::vector<std::vector<size_t>> Reducer::bucketAssignment() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::vector<size_t>> out;
  for (const Bucket& b : buckets_) out.push_back(b.spec.params);
  return out;
}

int64_t Reducer::bucketBytesHeld() const {
  int64_t bytes = 0;
  for (const Bucket& b : buckets_) bytes += b.flat.numel() * b.flat.element_size();
  return bytes;
}

IterationTiming Reducer::lastIteration() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_;
}

std::vector<size_t> Reducer::globallyUnusedParameters() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<size_t> unused;
  for (size_t i = 0; i < globallyUsed_.size(); ++i) {
    if (!globallyUsed_[i]) unused.push_back(i);
  }
  return unused;
}

}  // namespace ringx::ddp
