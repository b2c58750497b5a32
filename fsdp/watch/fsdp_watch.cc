#include "fsdp/watch/fsdp_watch.h"

#include <algorithm>

namespace ringx::observe {
namespace {

// Moves `held` (one of a unit's holdings) to `on`, keeping `counter` (the bytes of all units'
// holdings of its kind) in step; whether it changed.
bool hold(bool& held, bool on, int64_t& counter, int64_t bytes) {
  if (held == on) return false;
  held = on;
  counter += on ? bytes : -bytes;
  return true;
}

}  // namespace

void FsdpWatch::setUnits(std::vector<FsdpUnit> units, FsdpSchedule schedule) {
  std::lock_guard<std::mutex> lock(mutex_);
  schedule_ = std::move(schedule);
  memory_.shardedBytes = 0;
  for (FsdpUnit& unit : units) {
    memory_.shardedBytes += unit.shardedBytes;
    units_[unit.name].unit = std::move(unit);
  }
  haveUnits_ = true;
  sampleMemoryLocked();
  if (pendingConfigNs_ > 0 && step_ >= 0) recordConfigLocked(pendingConfigNs_);
  pendingConfigNs_ = 0;
}

void FsdpWatch::recordConfigLocked(int64_t ns) {
  fsdp::ScheduleConfig config;
  config.shardingStrategy = schedule_.shardingStrategy.c_str();
  config.backwardPrefetch = schedule_.backwardPrefetch.c_str();
  config.forwardPrefetch = schedule_.forwardPrefetch;
  config.limitAllGathers = false;  // FSDP2 has no rate limiter
  config.shardSize = schedule_.shardSize;
  config.engine = "torch.fsdp2";
  config.blocking = schedule_.blocking;
  fsdp::recordConfig(config, ns, step_);
}

bool FsdpWatch::hasUnits() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return haveUnits_;
}

FsdpWatch::UnitState* FsdpWatch::unitLocked(const std::string& name) {
  UnitState& state = units_[name];
  state.unit.name = name;
  return &state;
}

void FsdpWatch::sampleMemoryLocked() {
  if (!haveUnits_) return;
  memory_.peakBytes = std::max(memory_.peakBytes,
                               memory_.shardedBytes + memory_.unshardedBytes + memory_.gradBytes);
  fsdp::recordMemory(memory_);
}

void FsdpWatch::scopeBegin(FsdpScope scope, const std::string& name, int64_t ns, bool prefetch) {
  std::lock_guard<std::mutex> lock(mutex_);
  switch (scope) {
    case FsdpScope::kRootPreForward: {
      if (step_ >= 0 && lastBackwardEndNs_ > 0) {
        fsdp::recordPhase("optimizer", lastBackwardEndNs_, ns, step_);
      }
      ++step_;
      inBackward_ = false;
      forwardBeginNs_ = ns;
      forwardEndNs_ = backwardBeginNs_ = 0;
      // The first iteration begins before FSDP2's lazy init has made the units: its schedule is
      // recorded when they arrive (setUnits), at this moment.
      if (haveUnits_) {
        recordConfigLocked(ns);
      } else {
        pendingConfigNs_ = ns;
      }
      return;
    }
    case FsdpScope::kPreForward:
    case FsdpScope::kPreBackward: {
      if (scope == FsdpScope::kPreBackward && !inBackward_) {
        inBackward_ = true;
        backwardBeginNs_ = ns;
      }
      UnitState* unit = unitLocked(name);
      // Compute needs the unit's parameters from here: a gather not ready yet is waited for.
      unit->gather.waitBeginNs = ns;
      return;
    }
    case FsdpScope::kAllGather: {
      UnitState* unit = unitLocked(name);
      const int64_t waitBegin = unit->gather.waitBeginNs;
      unit->gather = fsdp::GatherTiming{};
      unit->gatherToken = 0;
      unit->gather.backward = inBackward_;
      unit->gather.prefetched = prefetch;
      unit->gather.step = std::max<int64_t>(0, step_);
      unit->gather.bytes = unit->unit.unshardedBytes;
      unit->gather.issueNs = ns;
      // Issued by the unit's own pre_forward/pre_backward: waited for from its start.
      if (!prefetch) unit->gather.waitBeginNs = waitBegin;
      return;
    }
    case FsdpScope::kPostForward:
    case FsdpScope::kPostBackwardAccumulate:
    case FsdpScope::kPostBackwardReshard: {
      UnitState* unit = unitLocked(name);
      if (unit->computeBeginNs > 0) {
        fsdp::recordUnitSpan(name, scope == FsdpScope::kPostForward ? "forward" : "backward",
                             unit->computeBeginNs, ns, std::max<int64_t>(0, step_));
        unit->computeBeginNs = 0;
      }
      // Its unsharded gradients, computed, await reduction.
      if (scope != FsdpScope::kPostForward &&
          hold(unit->holdsGrads, true, memory_.gradBytes, unit->unit.gradBytes)) {
        sampleMemoryLocked();
      }
      return;
    }
    case FsdpScope::kPostBackwardReduce:
      unitLocked(name)->reductions = 0;
      return;
    case FsdpScope::kZeroGrad: {
      bool changed = false;
      for (auto& [unitName, unit] : units_) {
        changed |=
            hold(unit.holdsShardedGrads, false, memory_.gradBytes, unit.unit.shardedGradBytes);
      }
      if (changed) sampleMemoryLocked();
      return;
    }
    default:
      return;
  }
}

void FsdpWatch::scopeEnd(FsdpScope scope, const std::string& name, int64_t beginNs, int64_t endNs) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t step = std::max<int64_t>(0, step_);
  switch (scope) {
    case FsdpScope::kPreForward:
    case FsdpScope::kPreBackward:
      unitLocked(name)->computeBeginNs = endNs;
      return;
    case FsdpScope::kCopyOut: {
      UnitState* unit = unitLocked(name);
      if (unit->gather.issueNs > 0) {
        unit->gather.readyNs = endNs;
        if (unit->gather.waitBeginNs > endNs) unit->gather.waitBeginNs = 0;
        auto running = collectives_.find(unit->gatherToken);
        if (running != collectives_.end()) {
          running->second.copiedOut = unit->gather;  // recorded as it finishes
        } else {
          fsdp::recordGather(name, unit->gather);
        }
      }
      unit->gather = fsdp::GatherTiming{};
      unit->gatherToken = 0;
      // FSDP2 frees a reshard_after_forward=N slice once the copy-out is done.
      hold(unit->holdsPostForward, false, memory_.unshardedBytes, unit->unit.heldAfterForwardBytes);
      hold(unit->holdsUnsharded, true, memory_.unshardedBytes, unit->unit.unshardedBytes);
      sampleMemoryLocked();
      return;
    }
    case FsdpScope::kPostForward:
    case FsdpScope::kPostBackwardReshard: {
      if (scope == FsdpScope::kPostForward) forwardEndNs_ = endNs;
      UnitState* unit = unitLocked(name);
      if (scope == FsdpScope::kPostForward && !unit->unit.reshardsAfterForward) return;
      if (hold(unit->holdsUnsharded, false, memory_.unshardedBytes, unit->unit.unshardedBytes)) {
        fsdp::recordUnitSpan(name, "reshard", beginNs, endNs, step);
        if (scope == FsdpScope::kPostForward && unit->unit.heldAfterForwardBytes > 0) {
          // Resharded to a smaller group: its slice stays.
          hold(unit->holdsPostForward, true, memory_.unshardedBytes,
               unit->unit.heldAfterForwardBytes);
        }
        sampleMemoryLocked();
      }
      return;
    }
    case FsdpScope::kRootPostBackward:
      if (forwardBeginNs_ > 0) {
        fsdp::recordPhase("forward", forwardBeginNs_,
                          forwardEndNs_ > 0 ? forwardEndNs_ : backwardBeginNs_, step);
      }
      if (backwardBeginNs_ > 0) fsdp::recordPhase("backward", backwardBeginNs_, endNs, step);
      lastBackwardEndNs_ = endNs;
      inBackward_ = false;
      return;
    default:
      return;
  }
}

uint64_t FsdpWatch::collectiveIssued(FsdpScope scope, const std::string& name, int64_t ns) {
  if (scope != FsdpScope::kAllGather && scope != FsdpScope::kPostBackwardReduce) return 0;
  std::lock_guard<std::mutex> lock(mutex_);
  UnitState* unit = unitLocked(name);
  Collective c;
  c.unit = name;
  c.gather = scope == FsdpScope::kAllGather;
  c.step = std::max<int64_t>(0, step_);
  c.issueNs = ns;
  if (c.gather) {
    c.op = "all_gather";
    c.bytes = unit->unit.unshardedBytes;
  } else if (unit->reductions++ == 0) {
    c.op = "reduce_scatter";
    c.bytes = unit->unit.gradBytes;  // the whole input, as nccl-tests counts it
  } else {
    c.op = "allreduce";  // HSDP: the sharded gradient across replicas
    c.bytes = unit->unit.shardedGradBytes;
  }
  const uint64_t token = nextToken_++;
  if (c.gather) unit->gatherToken = token;
  collectives_[token] = std::move(c);
  return token;
}

void FsdpWatch::attachWire(uint64_t token, WireReader reader) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = collectives_.find(token);
  if (it != collectives_.end() && !it->second.wire) it->second.wire = std::move(reader);
}

void FsdpWatch::collectiveFinished(uint64_t token, int64_t ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = collectives_.find(token);
  if (it == collectives_.end()) return;
  Collective c = std::move(it->second);
  collectives_.erase(it);
  if (collectives_.empty()) settled_.notify_all();
  const WireTimes wire = c.wire ? c.wire() : WireTimes{};
  UnitState* unit = unitLocked(c.unit);
  if (c.gather) {
    auto withWire = [&](fsdp::GatherTiming& g) {
      g.wireStartNs = wire.startNs ? wire.startNs : c.issueNs;
      g.wireEndNs = wire.endNs ? wire.endNs : ns;
    };
    if (c.copiedOut.issueNs > 0) {
      withWire(c.copiedOut);
      fsdp::recordGather(c.unit, c.copiedOut);
    } else if (unit->gatherToken == token && unit->gather.issueNs > 0) {
      withWire(unit->gather);
      unit->gatherToken = 0;
    }
    return;
  }
  fsdp::ReduceTiming reduce;
  reduce.op = c.op == "reduce_scatter" ? "reduce_scatter" : "allreduce";
  reduce.step = c.step;
  reduce.bytes = c.bytes;
  reduce.launchNs = c.issueNs;
  reduce.wireStartNs = wire.startNs ? wire.startNs : c.issueNs;
  reduce.wireEndNs = wire.endNs ? wire.endNs : ns;
  reduce.doneNs = ns;
  fsdp::recordReduce(c.unit, reduce);
  // Reduced: the unsharded gradients go, the sharded ones stay.
  if (hold(unit->holdsGrads, false, memory_.gradBytes, unit->unit.gradBytes)) {
    hold(unit->holdsShardedGrads, true, memory_.gradBytes, unit->unit.shardedGradBytes);
    sampleMemoryLocked();
  }
}

bool FsdpWatch::awaitCollectives(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  return settled_.wait_until(lock, deadline, [&] { return collectives_.empty(); });
}

int64_t FsdpWatch::iterations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return step_ + 1;
}

fsdp::MemoryCounters FsdpWatch::memory() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return memory_;
}

}  // namespace ringx::observe
