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

struct ProfiledDdp {
  replay::DdpRecording recording;
  int64_t firstStep = 0;
  std::string wire;  // whose scope timed the wire: "gloo", "ringx", ...
  std::vector<int64_t> bucketBytes;
};

// Whether the store holds profiler traces of a torch DDP job (its forward scope) and no ringx
// rank stream.
bool holdsProfiledTorchDdp(const model::TraceStore& store);

// Throws std::runtime_error saying what is missing (record_shapes off, no step every rank
// recorded, buckets whose bytes no run of gradients adds up to, no backend scope of the wire).
ProfiledDdp profiledTorchDdp(const model::TraceStore& store);

}  // namespace ringx::analysis
