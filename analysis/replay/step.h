// What the DDP and FSDP replays share about a step: the recorded step time they are checked
// against, and the critical path they report (what the step was waiting on, stretch by
// stretch), one definition for both engines, the what-if report and the viewer's panel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace ringx::replay {

// A stretch of the critical path, at times from the step's start.
struct PathSegment {
  enum class Kind {
    kForward,
    kBackward,
    kAllreduce,
    kCopyBack,
    kOptimizer,
    kAllGather,
    kReduceScatter,
    kHost,        // a profiler trace's CPU work: what the host did between launches
    kKernel,      // a profiler trace's compute kernel, copy or fill on a device stream
    kCollective,  // any other collective (all_to_all, broadcast, send/recv, ...)
  };
  Kind kind = Kind::kForward;
  int32_t rank = 0;     // whose compute it was (a collective: the rank that launched it last)
  int64_t bucket = -1;  // the DDP bucket, or the FSDP unit, of a collective or copy-back
  int64_t beginNs = 0;
  int64_t endNs = 0;
};
const char* pathKindName(PathSegment::Kind kind);

// The median, rounded to a nanosecond; 0 for none.
int64_t medianNs(const std::vector<int64_t>& values);

// The job's step times from its ranks' periods (periods[rank][step]: the rank's forward begin
// to its next forward begin; -1 where the rank did not record the step): per step the slowest
// rank's period over that step and the next (half its begin of the step to its begin two steps
// later; the last step, or one whose next the rank did not record, its own). Over two steps
// rather than one: ranks that take turns being late (at a ring of two the last to arrive
// finishes first, so begins the next step first) each alternate a long period and a short one,
// and the slowest rank's single periods counted every long half (a lone 17 MB allreduce
// between two hosts at 1 Gbit/s: 222 ms a step where the job ran one every 200 ms). A rank the
// others wait for makes every rank's periods alike either way. Only in a run of at least
// kPairedStepsFrom steps: a profiler trace's one to three steps are no steady state (each
// rank's last period runs to its trace's end), and each keeps its own period.
constexpr size_t kPairedStepsFrom = 4;
std::vector<int64_t> stepTimesNs(const std::vector<std::vector<int64_t>>& periods);

// The recorded step time: the median over steps of stepTimesNs.
class RecordedSteps {
 public:
  void add(int32_t rank, int64_t step, int64_t forwardBeginNs, int64_t nextForwardBeginNs);
  int64_t medianNs() const;

 private:
  std::map<int64_t, std::map<int32_t, int64_t>> periods_;  // step -> rank -> period
};

}  // namespace ringx::replay
