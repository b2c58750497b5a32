// Ring reduce-scatter: the first half of ring allreduce on its own.
//
// The input holds n equal chunks; after n-1 reducing steps rank r owns the fully
// reduced chunk r (shift = 1 in ring.h's numbering makes the ring end there).
// The input is left untouched: the ring runs in a scratch copy.
#include <cstring>
#include <vector>

#include "backend/algorithms/algorithms.h"
#include "backend/algorithms/ring.h"

namespace ringx::algorithms {

void ringReduceScatter(Collective& c, const void* input, void* output, size_t countPerRank,
                       DataType dtype, ReduceOp op, size_t segmentBytes) {
  const int n = c.size();
  const size_t chunk = countPerRank * elementSize(dtype);
  if (n == 1) {
    std::memcpy(output, input, chunk);
    return;
  }
  std::vector<char> scratch(chunk * n);
  std::memcpy(scratch.data(), input, scratch.size());
  RingFlow flow;
  flow.buffer = scratch.data();
  flow.elementSize = elementSize(dtype);
  for (int i = 0; i < n; ++i) {
    flow.chunkOffset.push_back(i * chunk);
    flow.chunkBytes.push_back(chunk);
  }
  flow.steps = n - 1;
  flow.reduceSteps = n - 1;
  flow.shift = 1;
  flow.dtype = dtype;
  flow.op = op;
  flow.segmentBytes = segmentBytes;
  runRingFlow(c, flow);
  std::memcpy(output, scratch.data() + c.rank() * chunk, chunk);
}

}  // namespace ringx::algorithms
