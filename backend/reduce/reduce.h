// Element-wise reduction kernels, one per (ReduceOp, DataType) pair.
//
// These are the only place where ringx touches element values. They are plain
// loops written so that the compiler vectorises them (contiguous, restrict-free
// aliasing rules spelled out below); float16 and bfloat16 are widened to float,
// combined, and rounded back to nearest-even, exactly as at::Half/at::BFloat16
// arithmetic does, so results match torch's own backends bit for bit.
//
// Every rank must produce bit-identical results. The kernels are deterministic
// and symmetric for a given operand order; the algorithms fix that order.
#pragma once

#include <cstddef>

#include "base/types.h"

namespace ringx::reduce {

// dst[i] = op(dst[i], src[i]) for i in [0, count). dst and src must not overlap
// unless they are the same pointer.
void reduceInPlace(ReduceOp op, DataType type, void* dst, const void* src, size_t count);

// out[i] = op(a[i], b[i]). `out` may be the same pointer as `a` or `b`.
void reduce(ReduceOp op, DataType type, void* out, const void* a, const void* b, size_t count);

// Throws InvalidArgument naming the op and dtype when the pair is not defined
// (for example MIN on complex numbers, or BXOR on floats).
void checkSupported(ReduceOp op, DataType type);

}  // namespace ringx::reduce
