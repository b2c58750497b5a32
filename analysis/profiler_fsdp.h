// torch's FSDP2 (fully_shard) recovered from torch.profiler traces alone: the job ran nothing
// of ringx, and the what-if replay (replay/fsdp_fit.h) gets the recording it gets from a ringx
// trace of the same job (fsdp/watch/fsdp_watch.h), read off FSDP2's own scopes
// (trace/format/fsdp2_scopes.h) by the watch's rules, in the order the rank ran them:
//   - a step: "FSDP::root_pre_forward" inside ProfilerStep#N opens step N; its forward runs to
//     the last "post_forward"'s end, its backward from the first "pre_backward" to
//     "root_post_backward_callback"'s end; the optimizer from there to the next step's
//     root_pre_forward;
//   - a unit's gather: its "all_gather" scope's begin (the issue; prefetched when it sits in
//     another unit's "forward_prefetch"/"backward_prefetch" scope) to its "all_gather_copy_out"'s
//     end (ready), waited for from the "pre_forward"/"pre_backward" that needed it; its bytes
//     and wire end from the backend's scope of the collective issued inside it (its tensors'
//     dims: record_shapes on);
//   - a unit's compute: from its pre_forward's (pre_backward's) end to its post_forward's
//     (post_backward_accumulate's or post_backward_reshard's) begin;
//   - its frees: post_backward_reshard, and post_forward where the unit is gathered again in
//     backward (reshard_after_forward=True: FULL_SHARD's schedule; else SHARD_GRAD_OP's);
//   - its reduction: the first collective issued in its "post_backward_reduce" (FSDP2's
//     reduce-scatter; gloo runs it as an allreduce of the whole gradient), a second one HSDP's
//     allreduce; from the c10d op's issue to the backend scope's end;
//   - the wire: the backend's own scope of each collective, which Chrome ingest makes the
//     collective with bytes as nccl-tests counts them (trace/model/chrome_nccl.cc), the i-th
//     after the i-th c10d op of the rank (profiler_ddp.h's rule).
// On CPU tensors every collective blocks the thread that issued it (the recording says so);
// FSDP2's backward prefetch is BACKWARD_PRE's, forward prefetch is on when any gather ran in a
// forward_prefetch scope.
#pragma once

#include <cstdint>
#include <string>

#include "analysis/replay/fsdp_fit.h"
#include "trace/model/trace_store.h"

namespace ringx::analysis {

struct ProfiledFsdp {
  replay::FsdpRecording recording;
  int64_t firstStep = 0;
  std::string wire;  // whose scopes timed the wire: "gloo", "ringx", ...
};

// Whether the store holds profiler traces of an FSDP2 job (its root's scope) and no ringx rank
// stream.
bool holdsProfiledTorchFsdp2(const model::TraceStore& store);

// Throws std::runtime_error saying what is missing (no step every rank recorded, a gather or
// reduction without the backend's scope of its collective, record_shapes off).
ProfiledFsdp profiledTorchFsdp2(const model::TraceStore& store);

}  // namespace ringx::analysis
