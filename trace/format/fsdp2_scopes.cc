#include "trace/format/fsdp2_scopes.h"

#include <utility>

namespace ringx::trace {

FsdpScope parseFsdpScope(std::string_view name, std::string* unit) {
  unit->clear();
  if (name.substr(0, 19) == "Optimizer.zero_grad") return FsdpScope::kZeroGrad;
  if (name.substr(0, 6) != "FSDP::") return FsdpScope::kOther;
  std::string_view text = name.substr(6);
  for (auto [prefix, scope] : {std::pair<std::string_view, FsdpScope>{"forward_prefetch for ",
                                                                      FsdpScope::kForwardPrefetch},
                               std::pair<std::string_view, FsdpScope>{
                                   "backward_prefetch for ", FsdpScope::kBackwardPrefetch}}) {
    if (text.substr(0, prefix.size()) == prefix) {
      *unit = std::string(text.substr(prefix.size()));
      return scope;
    }
  }
  // "label" or "label (module.path)"
  std::string_view label = text;
  const size_t open = text.find(" (");
  if (open != std::string_view::npos && !text.empty() && text.back() == ')') {
    label = text.substr(0, open);
    *unit = std::string(text.substr(open + 2, text.size() - open - 3));
  }
  static constexpr std::pair<std::string_view, FsdpScope> kLabels[] = {
      {"root_pre_forward", FsdpScope::kRootPreForward},
      {"pre_forward", FsdpScope::kPreForward},
      {"post_forward", FsdpScope::kPostForward},
      {"pre_backward", FsdpScope::kPreBackward},
      {"post_backward_accumulate", FsdpScope::kPostBackwardAccumulate},
      {"post_backward_reshard", FsdpScope::kPostBackwardReshard},
      {"post_backward_reduce", FsdpScope::kPostBackwardReduce},
      {"all_gather", FsdpScope::kAllGather},
      {"all_gather_copy_out", FsdpScope::kCopyOut},
      {"root_post_backward_callback", FsdpScope::kRootPostBackward},
  };
  for (const auto& [known, scope] : kLabels) {
    if (label == known) return scope;
  }
  return FsdpScope::kOther;
}

}  // namespace ringx::trace
