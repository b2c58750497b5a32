// Ring reduce-scatter: the first half of ring allreduce on its own.
//
// The input holds n equal chunks; after n-1 reducing steps rank r owns the fully
// reduced chunk r (shift = 1 in ring.h's numbering makes the ring end there).
// The inputs are read, never written or copied: each reducing step combines
// the caller's chunk with the incoming partial sum into scratch (or, for the
// rank's own chunk, straight into the output).
#include <cstring>
#include <vector>

#include "backend/algorithms/algorithms.h"
#include "backend/algorithms/ring.h"
#include "backend/reduce/reduce.h"
#include "base/bytes.h"

namespace ringx::algorithms {

void ringReduceScatter(Collective& c, const void* input, void* output, size_t countPerRank,
                       DataType dtype, ReduceOp op, size_t segmentBytes, double divideBy) {
  const size_t chunk = countPerRank * elementSize(dtype);
  std::vector<const void*> inputs;
  for (int i = 0; i < c.size(); ++i) inputs.push_back(static_cast<const char*>(input) + i * chunk);
  ringReduceScatter(c, inputs, output, countPerRank, dtype, op, segmentBytes, divideBy);
}

void ringReduceScatter(Collective& c, const std::vector<const void*>& inputs, void* output,
                       size_t countPerRank, DataType dtype, ReduceOp op, size_t segmentBytes,
                       double divideBy) {
  const int n = c.size();
  const size_t chunk = countPerRank * elementSize(dtype);
  if (n == 1) {
    copyBytes(output, inputs[0], chunk);
    if (divideBy != 0) reduce::divide(dtype, output, divideBy, countPerRank);
    return;
  }
  // Partial sums of the chunks passing through go to scratch; our own chunk's
  // final sum goes straight to the output.
  char* scratch = c.scratch(chunk * n);
  RingFlow flow;
  flow.elementSize = elementSize(dtype);
  for (int i = 0; i < n; ++i) {
    flow.chunkData.push_back(i == c.rank() ? static_cast<char*>(output) : scratch + i * chunk);
    flow.chunkInput.push_back(static_cast<const char*>(inputs[i]));
    flow.chunkBytes.push_back(chunk);
  }
  flow.steps = n - 1;
  flow.reduceSteps = n - 1;
  flow.shift = 1;
  flow.dtype = dtype;
  flow.op = op;
  flow.segmentBytes = segmentBytes;
  flow.divideBy = divideBy;
  runRingFlow(c, flow);
}

}  // namespace ringx::algorithms
