// Small string helpers C++17 lacks (std::string_view::starts_with is C++20).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace ringx {

inline bool startsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// Whether `text` contains `needle`, ASCII letters compared without case ("" is in every text).
inline bool containsIgnoringCase(std::string_view text, std::string_view needle) {
  auto fold = [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; };
  if (needle.size() > text.size()) return false;
  for (size_t i = 0; i + needle.size() <= text.size(); ++i) {
    size_t k = 0;
    while (k < needle.size() && fold(text[i + k]) == fold(needle[k])) ++k;
    if (k == needle.size()) return true;
  }
  return false;
}

// The non-negative integers written in `text`, in order: "[0, 1, 2]" -> 0, 1, 2 (lists that other
// tools write as text: a process group's ranks, a tensor's dims).
inline std::vector<int64_t> integersIn(std::string_view text) {
  std::vector<int64_t> out;
  int64_t value = 0;
  bool digits = false;
  for (char c : text) {
    if (c >= '0' && c <= '9') {
      value = value * 10 + (c - '0');
      digits = true;
    } else if (digits) {
      out.push_back(value);
      value = 0;
      digits = false;
    }
  }
  if (digits) out.push_back(value);
  return out;
}

// The numbers of a JSON list of lists as text, as profiler traces write a tensor's dims
// ("[[394241]]", "[[[131584]], []]", "[0, 1, 2]"): the first innermost list, or the list itself
// when flat.
inline std::vector<int64_t> firstIntegerList(std::string_view text) {
  const size_t open = text.find_first_not_of('[', text.find('['));
  if (open == std::string_view::npos) return {};
  return integersIn(text.substr(open, text.find(']', open) - open));
}

// The first string of a JSON list as text ("[\"float\", \"\"]" -> float).
inline std::string_view firstQuoted(std::string_view text) {
  const size_t open = text.find('"');
  if (open == std::string_view::npos) return {};
  const size_t close = text.find('"', open + 1);
  return close == std::string_view::npos ? std::string_view{}
                                         : text.substr(open + 1, close - open - 1);
}

}  // namespace ringx
