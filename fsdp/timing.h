// What the FSDP engine measures, and how it becomes trace events.
//
//   fsdp            forward, backward, optimizer spans per iteration (args: step)
//   fsdp:<unit>     per unit (its module path; "(root)" for the root unit) and
//                   iteration: all_gather (phase forward|backward, bytes, issue,
//                   wire start/end, exposed_ns = how long compute waited for it,
//                   prefetched 0|1), forward and backward compute, reshard,
//                   reduce_scatter and allreduce (hybrid and NO_SHARD)
//   fsdp_config     an instant on "fsdp" as each iteration begins: the schedule options
//   memory          fsdp.sharded_bytes, fsdp.unsharded_bytes, fsdp.grad_bytes,
//                   fsdp.peak_bytes: exactly what the engine holds, sampled at
//                   every change (the recorder adds the process RSS)
//
// No torch here: the trace side is tested without it.
#pragma once

#include <cstdint>
#include <string>

namespace ringx::fsdp {

// One all-gather of a unit's parameters. Times are trace::nowNs() (0 = did not happen).
struct GatherTiming {
  bool backward = false;    // pre-backward (else pre-forward)
  bool prefetched = false;  // issued ahead of need
  int64_t step = 0;
  int64_t bytes = 0;        // the unsharded buffer
  int64_t issueNs = 0;      // the collective was issued
  int64_t wireStartNs = 0;  // the backend started it (ringx only; else = issue)
  int64_t wireEndNs = 0;    // the backend finished it (ringx only; else = ready)
  int64_t waitBeginNs = 0;  // compute needed the parameters
  int64_t readyNs = 0;      // the parameters were usable
};

// One gradient reduction of a unit (reduce_scatter, or allreduce for NO_SHARD
// and across replicas for HYBRID_SHARD).
struct ReduceTiming {
  const char* op = "reduce_scatter";
  int64_t step = 0;
  int64_t bytes = 0;  // the collective's input
  int64_t launchNs = 0;
  int64_t wireStartNs = 0;
  int64_t wireEndNs = 0;
  int64_t doneNs = 0;  // the result was accumulated into the sharded gradient
};

// The schedule options an iteration ran with ("fsdp_config" on "fsdp": what a replay of the
// trace needs to know).
struct ScheduleConfig {
  const char* shardingStrategy = "FULL_SHARD";  // PyTorch's names
  const char* backwardPrefetch = "BACKWARD_PRE";
  bool forwardPrefetch = false;
  bool limitAllGathers = true;
  bool gatherLane = false;
  int64_t shardSize = 1;
  const char* engine = "ringx.fsdp";  // or "torch.fsdp2": FSDP2, watched (fsdp/watch)
  bool blocking = false;              // every collective blocks its issuing thread
};

struct MemoryCounters {
  int64_t shardedBytes = 0;    // parameter shards (fp32 masters) and their low-precision copies
  int64_t unshardedBytes = 0;  // gathered parameters alive now
  int64_t gradBytes = 0;       // unsharded gradient buffers, reduction buffers, sharded gradients
  int64_t peakBytes = 0;       // the largest sum of the three so far
};

// The track a unit's events go on: "fsdp:" + module path ("(root)" when empty).
std::string unitTrackName(const std::string& unitName);

void recordGather(const std::string& unitName, const GatherTiming& gather);
void recordReduce(const std::string& unitName, const ReduceTiming& reduce);
// forward / backward compute of a unit, and its reshard (free).
void recordUnitSpan(const std::string& unitName, const char* name, int64_t beginNs, int64_t endNs,
                    int64_t step);
// forward / backward / optimizer on the "fsdp" track.
void recordPhase(const char* name, int64_t beginNs, int64_t endNs, int64_t step);
void recordMemory(const MemoryCounters& memory);
void recordConfig(const ScheduleConfig& config, int64_t atNs, int64_t step);

}  // namespace ringx::fsdp
