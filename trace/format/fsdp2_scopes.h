// FSDP2's (torch's fully_shard) record_function scopes, by name: one reading for the two sides
// that see them, the live watch of a job (fsdp/watch/fsdp_watch.h, from torch's callbacks) and
// the reading of a torch.profiler trace of one (analysis/profiler_fsdp.h).
//
// FSDP2 wraps each phase of each FSDPParamGroup in a scope named after the phase and the
// module's path, "FSDP::pre_forward (layers.0)" ("FSDP::pre_forward" for the root module), and a
// prefetch in "FSDP::forward_prefetch for layers.1"; "FSDP::root_pre_forward" opens an iteration
// and "FSDP::root_post_backward_callback" closes it.
#pragma once

#include <string>
#include <string_view>

namespace ringx::trace {

enum class FsdpScope {
  kOther,
  kRootPreForward,
  kPreForward,
  kPostForward,
  kPreBackward,
  kPostBackwardAccumulate,
  kPostBackwardReshard,
  kPostBackwardReduce,
  kAllGather,
  kCopyOut,
  kForwardPrefetch,
  kBackwardPrefetch,
  kRootPostBackward,
  kZeroGrad,  // "Optimizer.zero_grad#...": sharded gradients let go
};

// The scope, and the unit's module path (a prefetch: its target's; "" for the root module).
// kOther for names FSDP2 does not use.
FsdpScope parseFsdpScope(std::string_view name, std::string* unit);

}  // namespace ringx::trace
