// torch's DistributedDataParallel recovered from torch.profiler traces alone: the job ran
// nothing of ringx, and the what-if replay (replay/ddp_fit.h) gets the same recording it gets
// from a ringx trace of torch DDP (ddp/watch/ddp_watch.h), read off what the profiler keeps of
// the Reducer (record_shapes on). Per rank and ProfilerStep#N every rank recorded:
//   - forward: the "DistributedDataParallel.forward" scope;
//   - backward: from the first autograd node after forward ("autograd::engine::evaluate_function:
//     ...") to the last one's end (compute end); the gradients' readiness: each
//     "torch::autograd::AccumulateGrad" op's end (the Reducer's hook runs right after it), the
//     parameter's bytes from its Input Dims and type;
//   - the buckets: the Reducer's "c10d::allreduce_" calls during backward, in launch order (it
//     launches in index order), each bucket's bytes from its flat tensor's dims; its parameters
//     the next ones in readiness order whose bytes add up to it (after the first iteration the
//     Reducer's buckets follow gradient readiness);
//   - the wire: the backend's own scope of the collective, which Chrome ingest makes the
//     collective (trace/model/chrome_nccl.cc: "gloo:all_reduce" on gloo's worker thread, when the
//     worker ran it; "ringx:all_reduce", from issue to completion: the last rank's is the
//     wire), the i-th after the i-th launch; one that began before the previous one ended was
//     on the wire from that end (the group runs them in turn);
//   - finalize: the copies back ("torch.distributed.ddp.reducer::copy_bucket_to_grad", one per
//     parameter in bucket order; none: gradient_as_bucket_view) and its end, the later of the
//     last copy's end, the last wire end and the compute end; the optimizer: from there to the
//     next step's forward (the optimizer's step and the rest of the loop, as the engines'
//     "optimizer" span);
//   - the plan's limits, which the trace does not name: the bucket cap and first bucket that
//     make the engine's rule (replay/bucket_plan.h) give the recorded buckets: torch's defaults
//     (25 MB, first 1 MB) where they do, else the roundest cap that does.
// A GPU job's trace (its kernels tied to their launches by correlation) gives the same recording
// on the device's clock: each host-side point is where the compute stream stood then, the end
// of the kernels launched before it (c10d's NCCL stream waits on the current one at the
// allreduce's launch, so a bucket is launched when its gradients' kernels are done); forward
// and backward begin when their first kernel did; a gradient is ready when what its autograd
// node launched is done (the Reducer's copy into the bucket, in the node's hook, included);
// the wire is the allreduce's NCCL kernel (the last rank's, the shortest, is the wire time); the
// copies back are their kernels.
// The parameters are numbered in reverse readiness order (the Reducer's registration order for
// a model whose backward runs its layers backwards); what the replay needs is the readiness
// order itself, which the first step gives.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/replay/ddp_fit.h"
#include "trace/model/trace_store.h"

namespace ringx::analysis {

// Where a GPU rank's program (profiler_program.h) holds DDP's work, by the correlations of its
// device ops: what profiler_ddp_plan.h rewrites for another bucket plan.
struct ProfiledDdpKernels {
  int32_t rank = 0;
  std::vector<int64_t> steps;  // ProfilerStep#N of each step below
  // Per step: per gradient in readiness order, the op whose end made it ready (the last of
  // what its node launched); each recorded bucket's NCCL kernel.
  std::vector<std::vector<int64_t>> ready, allreduces;
  // Every copy back's kernel, and the gradient (readiness order) it copies.
  std::vector<std::pair<int64_t, size_t>> copies;
};

struct ProfiledDdp {
  replay::DdpRecording recording;
  int64_t firstStep = 0;
  std::string wire;     // whose scope timed the wire: "gloo", "ringx", "nccl" (its kernels)
  bool device = false;  // a GPU job: the recording's times are its compute stream's
  std::vector<int64_t> bucketBytes;
  std::vector<size_t> readiness;  // the parameters (recording.params' indices), ready order
  std::vector<ProfiledDdpKernels> kernels;  // a GPU job's, per rank
};

// Whether the store holds profiler traces of a torch DDP job (its forward scope) and no ringx
// rank stream.
bool holdsProfiledTorchDdp(const model::TraceStore& store);

// Throws std::runtime_error saying what is missing (record_shapes off, no step every rank
// recorded, buckets whose bytes no run of gradients adds up to, no backend scope of the wire).
ProfiledDdp profiledTorchDdp(const model::TraceStore& store);

}  // namespace ringx::analysis
