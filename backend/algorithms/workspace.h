// Scratch memory that outlives one collective.
//
// Large collectives need scratch the size of their buffer. Allocating it per
// call costs more than the collective itself: the allocator returns big blocks
// to the kernel, so every call faults in (and zero-fills) fresh pages. A group
// keeps one Workspace and its algorithms borrow from it; it only grows, and its
// memory is left uninitialised.
#pragma once

#include <cstddef>
#include <memory>

namespace ringx::algorithms {

class Workspace {
 public:
  // A buffer of at least `bytes` for slot `slot` (0 or 1: two can be in use at once).
  // Valid until the next call with the same slot and a larger size.
  char* get(size_t bytes, int slot = 0) {
    Slot& s = slots_[slot];
    if (bytes > s.capacity) {
      s.data.reset(new char[bytes]);
      s.capacity = bytes;
    }
    return s.data.get();
  }

 private:
  struct Slot {
    std::unique_ptr<char[]> data;
    size_t capacity = 0;
  };
  Slot slots_[2];
};

}  // namespace ringx::algorithms
