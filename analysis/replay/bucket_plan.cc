#include "analysis/replay/bucket_plan.h"

#include <map>
#include <stdexcept>

namespace ringx::replay {

std::vector<size_t> reverseOrder(size_t count) {
  std::vector<size_t> order(count);
  for (size_t i = 0; i < count; ++i) order[i] = count - 1 - i;
  return order;
}

std::vector<size_t> completeOrder(const std::vector<size_t>& readyOrder, size_t count) {
  std::vector<bool> seen(count, false);
  std::vector<size_t> order;
  order.reserve(count);
  for (size_t index : readyOrder) {
    if (index < count && !seen[index]) {
      seen[index] = true;
      order.push_back(index);
    }
  }
  for (size_t index : reverseOrder(count)) {
    if (!seen[index]) order.push_back(index);
  }
  return order;
}

std::vector<BucketSpec> assignBuckets(const std::vector<ParamLayout>& params,
                                      const std::vector<size_t>& order,
                                      const BucketLimits& limits) {
  if (order.size() != params.size()) {
    throw std::invalid_argument("bucket order lists " + std::to_string(order.size()) +
                                " parameters, the model has " + std::to_string(params.size()));
  }
  std::vector<bool> seen(params.size(), false);
  for (size_t index : order) {
    if (index >= params.size() || seen[index]) {
      throw std::invalid_argument("bucket order is not a permutation of the parameter indices (" +
                                  std::to_string(index) + " repeated or out of range)");
    }
    seen[index] = true;
  }

  // The open bucket of each group, and how many buckets each group has closed.
  struct Open {
    BucketSpec bucket;
    size_t closed = 0;
    size_t firstPosition = 0;  // position in `order` of its first parameter
  };
  std::map<std::string, Open> open;
  // Closed buckets keyed by the position of their first parameter, so that the
  // result is in launch order whatever the groups interleaving.
  std::map<size_t, BucketSpec> closed;

  for (size_t position = 0; position < order.size(); ++position) {
    const size_t index = order[position];
    const ParamLayout& param = params[index];
    Open& slot = open[param.group];
    if (slot.bucket.params.empty()) {
      slot.bucket.group = param.group;
      slot.firstPosition = position;
    }
    slot.bucket.params.push_back(index);
    slot.bucket.bytes += param.bytes;
    const int64_t limit = slot.closed == 0 ? limits.firstBucketBytes : limits.bucketBytes;
    if (slot.bucket.bytes >= limit) {
      closed.emplace(slot.firstPosition, std::move(slot.bucket));
      slot.bucket = BucketSpec{};
      ++slot.closed;
    }
  }
  for (auto& [group, slot] : open) {
    if (!slot.bucket.params.empty()) closed.emplace(slot.firstPosition, std::move(slot.bucket));
  }
  std::vector<BucketSpec> buckets;
  buckets.reserve(closed.size());
  for (auto& [position, bucket] : closed) buckets.push_back(std::move(bucket));
  return buckets;
}

}  // namespace ringx::replay
