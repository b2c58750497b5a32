// Ring all-gather: the second half of ring allreduce on its own.
//
// Rank r places its input in block r of the output; during n-1 copying steps
// each block travels around the ring, received straight into its final place
// and forwarded segment by segment. The blocks need not be adjacent, so the
// caller's output tensors can be filled without a staging buffer.
#include <cstring>
#include <vector>

#include "backend/algorithms/algorithms.h"
#include "backend/algorithms/ring.h"
#include "base/bytes.h"

namespace ringx::algorithms {

void ringAllgather(Collective& c, const void* input, void* output, size_t bytes,
                   size_t segmentBytes) {
  std::vector<void*> blocks;
  for (int i = 0; i < c.size(); ++i) blocks.push_back(static_cast<char*>(output) + i * bytes);
  ringAllgatherInto(c, input, blocks, bytes, segmentBytes);
}

void ringAllgatherInto(Collective& c, const void* input, const std::vector<void*>& outputs,
                       size_t bytes, size_t segmentBytes) {
  const int n = c.size();
  char* mine = static_cast<char*>(outputs[c.rank()]);
  if (mine != input) copyBytes(mine, input, bytes);
  RingFlow flow;
  flow.elementSize = 1;
  for (int i = 0; i < n; ++i) {
    flow.chunkData.push_back(static_cast<char*>(outputs[i]));
    flow.chunkBytes.push_back(bytes);
  }
  flow.steps = n - 1;
  flow.reduceSteps = 0;
  flow.shift = 0;
  flow.segmentBytes = segmentBytes;
  runRingFlow(c, flow);
}

}  // namespace ringx::algorithms
