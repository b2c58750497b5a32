// Bytes of one element of a dtype as torch, ringx and the profilers name it ("float32",
// "BFloat16", "c10::Half", "long int", "Byte"): profiler traces and torch's Flight Recorder give
// element counts and a dtype, and the figures want bytes.
#pragma once

#include <cstdint>
#include <string_view>

namespace ringx::trace {

// 0 for a name this does not know.
int64_t dtypeBytes(std::string_view dtype);

}  // namespace ringx::trace
