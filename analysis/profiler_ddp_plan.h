// torch DDP's buckets re-planned in a GPU job's profiler program (profiler_program.h): the
// bucket questions (bucket_cap_mb, first bucket) answered by the same replay that reproduces the
// recorded step, host and streams included, so that a step the host sets (the GPU waiting on
// Python) is not predicted to move with the communication the way a device-bound one is.
//
// The recovered job (profiler_ddp.h) says, by correlation, which of a rank's device ops made
// each gradient ready, which NCCL kernels were the recorded buckets' allreduces and which
// kernels copied each gradient back. The rewrite, per rank and step:
//   - drops the recorded buckets' collectives (their issue and wait ops);
//   - puts each new bucket's allreduce on the NCCL stream they ran on, right after the op
//     that made its last gradient ready (c10d's NCCL stream waits on the current one at the
//     launch, which the Reducer makes from that gradient's hook), launched by the host op that
//     launched that op, and in bucket order (the Reducer launches them in index order);
//   - makes each copy back wait for its gradient's new bucket (work.wait() in finalize), and
//     whatever else waited for a dropped allreduce wait for the new bucket that holds that
//     allreduce's last gradient;
//   - times each new allreduce by the wire fitted from the trace's collectives (profilerWire),
//     scaled per step by how that step's recorded buckets compared with the fit, so that the
//     step's jitter is kept and the fit's error cancels against the recorded plan rewritten
//     the same way (the reference the predictions are scaled by).
#pragma once

#include <vector>

#include "analysis/profiler_ddp.h"
#include "analysis/profiler_program.h"
#include "analysis/replay/bucket_plan.h"
#include "analysis/replay/cost_model.h"

namespace ringx::analysis {

// `plan`: the buckets in launch order over ddp.recording.params (replay::assignBuckets).
// Throws std::invalid_argument where the program cannot take it: no wire fitted, DDP's
// allreduces not matched across ranks, a rank without DDP's kernels, gradients the program
// does not hold the kernels of.
ProfilerProgram withBucketPlan(const ProfilerProgram& base, const ProfiledDdp& ddp,
                               const std::vector<replay::BucketSpec>& plan,
                               const replay::LinkFit& wire);

// The plan `limits` make of the recovered job's gradients (torch's rule, bucket_plan.h).
std::vector<replay::BucketSpec> profiledPlan(const ProfiledDdp& ddp,
                                             const replay::BucketLimits& limits);

}  // namespace ringx::analysis
