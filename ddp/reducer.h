// The Reducer: averages gradients across ranks while backward is still running.
//
// Every parameter's gradient accumulator (the autograd node that writes .grad)
// gets a post-hook. When it fires, the gradient is copied into the parameter's
// slot of a flat bucket buffer (scaled by 1/world on the default path), or, with
// gradient_as_bucket_view, the gradient already *is* that slot. When every slot
// of a bucket is filled, the bucket is ready; ready buckets are launched strictly
// in bucket order (every rank must issue the same collectives in the same order)
// as one allreduce each, or through a communication hook. Communication thus
// overlaps the rest of backward. When the last bucket is launched, a callback
// queued on the autograd engine runs at the very end of backward: it waits for
// every bucket and writes the averaged gradients back into .grad.
//
// Parameters that get no gradient in an iteration would leave their bucket
// waiting forever. With find_unused_parameters the reducer walks the autograd
// graph from the forward's outputs, marks the parameters it cannot reach as
// ready up front, and allreduces a "used" bitmap so that a gradient used on no
// rank is left untouched. With static_graph that walk and bitmap happen in the
// first iteration only: the set of unused parameters is then known.
//
// After the first iteration the buckets are rebuilt in the order gradients really
// became ready (rank 0's order, broadcast), so that the first bucket fills first.
//
// Each bucket and iteration is recorded as trace events (timing.h): first gradient, ready, launch,
// wire time, copy-back, and how much of its communication was exposed after backward's compute had
// ended.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "analysis/replay/bucket_plan.h"
#include "analysis/replay/ddp_fit.h"
#include "backend/c10d/torch_compat.h"
#include "ddp/timing.h"

namespace ringx::ddp {

using replay::assignBuckets;
using replay::BucketLimits;
using replay::BucketSpec;
using replay::completeOrder;
using replay::ParamLayout;
using replay::reverseOrder;

// A parameter's bucketing group ("float32@cpu"): buckets never mix dtypes or devices. The
// "grad" instants name it (timing.h), whoever's engine bucketed the parameter.
std::string bucketingGroup(const at::Tensor& t);

struct ReducerOptions {
  int64_t bucketCapBytes = 25ll << 20;
  int64_t firstBucketBytes = 1ll << 20;
  bool findUnusedParameters = false;
  bool gradientAsBucketView = false;
  bool staticGraph = false;
  // Time kAutoSteps steps after the rebuild, then rebuild once more with the bucket cap the
  // replay (analysis/replay) predicts fastest; rank 0 chooses, every rank builds the same.
  bool autoBucketCap = false;
};

class Reducer {
 public:
  // `params`: the parameters that require gradients (no duplicates), in
  // registration order; `names` their module paths (for error messages).
  Reducer(std::vector<at::Tensor> params, std::vector<std::string> names,
          c10::intrusive_ptr<::c10d::ProcessGroup> processGroup, ReducerOptions options);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Start of a forward whose backward will synchronise gradients. Rebuilds the
  // buckets after the first iteration (a collective), and fails clearly when the
  // previous backward left buckets unreduced.
  void prepareForForward();
  // End of that forward: arms the hooks; with find_unused_parameters walks the
  // graph from `outputs`.
  void prepareForBackward(const std::vector<at::Tensor>& outputs);

  // Replaces the default allreduce (must be called before the first backward).
  // Gradients are then handed to the hook unscaled, as in PyTorch: the hook
  // averages.
  void registerCommHook(std::unique_ptr<::c10d::CommHookInterface> hook);

  // Parameter indices of each bucket, in launch order.
  std::vector<std::vector<size_t>> bucketAssignment() const;
  int64_t bucketBytesHeld() const;
  bool bucketsRebuilt() const { return rebuilt_; }
  // Timings of the last finished iteration.
  IterationTiming lastIteration() const;
  // Parameters no rank used in the last iteration (find_unused_parameters / static_graph).
  std::vector<size_t> globallyUnusedParameters() const;
  const std::vector<std::string>& parameterNames() const { return names_; }
  // bucket_cap_mb="auto": what was chosen and why (empty until the choice, kAutoSteps steps
  // after the rebuild).
  std::string autoChoice() const;
  static constexpr size_t kAutoSteps = 5;

 private:
  struct Bucket {
    BucketSpec spec;
    at::Tensor flat;
    std::vector<at::Tensor> views;  // one per parameter, shaped like it
    std::vector<size_t> offsets;    // in elements
    std::vector<size_t> lengths;
    std::vector<std::vector<int64_t>> shapes;  // owns what GradBucket's sizes point at
    size_t pending = 0;
    c10::intrusive_ptr<c10::ivalue::Future> future;
    c10::intrusive_ptr<::c10d::Work> work;
    BucketTiming timing;
    // Set by the future's callback on the communication thread.
    std::shared_ptr<std::atomic<int64_t>> doneNs = std::make_shared<std::atomic<int64_t>>(0);
  };
  struct Location {
    size_t bucket = 0;
    size_t slot = 0;
  };

  void installHooks();
  void buildBuckets(const std::vector<size_t>& order);
  void rebuildBucketsIfDue();
  void autogradHook(size_t param);
  void markParamReady(size_t param, bool fromHook);
  void copyGradIntoBucket(size_t param);
  void launchReadyBuckets();
  void launchBucket(size_t index);
  void finalizeBackward();
  void finalizeBucket(Bucket& bucket, const std::vector<bool>& globallyUsed);
  std::vector<size_t> unreachableParameters(const std::vector<at::Tensor>& outputs) const;
  bool tracksUsage() const;
  std::string pendingParameterNames() const;
  void resetIterationState();
  void keepAutoSample();
  void chooseBucketCapIfDue();

  std::vector<at::Tensor> params_;
  std::vector<std::string> names_;
  std::vector<ParamLayout> layouts_;
  std::vector<ParamFacts> facts_;  // the same, for the trace's gradient readiness
  c10::intrusive_ptr<::c10d::ProcessGroup> processGroup_;
  ReducerOptions options_;
  int worldSize_ = 1;
  std::unique_ptr<::c10d::CommHookInterface> commHook_;

  // Keeps each gradient accumulator alive (the hooks live on it) and the hook keys.
  std::vector<c10d_glue::GradAccumulatorPtr> gradAccumulators_;
  std::vector<uintptr_t> hookKeys_;
  // Lets the hooks and callbacks see whether the reducer still exists.
  std::shared_ptr<Reducer*> self_;

  mutable std::mutex mutex_;
  std::vector<Bucket> buckets_;
  std::vector<Location> locations_;
  size_t nextBucket_ = 0;

  // Per-iteration state.
  bool expectHooks_ = false;      // armed by prepareForBackward
  bool requireFinalize_ = false;  // armed and not yet finalised
  bool unusedMarked_ = false;
  std::vector<bool> readyThisIteration_;
  std::vector<size_t> unusedThisIteration_;
  at::Tensor localUsed_;  // int32 per parameter, 1 if it got a gradient here
  c10::intrusive_ptr<::c10d::Work> usedWork_;
  at::Tensor usedReduced_;
  std::vector<bool> globallyUsed_;
  int64_t iteration_ = 0;  // synchronised iterations started
  IterationTiming current_;
  std::shared_ptr<std::atomic<int64_t>> backwardBeginNs_;  // set by a hook on the outputs
  IterationTiming last_;

  // Bucket rebuild: the order gradients became ready in the first iteration.
  std::vector<size_t> readyOrder_;
  bool rebuilt_ = false;
  bool rebuildDue_ = false;
  // bucket_cap_mb="auto": the steps timed since the rebuild, and the choice once made.
  std::vector<replay::DdpStepRecord> autoSamples_;
  bool autoChosen_ = false;
  std::string autoReason_;  // also the reason of the bucket plan built next
  // static_graph: what the first iteration found unused here, and used anywhere.
  bool staticUnusedKnown_ = false;
  std::vector<size_t> staticLocallyUnused_;
  std::vector<bool> staticGloballyUsed_;
};

}  // namespace ringx::ddp
