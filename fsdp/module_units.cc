// Finding the units of a libtorch module tree (fully_sharded_data_parallel.h).
#include <unordered_set>

#include "fsdp/fully_sharded_data_parallel.h"

namespace ringx::fsdp::detail {
namespace {

constexpr const char* kWrapped = "_fsdp_wrapped_module";

// The parameters under `module` that no nested Sharded<> owns (first occurrence
// of each), and the Sharded<> modules met on the way.
void collect(torch::nn::Module& module, const std::string& prefix, NamedTensors* params,
             std::unordered_set<const c10::TensorImpl*>* seen,
             std::vector<std::pair<std::string, ShardedBase*>>* found) {
  for (const auto& item : module.named_parameters(/*recurse=*/false)) {
    if (seen->insert(item.value().unsafeGetTensorImpl()).second) {
      params->emplace_back(cleanName(prefix + item.key()), item.value());
    }
  }
  for (const auto& child : module.named_children()) {
    if (auto* sharded = dynamic_cast<ShardedBase*>(child.value().get())) {
      found->emplace_back(prefix + child.key(), sharded);
      continue;
    }
    collect(*child.value(), prefix + child.key() + ".", params, seen, found);
  }
}

}  // namespace

std::string cleanName(const std::string& name) {
  std::string out;
  size_t start = 0;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string::npos) dot = name.size();
    const std::string part = name.substr(start, dot - start);
    if (part != kWrapped) {
      if (!out.empty()) out += '.';
      out += part;
    }
    start = dot + 1;
  }
  return out;
}

std::vector<std::shared_ptr<Unit>> buildUnits(torch::nn::Module& root, const Groups& groups,
                                              const Options& options,
                                              std::vector<ShardedBase*>* nested) {
  std::vector<std::shared_ptr<Unit>> units;
  std::unordered_set<const c10::TensorImpl*> seen;
  std::vector<std::pair<std::string, ShardedBase*>> queue;
  NamedTensors rootParams;
  collect(root, "", &rootParams, &seen, &queue);
  units.push_back(Unit::create("", rootParams, groups, options));
  for (size_t i = 0; i < queue.size(); ++i) {  // grows as nested units are found
    const auto [path, sharded] = queue[i];
    NamedTensors params;
    collect(*sharded, path + ".", &params, &seen, &queue);
    units.push_back(Unit::create(cleanName(path), params, groups, options));
    nested->push_back(sharded);
  }
  return units;
}

}  // namespace ringx::fsdp::detail
