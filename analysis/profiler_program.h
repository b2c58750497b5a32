// A torch.profiler (Kineto) trace as a replay program (replay/program.h): the front end that
// lets the one replay run a job that carried nothing of ringx, from each rank's profiler file.
//
// Per rank, from the store (trace/model's Chrome ingest: CPU threads with their runtime calls,
// device streams with their kernels, NCCL kernels as collectives matched across ranks):
//   - steps: the ProfilerStep#N scopes every rank recorded (none: the whole trace is one step);
//   - the host: the rank's CPU threads merged in time order, as compute between the calls that
//     matter: launches (cudaLaunchKernel, cudaMemcpyAsync, cudaMemsetAsync, ...; a launch's
//     own time is host work, and its kernel cannot begin before it did plus the rank's launch
//     latency, the smallest gap between a launch's begin and its kernel's), and host
//     synchronisations (cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize,
//     cudaMemcpy), which wait for the device: for the whole device, or for the stream whose
//     last launched op ended last before the call returned; the call keeps what it spent after
//     that op's end as host work;
//   - each stream's kernels, copies and fills in launch order, behind its backlog: the ops it
//     holds no launch of in the steps (launched earlier, or before the profiler began), which
//     keep it busy until the last of them ends; an NCCL kernel is a collective:
//     it arrives when its stream reaches it and its waits are met, and ends when its last
//     member has arrived plus its wire time (the last arriver's own recorded duration);
//   - the waits between streams, which these traces do not record (no cuda_sync events: Kineto
//     writes them only with enable_cuda_sync_events; the runtime's event calls name neither
//     event nor stream), taken from what c10d's NCCL path does around a collective: it records
//     an event on the current stream and makes the NCCL stream wait for it (the collective
//     follows the last op launched on the stream of the last compute launch before it), and
//     work.wait() makes the current stream wait on the collective's end event (a
//     cudaStreamWaitEvent between a collective's launch and the next compute launch, that is
//     not followed by another collective's launch first, makes that next compute launch wait
//     for the earliest collective not yet waited for). A trace without any cudaStreamWaitEvent
//     (runtime events filtered) gets the synchronous rule: the first compute launch after a
//     collective waits for it. docs/tracing.md has the rule's measured error on the real sets.
// Compute kernels that ran beside a collective carry the slowdown the trace shows (the
// contention constant fitted from the same kernel's durations with and without a collective
// beside it).
//
// The recorded step: per step, the slowest rank's ProfilerStep begin to its next step's begin;
// after the last step, to the later of its end and the end of the device work it launched; the
// median over the steps after the first (the program's own definition).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/replay/program.h"
#include "trace/model/trace_store.h"

namespace ringx::analysis {

struct ProfilerProgram {
  replay::Program program;
  replay::ProgramTimes times;
  std::vector<int64_t> recordedStepsNs;  // per step: replay::stepTimesNs of the ranks' periods
  int64_t recordedStepNs = 0;            // their median over the steps after the first
  std::vector<int64_t> stepNumbers;      // ProfilerStep#N's N; empty: the trace was one step
  // Per collective (the program's): its op ("allreduce", ...), bytes as nccl-tests counts
  // them (-1: the trace does not say) and its group's size.
  std::vector<std::string> collectiveOps;
  std::vector<int64_t> collectiveBytes, collectiveGroupSize;
  // And when its last member's kernel began, in the program's time (the earliest rank's first
  // step begins at 0): what the replay's start of it is checked against.
  std::vector<int64_t> recordedStartNs;
  // What was read, for the report: ops on streams, collectives, the waits inferred and the host
  // synchronisations; device ops whose launch lies outside the steps (left out).
  size_t kernels = 0, collectives = 0, streamWaits = 0, hostSyncs = 0, leftOut = 0;
  bool syncRule = false;  // no cudaStreamWaitEvent in the trace: the synchronous rule
  std::vector<std::string> notes;
  // Per rank (the program's order): each launched device op's correlation to its op (a
  // collective's issue; its wait is the next op), for the rewrites of profiler_ddp_plan.h.
  std::vector<std::unordered_map<int64_t, size_t>> opOf;
};

// Whether the store holds profiler traces and no ringx rank stream: what whatif and advise
// answer from a profiler program.
bool holdsProfilerTrace(const model::TraceStore& store);

// Throws std::runtime_error saying what is missing (no rank launched a device kernel: a CPU
// job's profiler trace is not read yet; no step every rank recorded).
ProfilerProgram profilerProgramOf(const model::TraceStore& store);

}  // namespace ringx::analysis
