// Ring all-gather: the second half of ring allreduce on its own.
//
// Rank r places its input at chunk r of the output; during n-1 copying steps
// each chunk travels around the ring, received straight into its final place
// and forwarded segment by segment.
#include <cstring>

#include "backend/algorithms/algorithms.h"
#include "backend/algorithms/ring.h"

namespace ringx::algorithms {

void ringAllgather(Collective& c, const void* input, void* output, size_t bytes,
                   size_t segmentBytes) {
  const int n = c.size();
  char* out = static_cast<char*>(output);
  if (out + c.rank() * bytes != input) std::memcpy(out + c.rank() * bytes, input, bytes);
  RingFlow flow;
  flow.buffer = out;
  flow.elementSize = 1;
  for (int i = 0; i < n; ++i) {
    flow.chunkOffset.push_back(i * bytes);
    flow.chunkBytes.push_back(bytes);
  }
  flow.steps = n - 1;
  flow.reduceSteps = 0;
  flow.shift = 0;
  flow.segmentBytes = segmentBytes;
  runRingFlow(c, flow);
}

}  // namespace ringx::algorithms
