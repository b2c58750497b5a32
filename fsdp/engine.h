// The FSDP runtime: when each unit gathers, computes, frees and reduces.
//
// One Engine drives a root unit and every unit nested inside it (units[0] is the
// root). The front ends (python/ringx/fsdp.py, fully_sharded_data_parallel.h)
// call preForward(u) / postForward(u, outputs) around unit u's module; the rest
// is driven by autograd:
//
//   forward   preForward gathers u (waiting if it is not there yet), then with
//             forward_prefetch issues the gather of the unit that came next in
//             the previous iteration. postForward registers a hook on u's
//             outputs and frees u's gathered parameters (FULL_SHARD and
//             HYBRID_SHARD; not the root, whose backward comes first).
//   backward  the hook on u's outputs fires before u's backward: gather u again
//             (BACKWARD_PRE: and issue the gather of the unit before u in this
//             forward's order), point every .grad at one zeroed flat buffer.
//             When the last of u's gradients is accumulated: launch its
//             reduce-scatter (+ allreduce across replicas), free u's parameters
//             (BACKWARD_POST: then issue the next gather).
//   end       a callback queued on the autograd engine launches what is still
//             pending (units with unused parameters), waits for every
//             reduction, adds the results to the shards' gradients, and frees
//             everything still gathered.
//
// Rate limiter (limit_all_gathers): a prefetch is not issued while two non-root
// units already hold gathered parameters, so at most the current unit and the
// next one are unsharded; and when a unit's backward ends, every reduction but
// its own is retired (waited for, its unsharded gradient freed), so at most one
// is in flight while the next unit computes. Both happen at the same points of
// every iteration: the memory held, and its peak, do not depend on how fast the
// collectives were (torch's FSDP, which retires reductions when it finds them
// done, cannot promise that). Without the limiter, reductions are retired as
// they are found done. Every rank issues the same collectives in the same
// order because the order comes from the (same) forward on every rank.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "fsdp/timing.h"
#include "fsdp/unit.h"

namespace ringx::fsdp {

class Engine {
 public:
  // units[0] is the root; every unit's options are its own, the runtime's
  // (prefetch, limiter) come from the root's.
  explicit Engine(std::vector<std::shared_ptr<Unit>> units);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void preForward(size_t unit);
  void postForward(size_t unit, const std::vector<at::Tensor>& outputs);

  // no_sync(): while false, backward keeps unsharded gradients and reduces nothing.
  void setRequireBackwardGradSync(bool enabled) { requireBackwardGradSync_ = enabled; }
  bool requireBackwardGradSync() const { return requireBackwardGradSync_; }

  // Gathers every unit (summon_full_params) / frees them again.
  void unshardAll();
  void reshardAll();

  const std::vector<std::shared_ptr<Unit>>& units() const { return units_; }
  MemoryCounters memory() const { return memory_; }
  void resetPeakMemory();
  int64_t step() const { return step_; }
  // Units in the order the last finished iteration ran their forward.
  const std::vector<size_t>& forwardOrder() const { return previousForwardOrder_; }

 private:
  void preBackward(size_t unit);
  void postBackward(size_t unit);
  void finalizeBackward();
  void prefetch(size_t unit, bool backward);
  void progressReductions(bool wait);
  // Waits for launched reductions, oldest first, until at most `keep` are in flight.
  void retireReductions(size_t keep);
  size_t gatheredNonRootUnits() const;
  void sampleMemory();

  std::vector<std::shared_ptr<Unit>> units_;
  const Options options_;          // the root's
  std::shared_ptr<Engine*> self_;  // hooks hold it weakly: none fires into a dead engine
  bool requireBackwardGradSync_ = true;
  int64_t step_ = 0;

  // This iteration.
  bool inIteration_ = false;
  bool backwardQueued_ = false;
  std::vector<size_t> forwardOrder_;
  std::vector<size_t> launchOrder_;  // units whose reduction was launched, in order
  std::vector<size_t> previousForwardOrder_;
  std::vector<char> preBackwardDone_;
  std::vector<char> postBackwardDone_;
  std::vector<int64_t> computeBeginNs_;
  int64_t forwardBeginNs_ = 0;
  int64_t forwardEndNs_ = 0;
  int64_t backwardBeginNs_ = 0;
  int64_t previousEndNs_ = 0;
  MemoryCounters memory_;
};

}  // namespace ringx::fsdp
