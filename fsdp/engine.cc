#include "fsdp/engine.h"

#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/engine.h>

#include <algorithm>

#include "trace/record/recorder.h"

namespace ringx::fsdp {

Engine::Engine(std::vector<std::shared_ptr<Unit>> units)
    : units_(std::move(units)),
      options_(units_.empty() ? Options() : units_.front()->options()),
      self_(std::make_shared<Engine*>(this)) {
  TORCH_CHECK(!units_.empty(), "ringx.fsdp: an engine needs at least its root unit");
  preBackwardDone_.assign(units_.size(), 0);
  postBackwardDone_.assign(units_.size(), 0);
  computeBeginNs_.assign(units_.size(), 0);
  std::weak_ptr<Engine*> weak = self_;
  for (size_t u = 0; u < units_.size(); ++u) {
    units_[u]->setGradientsReadyCallback([weak, u] {
      if (auto self = weak.lock()) (*self)->postBackward(u);
    });
  }
  sampleMemory();
}

Engine::~Engine() {
  for (auto& unit : units_) unit->setGradientsReadyCallback(nullptr);
}

void Engine::preForward(size_t u) {
  TORCH_CHECK(u < units_.size(), "ringx.fsdp: no unit ", u);
  TORCH_CHECK(u == 0 || inIteration_, "ringx.fsdp: unit '", units_[u]->name(),
              "' was called outside its root's forward; call the outermost "
              "FullyShardedDataParallel module");
  if (u == 0) {
    if (inIteration_ && !backwardQueued_) reshardAll();  // a forward with no backward after it
    inIteration_ = true;
    backwardQueued_ = false;
    forwardOrder_.clear();
    std::fill(preBackwardDone_.begin(), preBackwardDone_.end(), 0);
    std::fill(postBackwardDone_.begin(), postBackwardDone_.end(), 0);
    forwardBeginNs_ = trace::nowNs();
    ScheduleConfig config;
    config.shardingStrategy = shardingStrategyName(options_.sharding_strategy());
    config.backwardPrefetch = backwardPrefetchName(options_.backward_prefetch());
    config.forwardPrefetch = options_.forward_prefetch();
    config.limitAllGathers = options_.limit_all_gathers();
    config.gatherLane = static_cast<bool>(units_.front()->groups().gatherLane);
    config.shardSize = units_.front()->groups().shardFactor();
    recordConfig(config, forwardBeginNs_, step_);
  }
  if (std::find(forwardOrder_.begin(), forwardOrder_.end(), u) == forwardOrder_.end()) {
    forwardOrder_.push_back(u);
  }
  Unit& unit = *units_[u];
  unit.beginUnshard(/*backward=*/false, /*prefetched=*/false, step_);
  unit.finishUnshard();
  sampleMemory();
  if (options_.forward_prefetch()) {
    // The unit that followed this one in the previous iteration (static graphs).
    auto it = std::find(previousForwardOrder_.begin(), previousForwardOrder_.end(), u);
    if (it != previousForwardOrder_.end() && it + 1 != previousForwardOrder_.end()) {
      prefetch(*(it + 1), /*backward=*/false);
    }
  }
  computeBeginNs_[u] = trace::nowNs();
}

void Engine::postForward(size_t u, const std::vector<at::Tensor>& outputs) {
  const int64_t now = trace::nowNs();
  recordUnitSpan(units_[u]->name(), "forward", computeBeginNs_[u], now, step_);
  bool backwardFollows = false;
  if (at::GradMode::is_enabled()) {
    std::weak_ptr<Engine*> weak = self_;
    for (const at::Tensor& out : outputs) {
      if (!out.defined() || !out.requires_grad()) continue;
      backwardFollows = true;
      // Fires when out's gradient is complete: before u's own backward runs.
      const_cast<at::Tensor&>(out).register_hook([weak, u](const at::Tensor&) {
        if (auto self = weak.lock()) (*self)->preBackward(u);
      });
    }
  }
  Unit& unit = *units_[u];
  if (u == 0) {
    forwardEndNs_ = now;
    if (!backwardFollows) {
      // Evaluation: no backward will gather again, so keep nothing gathered.
      reshardAll();
      inIteration_ = false;
    }
  } else if (unit.reshardAfterForward() || !backwardFollows) {
    const int64_t begin = trace::nowNs();
    unit.reshard();
    recordUnitSpan(unit.name(), "reshard", begin, trace::nowNs(), step_);
  }
  sampleMemory();
}

void Engine::preBackward(size_t u) {
  if (preBackwardDone_[u]) return;
  preBackwardDone_[u] = 1;
  if (!backwardQueued_) {
    backwardQueued_ = true;
    backwardBeginNs_ = trace::nowNs();
    std::weak_ptr<Engine*> weak = self_;
    torch::autograd::Engine::get_default_engine().queue_callback([weak] {
      if (auto self = weak.lock()) (*self)->finalizeBackward();
    });
  }
  Unit& unit = *units_[u];
  unit.beginUnshard(/*backward=*/true, /*prefetched=*/false, step_);
  unit.finishUnshard();
  unit.prepareGradients();
  if (options_.backward_prefetch() == BackwardPrefetch::kBackwardPre) prefetch(u, true);
  // Without the limiter, reductions that finished while this unit's gathers were in
  // flight free their unsharded gradients now, before this unit's backward adds its own.
  if (!options_.limit_all_gathers()) progressReductions(/*wait=*/false);
  sampleMemory();
  computeBeginNs_[u] = trace::nowNs();
}

void Engine::postBackward(size_t u) {
  if (postBackwardDone_[u]) return;
  postBackwardDone_[u] = 1;
  Unit& unit = *units_[u];
  recordUnitSpan(unit.name(), "backward", computeBeginNs_[u], trace::nowNs(), step_);
  if (requireBackwardGradSync_ && unit.trainable() && !unit.empty()) {
    unit.launchReduce(step_);
    launchOrder_.push_back(u);
  }
  if (options_.sharding_strategy() != ShardingStrategy::kNoShard) {
    const int64_t begin = trace::nowNs();
    unit.reshard();
    recordUnitSpan(unit.name(), "reshard", begin, trace::nowNs(), step_);
  }
  if (options_.backward_prefetch() == BackwardPrefetch::kBackwardPost) prefetch(u, true);
  if (options_.limit_all_gathers()) {
    // The limiter: one reduction in flight, this unit's, while the next unit computes.
    // Every earlier one is retired (waited for) here, at the same point of every
    // iteration, so what the engine holds never depends on how fast the wire was.
    retireReductions(/*keep=*/1);
  } else {
    // Reductions launched earlier may be done: free their buffers now, not at the end.
    progressReductions(/*wait=*/false);
  }
  sampleMemory();
}

void Engine::prefetch(size_t u, bool backward) {
  // The next unit to need its parameters: in backward, the one that ran its
  // forward just before u; in forward, `u` itself (the caller picked it).
  size_t target = u;
  if (backward) {
    auto it = std::find(forwardOrder_.begin(), forwardOrder_.end(), u);
    if (it == forwardOrder_.end()) return;
    // Walk back over units that already ran their backward (or never need one).
    for (;;) {
      if (it == forwardOrder_.begin()) return;
      --it;
      if (!preBackwardDone_[*it]) break;
    }
    target = *it;
  }
  Unit& unit = *units_[target];
  if (unit.state() != Unit::State::kSharded || unit.empty()) return;
  if (options_.limit_all_gathers() && target != 0 && gatheredNonRootUnits() >= 2) return;
  unit.beginUnshard(backward, /*prefetched=*/true, step_);
}

void Engine::progressReductions(bool wait) {
  for (size_t u : launchOrder_) {
    if (!units_[u]->progressReduce(wait)) break;  // later units wait their turn
  }
}

void Engine::retireReductions(size_t keep) {
  size_t inFlight = 0;
  for (size_t u : launchOrder_) inFlight += units_[u]->reduceInFlight();
  for (size_t u : launchOrder_) {  // oldest first
    if (inFlight <= keep) return;
    if (!units_[u]->reduceInFlight()) continue;
    units_[u]->progressReduce(/*wait=*/true);
    --inFlight;
  }
}

size_t Engine::gatheredNonRootUnits() const {
  size_t count = 0;
  for (size_t u = 1; u < units_.size(); ++u) {
    if (units_[u]->state() != Unit::State::kSharded && !units_[u]->empty()) ++count;
  }
  return count;
}

void Engine::finalizeBackward() {
  at::NoGradGuard noGrad;
  const int64_t computeEnd = trace::nowNs();
  // Units whose gradients were only partly produced (unused parameters) launch
  // now, in reverse forward order: the same on every rank.
  for (auto it = forwardOrder_.rbegin(); it != forwardOrder_.rend(); ++it) {
    if (units_[*it]->gradientsPending()) postBackward(*it);
  }
  progressReductions(/*wait=*/true);
  launchOrder_.clear();
  for (auto& unit : units_) unit->endBackward(/*keepUnshardedGradients=*/!requireBackwardGradSync_);
  reshardAll();
  sampleMemory();
  const int64_t end = trace::nowNs();
  recordPhase("optimizer", previousEndNs_, forwardBeginNs_, step_ - 1);
  recordPhase("forward", forwardBeginNs_, forwardEndNs_, step_);
  recordPhase("backward", backwardBeginNs_ ? backwardBeginNs_ : forwardEndNs_, end, step_);
  (void)computeEnd;
  previousEndNs_ = end;
  previousForwardOrder_ = forwardOrder_;
  inIteration_ = false;
  backwardQueued_ = false;
  backwardBeginNs_ = 0;
  ++step_;
}

void Engine::unshardAll() {
  for (auto& unit : units_) unit->beginUnshard(false, false, step_);
  for (auto& unit : units_) unit->finishUnshard();
  sampleMemory();
}

void Engine::reshardAll() {
  for (auto& unit : units_) unit->reshard();
  sampleMemory();
}

void Engine::resetPeakMemory() {
  memory_.peakBytes = 0;
  sampleMemory();
}

void Engine::sampleMemory() {
  MemoryCounters m;
  for (const auto& unit : units_) {
    m.shardedBytes += unit->shardedBytes();
    m.unshardedBytes += unit->unshardedBytes();
    m.gradBytes += unit->gradBytes();
  }
  m.peakBytes = std::max(memory_.peakBytes, m.shardedBytes + m.unshardedBytes + m.gradBytes);
  const bool changed = m.shardedBytes != memory_.shardedBytes ||
                       m.unshardedBytes != memory_.unshardedBytes ||
                       m.gradBytes != memory_.gradBytes || m.peakBytes != memory_.peakBytes;
  memory_ = m;
  if (changed) recordMemory(m);
}

}  // namespace ringx::fsdp
