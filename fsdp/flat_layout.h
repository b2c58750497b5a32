// How one FSDP unit's parameters become one flat buffer and S equal shards.
//
// The FSDP paper's "flatten-concat-chunk": the unit's parameters are flattened
// and concatenated in registration order, padded on the right to a multiple of
// the sharding factor S (at most S-1 elements of padding), and cut into S equal
// chunks; rank r of the shard group keeps chunk r. Because every shard has the
// same size, the unsharded buffer is exactly the output of one all_gather_base
// and the flat gradient exactly the input of one reduce_scatter_base: no copies
// around the collectives.
//
// No torch here: the layout is tested with gtest (tests/cpp/fsdp_layout_test.cc).
#pragma once

#include <cstdint>
#include <vector>

namespace ringx::fsdp {

struct FlatLayout {
  std::vector<int64_t> numels;   // per parameter
  std::vector<int64_t> offsets;  // per parameter, into the unsharded flat buffer
  int64_t totalNumel = 0;        // sum of numels
  int64_t paddedNumel = 0;       // totalNumel rounded up to a multiple of shardFactor
  int64_t shardNumel = 0;        // paddedNumel / shardFactor
  int shardFactor = 1;

  // The elements of the flat buffer that shard `shardIndex` holds: [begin, end).
  int64_t shardBegin(int shardIndex) const { return shardIndex * shardNumel; }
  int64_t shardEnd(int shardIndex) const { return (shardIndex + 1) * shardNumel; }
  int64_t padding() const { return paddedNumel - totalNumel; }
};

// Throws std::invalid_argument when shardFactor < 1 or a numel is negative.
FlatLayout planFlatLayout(const std::vector<int64_t>& numels, int shardFactor);

}  // namespace ringx::fsdp
