// Reductions on the GPU, enqueued on a CUDA stream: out[i] = op(a[i], b[i]) for every
// (ReduceOp, DataType) the CPU kernels support, and the scaling that AVG and PREMUL_SUM apply
// to a result. The element functions are the CPU kernels' own (backend/reduce/element_ops.h),
// so a GPU reduction gives the same bits as a CPU one.
//
// No CUDA header here: a stream is passed as its cudaStream_t value (nullptr = the legacy
// default stream), so that code without CUDA can include this header.
#pragma once

#include <cstddef>
#include <string>

#include "base/types.h"

namespace ringx::cuda {

// Enqueues out[i] = op(a[i], b[i]) for i < count on `stream`. The pointers are device memory
// the current device can access (its own, or a peer's with peer access on). `out` may be `a`
// or `b`; otherwise it must not overlap them. Throws InvalidArgument for a pair that is not
// defined and Error for a failed launch.
void reduce(ReduceOp op, DataType type, void* out, const void* a, const void* b, size_t count,
            void* stream);

// Enqueues data[i] = data[i] / divisor (AVG) or data[i] * factor (PREMUL_SUM), in the element
// type's arithmetic as torch's div_/mul_ do it (float for float32/float16/bfloat16, double for
// float64; complex types scale both parts). Floating and complex types only.
void divide(DataType type, void* data, double divisor, size_t count, void* stream);
void multiply(DataType type, void* data, double factor, size_t count, void* stream);

// Whether a CUDA device can be used by this process; when not, `why` says why ("no CUDA
// device", or the driver's error).
bool deviceAvailable(std::string* why = nullptr);

}  // namespace ringx::cuda
