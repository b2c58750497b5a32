// What DDP and FSDP do alike when they wrap a model: check that every rank built the same one,
// and start every rank from rank 0's values.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <string>
#include <utility>
#include <vector>

namespace ringx::c10d_glue {

// Parameters or buffers with their names, in the module's order.
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// Throws on every rank when the ranks' parameters differ in count, dtype or
// shape, naming the first parameter that differs and the ranks involved; `who`
// starts the message ("ringx.ddp", "ringx.fsdp").
void verifyParameterShapes(const c10::intrusive_ptr<::c10d::ProcessGroup>& processGroup,
                           const NamedTensors& parameters, const char* who = "ringx.ddp");

// Overwrites `tensors` on every rank with rank 0's values.
void broadcastFromRankZero(const c10::intrusive_ptr<::c10d::ProcessGroup>& processGroup,
                           std::vector<at::Tensor> tensors);

}  // namespace ringx::c10d_glue
