// What the DDP engine measures in each iteration, and how it becomes trace events.
//
// The reducer fills these structs as backward runs (times are trace::nowNs(),
// the steady clock of every trace event); recordIteration() turns one finished
// iteration into events on the "ddp" tracks:
//
//   ddp             forward, backward, optimizer spans (args: step)
//                   bucket_rebuild when the buckets were rebuilt
//                   bucket_plan (instant) whenever buckets are built: the limits, and for
//                   bucket_cap_mb="auto" why the plan was chosen
//   ddp:bucket<k>   one span per bucket and iteration, from its first gradient to
//                   the end of its copy-back, with every phase as an argument; on sampled
//                   iterations (gradSampled) a "grad" instant per parameter when its
//                   gradient was ready: what the what-if replay re-buckets
//   memory          ddp.bucket_bytes: the bytes the engine holds in buckets
//
// The "optimizer" span runs from the end of one backward to the start of the next
// forward: the optimizer step and whatever else the loop does in between.
//
// No torch here: the trace side is tested without it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ringx::ddp {

// One bucket in one iteration. Times are trace::nowNs() (0 = did not happen).
struct BucketTiming {
  size_t index = 0;
  int64_t bytes = 0;
  size_t params = 0;
  int64_t firstGradNs = 0;  // its first gradient was ready
  int64_t readyNs = 0;      // its last gradient was ready
  int64_t launchNs = 0;     // its allreduce (or hook) was issued
  int64_t wireStartNs = 0;  // the backend started it (ringx only; else = launch)
  int64_t wireEndNs = 0;    // the backend finished it (ringx only; else = done)
  int64_t doneNs = 0;       // its future completed
  int64_t copyBackBeginNs = 0;
  int64_t copyBackEndNs = 0;
  int64_t exposedNs = 0;  // communication still running after backward's compute ended
  int64_t seq = -1;       // the collective's sequence number in a ringx group
};

// One parameter's gradient became ready (its hook ran) at ns.
struct GradReady {
  size_t param = 0;  // registration order
  size_t bucket = 0;
  int64_t ns = 0;
};

// Whether iteration `iteration`'s gradient readiness is recorded: the first 16, then every 16th,
// so that the replay has steps after the bucket rebuild at a cost that does not grow with the
// parameters on most steps.
inline bool gradSampled(int64_t iteration) { return iteration < 16 || iteration % 16 == 0; }

// A bucket plan as built (the trace's "bucket_plan" instant).
struct PlanRecord {
  int64_t step = 0;
  int64_t bucketCapBytes = 0;
  int64_t firstBucketBytes = 0;
  bool gradientAsBucketView = false;
  int64_t worldSize = 1;
  size_t buckets = 0;
  std::string reason;                // bucket_cap_mb="auto": what was chosen and why
  const char* engine = "ringx.ddp";  // or "torch.ddp": torch's DDP, watched (ddp/watch)
};

struct IterationTiming {
  int64_t iteration = -1;
  int64_t forwardBeginNs = 0;
  int64_t forwardEndNs = 0;           // prepareForBackward
  int64_t backwardBeginNs = 0;        // the first output's gradient function started
  int64_t backwardEndNs = 0;          // autograd finished computing (end-of-backward callback)
  int64_t finalizeEndNs = 0;          // every bucket waited for and written back
  int64_t exposedNs = 0;              // finalize waiting for communication
  int64_t previousFinalizeEndNs = 0;  // the last iteration's end: the optimizer span starts there
  std::vector<BucketTiming> buckets;
  std::vector<GradReady> grads;  // in the order they became ready; gradSampled iterations only
};

// Records one finished iteration as trace events (when tracing is on). `params` gives each
// parameter's bytes and bucketing group, for its "grad" instant.
struct ParamFacts {
  int64_t bytes = 0;
  std::string group;
};
void recordIteration(const IterationTiming& iteration, const std::vector<ParamFacts>& params);
// Records a bucket plan (at construction, at the rebuild, at an "auto" choice).
void recordBucketPlan(const PlanRecord& plan);
// Records a bucket rebuild that took [beginNs, endNs].
void recordBucketRebuild(int64_t beginNs, int64_t endNs, int64_t step, size_t bucketCount);
// Samples the bytes held in buckets.
void recordBucketBytes(int64_t bytes);

}  // namespace ringx::ddp
