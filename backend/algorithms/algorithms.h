// Entry points of the collective algorithms. Each runs synchronously on the
// calling thread (the group's communication thread) over a Collective, and is
// written against the transport interface only. One file per algorithm; the
// file opens with how the algorithm works.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/algorithms/collective.h"
#include "base/types.h"

namespace ringx::algorithms {

// Knobs shared by the algorithms (see tuning notes in the files).
struct Tuning {
  // Pipelining unit of the ring and chain algorithms.
  size_t segmentBytes = 1 << 20;
  // Allreduce switches from the direct exchange to the ring above this size.
  size_t directAllreduceMaxBytes = 32 << 10;
  // Broadcast switches from the root sending to everyone to the chain above this size.
  size_t directBroadcastMaxBytes = 64 << 10;
  // The direct (all-to-all) forms of small allreduce, small broadcast and barrier serve groups
  // up to this many ranks; larger groups use recursive doubling, a binomial tree and the
  // dissemination barrier, whose rounds and peers per rank grow as log2(n), not n.
  int directMaxRanks = 8;
  // Whether allreduce takes its hierarchical form (hierarchical_allreduce.cc). kAuto: when the
  // group spans more than one host, has more than directMaxRanks ranks and more than one rank
  // on some host. kOn: always (any layout; tests use it on one host and on one rank per host).
  enum class Hierarchy : uint8_t { kAuto, kOn, kOff };
  Hierarchy hierarchical = Hierarchy::kAuto;
};

// data[count] of `dtype`, reduced in place on every rank: hierarchical across hosts when
// tuning.hierarchical says so for this group's layout, else flatAllreduce.
//
// `divideBy` (not 0): the result is divided by it, AVG's division (a dtype for which
// reduce::dividesInPlace holds). The algorithms divide each piece of the result where it is
// completed, while it is in the cache (the ring: in its last reducing step, before the piece
// travels on), so AVG costs no second pass over the buffer.
void allreduce(Collective& c, void* data, size_t count, DataType dtype, ReduceOp op,
               const Tuning& tuning, double divideBy = 0);
// The same over every rank alike: direct or recursive doubling for small buffers, else the ring.
void flatAllreduce(Collective& c, void* data, size_t count, DataType dtype, ReduceOp op,
                   const Tuning& tuning, double divideBy = 0);
// Reduce within each host to its leader, allreduce among the leaders, broadcast within hosts.
void hierarchicalAllreduce(Collective& c, void* data, size_t count, DataType dtype, ReduceOp op,
                           const Tuning& tuning, double divideBy = 0);
// Whether allreduce() takes the hierarchical form on `c` (tuning.hierarchical and the layout).
bool useHierarchy(const Collective& c, const Tuning& tuning);
void ringAllreduce(Collective& c, void* data, size_t count, DataType dtype, ReduceOp op,
                   size_t segmentBytes, double divideBy = 0);
void directAllreduce(Collective& c, void* data, size_t count, DataType dtype, ReduceOp op);
void recursiveDoublingAllreduce(Collective& c, void* data, size_t count, DataType dtype,
                                ReduceOp op);

// input[size * countPerRank] reduced; rank r gets elements [r*countPerRank, (r+1)*countPerRank),
// divided by `divideBy` when it is not 0 (as allreduce's, in the last reducing step).
void ringReduceScatter(Collective& c, const void* input, void* output, size_t countPerRank,
                       DataType dtype, ReduceOp op, size_t segmentBytes, double divideBy = 0);
// The same with rank r's input block at inputs[r] (any addresses).
void ringReduceScatter(Collective& c, const std::vector<const void*>& inputs, void* output,
                       size_t countPerRank, DataType dtype, ReduceOp op, size_t segmentBytes,
                       double divideBy = 0);

// Every rank contributes `bytes` from input; output[size * bytes] holds rank r's at r*bytes.
void ringAllgather(Collective& c, const void* input, void* output, size_t bytes,
                   size_t segmentBytes);
// The same with rank r's block going to outputs[r] (any addresses).
void ringAllgatherInto(Collective& c, const void* input, const std::vector<void*>& outputs,
                       size_t bytes, size_t segmentBytes);

// data[bytes] of root copied to every rank: hierarchical across hosts when tuning.hierarchical
// says so for this group's layout (small buffers only, unless kOn), else flatBroadcast.
void broadcast(Collective& c, void* data, size_t bytes, int root, const Tuning& tuning);
// The same over every rank alike: for small buffers directly (few ranks) or down a binomial
// tree (many), else along a chain.
void flatBroadcast(Collective& c, void* data, size_t bytes, int root, const Tuning& tuning);
// Within the root's host, among the hosts' leaders, then within every other host.
void hierarchicalBroadcast(Collective& c, void* data, size_t bytes, int root, const Tuning& tuning);
void directBroadcast(Collective& c, void* data, size_t bytes, int root);
void binomialBroadcast(Collective& c, void* data, size_t bytes, int root);
// data[bytes] of root copied to every rank, pipelined along a chain.
void chainBroadcast(Collective& c, void* data, size_t bytes, int root, size_t segmentBytes);

// data[count] reduced into root's data; other ranks' data is left unchanged: directly for
// small buffers on few ranks, else along a chain.
void reduce(Collective& c, void* data, size_t count, DataType dtype, ReduceOp op, int root,
            const Tuning& tuning);
void directReduce(Collective& c, void* data, size_t count, DataType dtype, ReduceOp op, int root);
void chainReduce(Collective& c, void* data, size_t count, DataType dtype, ReduceOp op, int root,
                 size_t segmentBytes);

// Root receives every rank's `bytes` into output[size * bytes] (output used on root only).
void gather(Collective& c, const void* input, void* output, size_t bytes, int root);
// Root sends input[r*bytes, (r+1)*bytes) to rank r (input used on root only).
void scatter(Collective& c, const void* input, void* output, size_t bytes, int root);

// Rank r sends sendBytes[p] from input at sendOffsets[p] to each p, and receives
// recvBytes[p] into output at recvOffsets[p].
void alltoall(Collective& c, const void* input, const std::vector<size_t>& sendOffsets,
              const std::vector<size_t>& sendBytes, void* output,
              const std::vector<size_t>& recvOffsets, const std::vector<size_t>& recvBytes);

// Returns once every rank of the group has entered the barrier.
void barrier(Collective& c, const Tuning& tuning = Tuning());

}  // namespace ringx::algorithms
