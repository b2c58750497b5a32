// Small string helpers C++17 lacks (std::string_view::starts_with is C++20).
#pragma once

#include <string_view>

namespace ringx {

inline bool startsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

}  // namespace ringx
