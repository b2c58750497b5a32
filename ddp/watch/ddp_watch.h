// torch's own DistributedDataParallel, seen from outside: the per-bucket events of a ringx.ddp
// trace (ddp/timing.h), for a job that changes nothing but its backend.
//
// torch's Reducer keeps its buckets to itself, but what it does can be followed:
//  - every parameter's AccumulateGrad node runs under a RecordFunction, and the Reducer's hook
//    for that parameter runs right after it: the node's end is when the gradient was ready;
//  - it launches buckets strictly in index order, each once it and every bucket before it are
//    ready, so which buckets a gradient launches follows from the layout and the gradients so far
//    (the "mirror" below);
//  - every collective's Work carries a profiling RecordFunction from issue to finish, whichever
//    backend runs it; over ringx the Work also says when the wire ran it, and its seq;
//  - two final callbacks of the autograd engine, the first queued as backward begins and the
//    second queued by the first, run before and after the Reducer's own (which waits for the
//    buckets and copies their results back): backward's compute end and its end; between
//    them, each parameter's copy back (aten::copy_, in bucket order) is a bucket's copy-back.
//
// This class is the bookkeeping, without torch (tests/cpp/ddp_watch_test.cc drives it as the
// callbacks would); observe/torch_callbacks.cc feeds it from torch. A collective issued
// during backward goes to the lowest bucket the mirror has launched that has none yet: with one
// collective per bucket (no hook, or the allreduce and fp16/bf16 compress hooks) that is exact.
// A hook's further collectives join the newest bucket launched; with find_unused_parameters, a
// collective beyond the mirror goes to the lowest bucket without one. Over other backends the
// Work's scope is the wire; gloo begins it when its worker runs the collective, so there the
// launch is the mirror's (the Reducer launches a bucket as it and those before it are ready).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "backend/group/wire_times.h"
#include "ddp/timing.h"

namespace ringx::observe {

// What the Reducer's buckets are: parameters in the Reducer's order, each bucket's parameters
// (indices into params) in launch order, and the plan's limits for the "bucket_plan" instant.
struct DdpLayout {
  std::vector<const void*> params;  // identities (the parameter's TensorImpl)
  std::vector<ddp::ParamFacts> facts;
  std::vector<std::vector<size_t>> buckets;
  std::vector<int64_t> bucketBytes;
  ddp::PlanRecord plan;
  // find_unused_parameters: the Reducer marks unused parameters ready itself, unseen, so a
  // collective the mirror cannot place is a bucket launching early, not a hook's second one.
  bool findUnused = false;
};

class DdpWatch {
 public:
  // The layout now (at the first forward, and after the Reducer rebuilt its buckets): records the
  // plan and the bytes held in buckets.
  void setLayout(DdpLayout layout);
  void recordRebuild(int64_t beginNs, int64_t endNs);

  // The wrapped forward's begin and end; a forward that syncs gradients (grad enabled, not in
  // no_sync) arms the watch for the backward that follows.
  void forwardBegin(int64_t ns);
  void forwardEnd(int64_t ns, bool syncsGradients);

  // Armed and waiting for backward's first node (the callbacks' cheap check).
  bool armed() const;
  // Backward's first node ran: returns true when this begins the watched backward (then the
  // caller queues the final callbacks).
  bool backwardNode(int64_t ns);
  // A parameter's AccumulateGrad ended. Unknown parameters (another model's) are ignored.
  void gradReady(const void* param, int64_t ns);
  // A collective was issued during the watched backward: a token for its finish and wire
  // (0: not this backward's).
  uint64_t collectiveIssued(int64_t ns);
  void collectiveFinished(uint64_t token, int64_t ns);
  void attachWire(uint64_t token, WireReader reader);
  // The first final callback (backward's compute ended) and the second (the Reducer's finalize
  // returned): records the iteration.
  void computeEnded(int64_t ns);
  void finalized(int64_t ns);
  // Between the two: whether the Reducer copies buckets back into the gradients
  // (gradient_as_bucket_view=False), and each parameter's copy as it ran (in bucket order).
  bool copiesBack() const;
  void copiedBack(int64_t beginNs, int64_t endNs);

  // The last recorded iteration (tests), and how many were recorded.
  ddp::IterationTiming lastIteration() const;
  int64_t iterations() const;

 private:
  enum class Phase { kIdle, kForward, kArmed, kBackward, kFinalizing };
  struct Bucket {
    size_t pending = 0;
    int64_t firstGradNs = 0, readyNs = 0, mirrorLaunchNs = 0, issueNs = 0, finishNs = 0;
    size_t collectives = 0;
    WireReader wire;
  };
  // A collective's token: the iteration and the bucket; bucketOf gives the bucket back, or
  // buckets_.size() for a token of another iteration.
  uint64_t tokenFor(size_t bucket) const;
  size_t bucketOf(uint64_t token) const;
  void resetBuckets();

  mutable std::mutex mutex_;
  DdpLayout layout_;
  std::vector<size_t> bucketOf_;                            // parameter -> bucket
  std::vector<std::pair<const void*, size_t>> byIdentity_;  // sorted: identity -> parameter
  Phase phase_ = Phase::kIdle;
  int64_t iteration_ = -1;  // of the forward that syncs; ++ at each
  ddp::IterationTiming current_;
  ddp::IterationTiming last_;
  int64_t recorded_ = 0;
  int64_t lastFinalizeEndNs_ = 0;
  std::vector<Bucket> buckets_;
  std::vector<bool> seen_;
  size_t nextBucket_ = 0;
  std::vector<std::pair<int64_t, int64_t>> copies_;
};

}  // namespace ringx::observe
