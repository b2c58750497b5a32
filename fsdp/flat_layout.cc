#include "fsdp/flat_layout.h"

#include <stdexcept>
#include <string>

namespace ringx::fsdp {

FlatLayout planFlatLayout(const std::vector<int64_t>& numels, int shardFactor) {
  if (shardFactor < 1) {
    throw std::invalid_argument("ringx.fsdp: the sharding factor must be at least 1, got " +
                                std::to_string(shardFactor));
  }
  FlatLayout layout;
  layout.shardFactor = shardFactor;
  layout.numels = numels;
  layout.offsets.reserve(numels.size());
  for (size_t i = 0; i < numels.size(); ++i) {
    if (numels[i] < 0) {
      throw std::invalid_argument("ringx.fsdp: parameter " + std::to_string(i) +
                                  " has a negative element count");
    }
    layout.offsets.push_back(layout.totalNumel);
    layout.totalNumel += numels[i];
  }
  // Round up so that every rank's shard has the same size; an empty unit still
  // gets one element per rank so that its collectives are well formed.
  const int64_t atLeastOne = layout.totalNumel > 0 ? layout.totalNumel : 1;
  layout.paddedNumel = (atLeastOne + shardFactor - 1) / shardFactor * shardFactor;
  layout.shardNumel = layout.paddedNumel / shardFactor;
  return layout;
}

}  // namespace ringx::fsdp
