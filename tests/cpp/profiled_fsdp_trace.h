// A hand-made CPU profiler trace of a two-rank torch FSDP2 job over gloo (Kineto's JSON, as
// torch.profiler writes it with record_shapes on), whose units, gathers, prefetches and
// reductions are known by construction: the analysis tests' (profiler_fsdp_test.cc) and the
// viewer's FSDP panel's.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "tests/cpp/profiled_ddp_trace.h"

namespace ringx::testing {

inline constexpr int64_t kRootShard = 256, kLayerShard = 1024;  // floats per rank
inline constexpr int64_t kStepUs = 13000;

// FSDP2 scope names: "FSDP::<label>" for the root, "FSDP::<label> (<unit>)" else.
inline std::string scope(const char* label, const std::string& unit) {
  return unit.empty() ? strCat("FSDP::", label) : strCat("FSDP::", label, " (", unit, ")");
}

// A gather of `shard` floats per rank issued at t+at inside its all_gather scope of `len` us
// (FSDP2 on CPU waits in it), on gloo's worker (tid 2) from t+at+30 for `wire` us.
inline void gather(CpuRank& k, const std::string& unit, int64_t t, int64_t at, int64_t len,
                   int64_t wire, int64_t shard) {
  k.op("user_annotation", scope("all_gather", unit), 1, t + at, len);
  k.op("cpu_op", "c10d::_allgather_base_", 1, t + at + 10, 10,
       strCat("[[", 2 * shard, "], [", shard, "], []]"));
  k.op("user_annotation", "gloo:all_gather", 2, t + at + 30, wire, strCat("[[", shard, "]]"));
}

// A unit's post-backward at t+at: accumulate, reshard, and its reduce-scatter of the whole
// gradient (gloo runs it as an allreduce, tid 3) in post_backward_reduce.
inline void postBackward(CpuRank& k, const std::string& unit, int64_t t, int64_t at, int64_t wire,
                         int64_t shard) {
  k.op("user_annotation", scope("post_backward_accumulate", unit), 1, t + at, 10);
  k.op("user_annotation", scope("post_backward_reshard", unit), 1, t + at + 10, 40);
  k.op("user_annotation", scope("post_backward_reduce", unit), 1, t + at + 50, wire + 50);
  k.op("cpu_op", "c10d::_reduce_scatter_base_", 1, t + at + 60, 10,
       strCat("[[", shard, "], [", 2 * shard, "], []]"));
  k.op("user_annotation", "gloo:all_reduce", 3, t + at + 80, wire, strCat("[[", 2 * shard, "]]"));
}

// Step n from t: the root and layers.0, layers.1 (reshard_after_forward=True for the layers,
// not the root); in backward layers.1's pre-backward prefetches layers.0's gather.
inline void fsdpStep(CpuRank& k, int n, int64_t t) {
  k.op("user_annotation", strCat("ProfilerStep#", n), 1, t, kStepUs);
  k.op("user_annotation", "Optimizer.zero_grad#SGD.zero_grad", 1, t + 10, 50);
  k.op("user_annotation", "FSDP::root_pre_forward", 1, t + 100, 10);
  k.op("user_annotation", scope("pre_forward", ""), 1, t + 120, 280);  // compute from 400
  gather(k, "", t, 130, 220, 140, kRootShard);
  k.op("user_annotation", scope("all_gather_copy_out", ""), 1, t + 310, 30);
  for (auto [unit, at] : {std::pair{"layers.0", 500}, std::pair{"layers.1", 2600}}) {
    k.op("user_annotation", scope("pre_forward", unit), 1, t + at, 1000);
    gather(k, unit, t, at + 10, 890, 760, kLayerShard);
    k.op("user_annotation", scope("all_gather_copy_out", unit), 1, t + at + 850, 50);
    k.op("user_annotation", scope("post_forward", unit), 1, t + at + 2000, 50);
  }
  k.op("user_annotation", scope("post_forward", ""), 1, t + 4700, 20);
  // Backward.
  k.op("user_annotation", scope("pre_backward", ""), 1, t + 5000, 10);  // root: still gathered
  k.op("user_annotation", scope("pre_backward", "layers.1"), 1, t + 5100, 1100);
  gather(k, "layers.1", t, 5110, 890, 760, kLayerShard);
  k.op("user_annotation", scope("all_gather_copy_out", "layers.1"), 1, t + 5950, 50);
  k.op("user_annotation", "FSDP::backward_prefetch for layers.0", 1, t + 6010, 180);
  gather(k, "layers.0", t, 6020, 160, 120, kLayerShard);
  postBackward(k, "layers.1", t, 7200, 1000, kLayerShard);
  k.op("user_annotation", scope("pre_backward", "layers.0"), 1, t + 8400, 100);
  k.op("user_annotation", scope("all_gather_copy_out", "layers.0"), 1, t + 8420, 60);
  postBackward(k, "layers.0", t, 9500, 1000, kLayerShard);
  postBackward(k, "", t, 10700, 200, kRootShard);
  k.op("user_annotation", "FSDP::root_post_backward_callback", 1, t + 11100, 100);
  k.op("user_annotation", "Optimizer.step#SGD.step", 1, t + 11300, 1000);
}

inline std::vector<CpuRank> profiledFsdpJob() {
  std::vector<CpuRank> ranks;
  for (int r = 0; r < 2; ++r) {
    CpuRank& k = ranks.emplace_back(r);
    for (int n = 1; n <= 3; ++n) fsdpStep(k, n, 1'000'000 + (n - 1) * kStepUs + r * 5);
  }
  return ranks;
}

}  // namespace ringx::testing
