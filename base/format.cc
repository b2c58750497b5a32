#include "base/format.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "base/text.h"

namespace ringx {

std::string formatDuration(int64_t ns) {
  if (ns < 0) return "-" + formatDuration(-ns);
  // Each unit up to where its rounding would print 1000 of it.
  char buffer[48];
  if (ns < 1000) {
    std::snprintf(buffer, sizeof(buffer), "%" PRId64 " ns", ns);
  } else if (ns < 999950) {
    std::snprintf(buffer, sizeof(buffer), "%.1f us", static_cast<double>(ns) / 1e3);
  } else if (ns < 999995000) {
    std::snprintf(buffer, sizeof(buffer), "%.2f ms", static_cast<double>(ns) / 1e6);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%.2f s", static_cast<double>(ns) / 1e9);
  }
  return buffer;
}

std::string formatSignedDuration(int64_t ns) {
  return ns < 0 ? formatDuration(ns) : "+" + formatDuration(ns);
}

std::string formatBytes(int64_t bytes) {
  char buffer[48];
  const double b = static_cast<double>(bytes);
  if (bytes < 1024) {
    std::snprintf(buffer, sizeof(buffer), "%" PRId64 " B", bytes);
  } else if (bytes < (1ll << 20)) {
    std::snprintf(buffer, sizeof(buffer), "%.1f KiB", b / 1024);
  } else if (bytes < (1ll << 30)) {
    std::snprintf(buffer, sizeof(buffer), "%.2f MiB", b / (1 << 20));
  } else {
    std::snprintf(buffer, sizeof(buffer), "%.2f GiB", b / (1 << 30));
  }
  return buffer;
}

std::string rankList(const std::vector<int32_t>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;  // the run ranks[i..j] of consecutive ranks
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += i ? ", " : "";
    if (j >= i + 2) {
      out += std::to_string(ranks[i]) + "-" + std::to_string(ranks[j]);
      i = j + 1;
    } else {
      out += std::to_string(ranks[i]);
      ++i;
    }
  }
  return out;
}

bool parseRankList(std::string_view text, std::vector<int32_t>* ranks, std::string* error) {
  const std::string_view original = text;
  auto fail = [&](const std::string& why) {
    *error = "bad rank list '" + std::string(original) + "': " + why +
             " (expected ranks and ranges such as 0-7,9,12-15)";
    return false;
  };
  for (std::string_view prefix : {"ranks", "rank"}) {
    if (startsWith(text, prefix)) {
      text.remove_prefix(prefix.size());
      break;
    }
  }
  ranks->clear();
  size_t i = 0;
  auto skipSpaces = [&] {
    while (i < text.size() && text[i] == ' ') ++i;
  };
  auto number = [&](int64_t* out) {
    skipSpaces();
    const size_t start = i;
    int64_t v = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9' && v <= (1 << 24))
      v = v * 10 + (text[i++] - '0');
    skipSpaces();
    *out = v;
    return i > start && v <= (1 << 24);
  };
  while (true) {
    int64_t first = 0, last = 0;
    if (!number(&first)) return fail("a rank is missing or too large");
    last = first;
    if (i < text.size() && text[i] == '-') {
      ++i;
      if (!number(&last)) return fail("a range has no end");
      if (last < first) return fail("a range runs backwards");
    }
    for (int64_t r = first; r <= last; ++r) ranks->push_back(static_cast<int32_t>(r));
    if (i == text.size()) break;
    if (text[i] != ',') return fail(std::string("unexpected '") + text[i] + "'");
    ++i;
  }
  std::sort(ranks->begin(), ranks->end());
  ranks->erase(std::unique(ranks->begin(), ranks->end()), ranks->end());
  return true;
}
}  // namespace ringx
