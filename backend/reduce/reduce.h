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

// Whether divide() handles `type`: the real floating types, whose division it computes exactly
// as torch's Tensor.div_(int) does (float16 and bfloat16 in float, then rounded), so that an
// AVG whose division is fused into the collective matches a SUM divided by torch bit for bit.
// Complex types are not among them: torch divides those by a real through a reciprocal.
bool dividesInPlace(DataType type);

// data[i] = data[i] / divisor for i in [0, count) (divisor rounded to the element's arithmetic
// type first, as torch does with a Scalar); `type` must satisfy dividesInPlace.
void divide(DataType type, void* data, double divisor, size_t count);

// reduce(op, ...) and then divide(out, divisor), in blocks that stay in the L1 cache between
// the two, so that the division costs no pass over memory of its own. Bits as the two calls.
void reduceDivided(ReduceOp op, DataType type, void* out, const void* a, const void* b,
                   size_t count, double divisor);

// Throws InvalidArgument naming the op and dtype when the pair is not defined
// (for example MIN on complex numbers, or BXOR on floats).
void checkSupported(ReduceOp op, DataType type);

}  // namespace ringx::reduce
