// Whether this host's cores are contended: more threads want to run than there are cores.
//
// A waiting rank polls shared memory before it sleeps (context.cc): right when the cores are
// its own, disastrous when they are not. With torch's default intra-op threads (OpenMP
// workers that spin for milliseconds after every parallel region) or any busy process beside
// the job, a polling rank holds a core that the rank it waits for needs, and each step of a
// ring waits for a scheduler time slice (a 1 MiB allreduce at 2 ranks: 2.3 ms against 62 us).
// Sleeping at once instead frees the core, and the scheduler moves the waited-for rank onto
// it. So the wait policy asks this probe, and polls only on uncontended cores.
//
// The measure is the kernel's count of runnable threads on the host (the fourth field of
// /proc/loadavg, "running/total", this thread included), compared with the host's online
// cores: both host-wide, so the comparison holds inside a container too (where it can only
// err towards "contended", whose cost is a few microseconds per wait). The job's own ranks
// are allowed for: `ownRunners` of them may run at once without contention (more ranks than
// cores is handled by the oversubscribed policy, not here). Reading the file costs a few
// microseconds, so the answer is kept for a millisecond. A thread that runs for a moment (a
// kernel worker, a short command) must not switch a job off polling: contention counts
// only when two samples in a row, a millisecond or more apart, both see it. OpenMP workers
// spin for milliseconds and a busy process for good, so both are seen.
#pragma once

#include <chrono>

namespace ringx::transport {

// The cores this process may run on (its affinity mask: taskset, cgroups' cpusets), which is
// what the ranks of a host share, rather than the machine's count.
int usableCores();

class CoreContention {
 public:
  using Clock = std::chrono::steady_clock;
  // `ownRunners`: this job's threads that poll on this host (its ranks here).
  explicit CoreContention(int ownRunners);
  // Whether more threads are runnable than cores (and this job's own polling explains),
  // sampled at most once per kSampleEvery.
  bool contended(Clock::time_point now);
  // The runnable count /proc/loadavg's text holds, or -1 when it holds none.
  static int runnableIn(const char* loadavg);

  static constexpr std::chrono::microseconds kSampleEvery{1000};

 private:
  int threshold_;  // runnable threads above which the cores are contended
  Clock::time_point next_{};
  bool contended_ = false;
  bool lastSampleOver_ = false;  // the previous sample saw more runnable threads than cores
};

}  // namespace ringx::transport
