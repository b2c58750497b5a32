// The ring machinery shared by allreduce, reduce-scatter and all-gather.
//
// Ranks form a ring: rank r sends to r+1 and receives from r-1. The buffer is
// cut into one chunk per rank; at ring step u, rank r sends chunk (r - u - shift)
// and receives chunk (r - u - 1 - shift), so after n-1 steps every chunk has
// visited every rank once. During the first `reduceSteps` steps a received chunk
// is reduced into the local one (reduce-scatter); after that it simply replaces
// it (all-gather). Allreduce is n-1 reducing steps followed by n-1 copying ones.
//
// Pipelining: each chunk is cut into K segments (about segmentBytes each), and a
// segment is forwarded to the next rank as soon as it has been received and
// reduced, without waiting for the rest of its chunk. Two receives are always
// posted ahead, so while one segment is being reduced the next one is already
// streaming in (and the kernel's socket buffers or the shared-memory ring keep
// the link busy). Received segments are reduced in place as they arrive
// (Pair::postRecvReduce), with no staging buffer.
//
// Variable names follow this text: n ranks, chunk c, step u, segment j of K.
#pragma once

#include <cstddef>
#include <vector>

#include "backend/algorithms/collective.h"

namespace ringx::algorithms {

struct RingFlow {
  std::vector<char*> chunkData;  // where each rank's chunk lives (need not be adjacent)
  // Optional read-only inputs: chunk c starts from chunkInput[c] and its reduced
  // value is written to chunkData[c], so inputs are never copied or modified.
  std::vector<const char*> chunkInput;
  std::vector<size_t> chunkBytes;  // bytes, multiples of the element size
  size_t elementSize = 1;
  int steps = 0;        // ring steps to run
  int reduceSteps = 0;  // the first reduceSteps steps reduce, the rest copy
  int shift = 0;        // rank r sends chunk (r - u - shift) at step u
  DataType dtype = DataType::kUInt8;
  ReduceOp op = ReduceOp::kSum;
  size_t segmentBytes = 1 << 20;
  // Not 0: the last reducing step divides each segment it completes by this (AVG).
  double divideBy = 0;
};

// Splits `count` elements at `data` into n chunks whose sizes differ by at most
// one element.
void splitEvenly(char* data, size_t count, size_t elementSize, int n, std::vector<char*>* chunks,
                 std::vector<size_t>* bytes);

void runRingFlow(Collective& c, const RingFlow& flow);

}  // namespace ringx::algorithms
