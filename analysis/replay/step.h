// What the DDP and FSDP replays share about a step: the recorded step time they are checked
// against, and the critical path they report (what the step was waiting on, stretch by
// stretch), one definition for both engines, the what-if report and the viewer's panel.
#pragma once

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

// The recorded step time: per step, the slowest rank's forward begin to its next forward
// begin; the median over steps.
class RecordedSteps {
 public:
  void add(int64_t step, int64_t forwardBeginNs, int64_t nextForwardBeginNs);
  int64_t medianNs() const;

 private:
  std::map<int64_t, int64_t> slowest_;
};

}  // namespace ringx::replay
