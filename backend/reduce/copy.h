// Copies for buffers larger than the last-level cache.
//
// A plain memcpy into a cold destination first reads every destination line
// into the cache (read-for-ownership) and then evicts it again: for a 256 MiB
// all-gather that is a third of all memory traffic spent on bytes nobody reads.
// Non-temporal (streaming) stores write around the cache instead. They only pay
// off when the destination will not be read again soon, which is why the
// algorithms use them just for the final placement of buffers that do not fit
// in the cache anyway (glibc's memcpy applies the same rule, but per call, and
// the ring copies in segments far smaller than the whole buffer).
#pragma once

#include <cstddef>

namespace ringx::reduce {

// memcpy with streaming stores (the destination is not left in the cache).
// Any alignment and size; dst and src must not overlap.
void copyStreaming(void* dst, const void* src, size_t bytes);

// Collectives whose buffer is at least this large place their final results
// with streaming stores: the last-level cache size reported by the system
// (32 MiB when unknown), or RINGX_STREAMING_MIN_BYTES when set (read at every
// call, so tests can lower it).
size_t streamingMinBytes();

}  // namespace ringx::reduce
