// Giving a container's memory back. `v = {}` does not: for std::vector and
// std::string it picks the initializer_list assignment, which empties the
// container and keeps its capacity (a rank's events cleared that way stayed
// allocated, a thousand ranks of them).
#pragma once

#include <utility>

namespace ringx {

template <typename Container>
void releaseMemory(Container& c) {
  Container().swap(c);
}

}  // namespace ringx
