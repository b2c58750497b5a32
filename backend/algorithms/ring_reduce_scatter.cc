// Ring reduce-scatter: the first half of ring allreduce on its own.
//
// The input holds n equal chunks; after n-1 reducing steps rank r owns the fully
// reduced chunk r (shift = 1 in ring.h's numbering makes the ring end there).
// ringReduceScatter leaves its input untouched (the ring runs in a scratch
// copy); ringReduceScatterInPlace works in a buffer the caller gives up.
#include <cstring>
#include <vector>

#include "backend/algorithms/algorithms.h"
#include "backend/algorithms/ring.h"

namespace ringx::algorithms {

void ringReduceScatter(Collective& c, const void* input, void* output, size_t countPerRank,
                       DataType dtype, ReduceOp op, size_t segmentBytes) {
  const size_t bytes = countPerRank * elementSize(dtype) * c.size();
  char* scratch = c.scratch(bytes);
  std::memcpy(scratch, input, bytes);
  ringReduceScatterInPlace(c, scratch, output, countPerRank, dtype, op, segmentBytes);
}

void ringReduceScatterInPlace(Collective& c, void* data, void* output, size_t countPerRank,
                              DataType dtype, ReduceOp op, size_t segmentBytes) {
  const int n = c.size();
  const size_t chunk = countPerRank * elementSize(dtype);
  char* buffer = static_cast<char*>(data);
  RingFlow flow;
  flow.elementSize = elementSize(dtype);
  for (int i = 0; i < n; ++i) {
    flow.chunkData.push_back(buffer + i * chunk);
    flow.chunkBytes.push_back(chunk);
  }
  flow.steps = n - 1;
  flow.reduceSteps = n - 1;
  flow.shift = 1;
  flow.dtype = dtype;
  flow.op = op;
  flow.segmentBytes = segmentBytes;
  runRingFlow(c, flow);
  std::memcpy(output, buffer + c.rank() * chunk, chunk);
}

}  // namespace ringx::algorithms
