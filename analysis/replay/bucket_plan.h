// Bucket assignment for the DDP engine: which parameters share one flat gradient
// buffer, and so one allreduce.
//
// DDP launches one allreduce per bucket as soon as all of that bucket's gradients
// exist. Gradients appear during backward roughly in the reverse of the order the
// parameters were registered (the last layer's first), so the first plan walks
// the parameters in reverse registration order. Each (dtype, device) pair has its
// own open bucket, because a flat buffer holds one dtype on one device. A bucket
// is closed once it holds at least its size limit: the first bucket of each
// (dtype, device) is kept small (1 MiB by default) so that communication starts
// early in backward, the others are capped at bucket_cap_mb (25 MiB by default),
// which amortises the per-collective latency.
//
// After the first iteration the engine knows the order in which gradients really
// became ready and rebuilds the buckets in that order (rank 0's order, so that
// every rank builds the same buckets). The same function does both: it is given
// the order to walk.
//
// Nothing here depends on torch or on traces: the engine plans its buckets with it, and the
// replay (ddp_replay.h) plans the buckets of a what-if the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ringx::replay {

// What bucketing needs to know of one parameter.
struct ParamLayout {
  int64_t bytes = 0;
  // Parameters of different groups never share a bucket (dtype and device, as text:
  // "float32@cpu").
  std::string group;
};

struct BucketLimits {
  int64_t firstBucketBytes = 1 << 20;
  int64_t bucketBytes = 25 << 20;
};

// The limits of bucket_cap_mb = capBytes / 2^20: the first bucket is 1 MiB, or the cap when
// that is smaller (torch's DDP's rule).
inline BucketLimits limitsForCap(int64_t capBytes) {
  capBytes = capBytes < 1 ? 1 : capBytes;
  return {capBytes < (int64_t{1} << 20) ? capBytes : int64_t{1} << 20, capBytes};
}

// The limits a what-if change asks of a recorded plan: a cap by the rule above, then a first
// bucket of its own where one is given (at least a byte).
inline BucketLimits changedLimits(const BucketLimits& recorded, std::optional<int64_t> capBytes,
                                  std::optional<int64_t> firstBucketBytes) {
  BucketLimits out = capBytes ? limitsForCap(*capBytes) : recorded;
  if (firstBucketBytes) out.firstBucketBytes = *firstBucketBytes < 1 ? 1 : *firstBucketBytes;
  return out;
}

// One bucket: the parameter indices it holds, in the order they are laid out in
// the flat buffer.
struct BucketSpec {
  std::vector<size_t> params;
  int64_t bytes = 0;
  std::string group;
};

// Assigns parameters to buckets, visiting them in `order` (indices into `params`;
// every index exactly once). Buckets come out ordered by the position of their
// first parameter in `order`, which is the order they are launched in.
// Throws std::invalid_argument when `order` is not a permutation of the indices.
std::vector<BucketSpec> assignBuckets(const std::vector<ParamLayout>& params,
                                      const std::vector<size_t>& order, const BucketLimits& limits);

// The first plan's order: the parameters in reverse registration order.
std::vector<size_t> reverseOrder(size_t count);

// The order for a rebuild: `readyOrder` (the parameters whose gradients became
// ready, first to last; duplicates ignored) followed by every parameter that was
// not seen, in reverse registration order.
std::vector<size_t> completeOrder(const std::vector<size_t>& readyOrder, size_t count);

}  // namespace ringx::replay
