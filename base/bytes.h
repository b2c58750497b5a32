// Byte copies for buffers that may be empty.
//
// A zero-element tensor's data pointer may be null, and memcpy/memmove with a null pointer is
// undefined behaviour even for zero bytes (UBSan reports it; an optimiser may assume the
// pointer non-null afterwards). Collectives copy user buffers of any size through this.
#pragma once

#include <cstddef>
#include <cstring>

namespace ringx {

// memmove(dst, src, bytes), doing nothing for zero bytes whatever the pointers.
inline void copyBytes(void* dst, const void* src, size_t bytes) {
  if (bytes != 0) std::memmove(dst, src, bytes);
}

}  // namespace ringx
