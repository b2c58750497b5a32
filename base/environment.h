// Settings read from environment variables (RINGX_*), parsed one way everywhere.
#pragma once

#include <cstddef>
#include <cstdlib>

#include "base/error.h"

namespace ringx {

// The unsigned integer in environment variable `name` (a byte count, a number of ranks), or
// `fallback` where it is unset or empty. Anything but a plain integer of at least `minimum` is an
// error that names the variable.
inline size_t sizeFromEnvironment(const char* name, size_t fallback,
                                  unsigned long long minimum = 0) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 10);
  RINGX_CHECK(end && *end == '\0' && text[0] != '-' && value >= minimum, "ringx: ", name, "='",
              text, "' must be a plain integer of at least ", minimum, ", such as 1048576");
  return static_cast<size_t>(value);
}

}  // namespace ringx
