#include "backend/reduce/copy.h"

#include <emmintrin.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace ringx::reduce {

void copyStreaming(void* dstVoid, const void* srcVoid, size_t bytes) {
  char* dst = static_cast<char*>(dstVoid);
  const char* src = static_cast<const char*>(srcVoid);
  // Streaming stores need 16-byte aligned destinations: copy the ragged head
  // normally (SSE2 is part of x86-64, so no CPU dispatch is needed).
  size_t head = (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15;
  if (head > bytes) head = bytes;
  std::memcpy(dst, src, head);
  dst += head;
  src += head;
  bytes -= head;
  size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  // Streaming stores are weakly ordered: fence so that whoever is told "done"
  // afterwards (another thread, or the peer through a release store) sees them.
  _mm_sfence();
  std::memcpy(dst + i, src + i, bytes - i);
}

size_t streamingMinBytes() {
  const char* env = std::getenv("RINGX_STREAMING_MIN_BYTES");
  if (env != nullptr && *env != '\0') {
    return static_cast<size_t>(std::strtoull(env, nullptr, 10));
  }
  static const size_t lastLevelCache = [] {
    long l3 = ::sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 <= 0) l3 = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
    return l3 > 0 ? static_cast<size_t>(l3) : size_t{32} << 20;
  }();
  return lastLevelCache;
}

}  // namespace ringx::reduce
