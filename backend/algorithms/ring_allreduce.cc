// Ring allreduce = ring reduce-scatter followed by ring all-gather.
//
// The buffer of `count` elements is cut into n chunks (sizes differ by at most
// one element, so any count works, including 0 and counts smaller than n).
// During n-1 reducing steps each chunk travels around the ring collecting every
// rank's contribution; rank r ends up owning the fully reduced chunk r+1. During
// n-1 copying steps the reduced chunks travel around once more so that every
// rank has all of them. Each rank sends and receives 2(n-1)/n of the buffer,
// which is optimal for bandwidth; the segment pipelining lives in ring.cc.
//
// Every chunk is reduced in the same order on its way around the ring and then
// copied verbatim, so all ranks end with bit-identical results.
#include "backend/algorithms/algorithms.h"
#include "backend/algorithms/ring.h"
#include "backend/reduce/reduce.h"
#include "base/error.h"

namespace ringx::algorithms {

void ringAllreduce(Collective& c, void* data, size_t count, DataType dtype, ReduceOp op,
                   size_t segmentBytes, double divideBy) {
  const int n = c.size();
  RingFlow flow;
  flow.elementSize = elementSize(dtype);
  splitEvenly(static_cast<char*>(data), count, flow.elementSize, n, &flow.chunkData,
              &flow.chunkBytes);
  flow.steps = 2 * (n - 1);
  flow.reduceSteps = n - 1;
  flow.shift = 0;
  flow.dtype = dtype;
  flow.op = op;
  flow.segmentBytes = segmentBytes;
  flow.divideBy = divideBy;
  runRingFlow(c, flow);
}

void flatAllreduce(Collective& c, void* data, size_t count, DataType dtype, ReduceOp op,
                   const Tuning& tuning, double divideBy) {
  if (c.size() == 1) {
    if (divideBy != 0) reduce::divide(dtype, data, divideBy, count);
    return;
  }
  // Small buffers: one round of messages (few ranks) or log2(n) rounds (many) beat 2(n-1)
  // ring steps.
  if (count * elementSize(dtype) <= tuning.directAllreduceMaxBytes) {
    if (c.size() <= tuning.directMaxRanks) {
      directAllreduce(c, data, count, dtype, op);
    } else {
      recursiveDoublingAllreduce(c, data, count, dtype, op);
    }
    // The buffer is small and was just combined: dividing it now reads it from the cache.
    if (divideBy != 0) reduce::divide(dtype, data, divideBy, count);
  } else {
    ringAllreduce(c, data, count, dtype, op, tuning.segmentBytes, divideBy);
  }
}

}  // namespace ringx::algorithms
