// The tokenizer of Chrome JSON ingest (chrome_reader.h): scanning the raw text, reading numbers
// and ids exactly, and saying where the text went wrong.
#include "trace/model/chrome_reader.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/error.h"
#include "base/json_text.h"

namespace ringx::model::chrome_detail {

// Errors about one value (a wrong type, a malformed number or string) that
// leave the document readable: the event is skipped, the pass goes on. Any
// other error means the text itself is broken.
void checkSoft(error_code e) {
  switch (e) {
    case simdjson::SUCCESS:
    case simdjson::INCORRECT_TYPE:
    case simdjson::NUMBER_ERROR:
    case simdjson::T_ATOM_ERROR:
    case simdjson::F_ATOM_ERROR:
    case simdjson::N_ATOM_ERROR:
    case simdjson::NUMBER_OUT_OF_RANGE:
    case simdjson::STRING_ERROR:
      return;
    default:
      throw JsonFailure{e};
  }
}

bool isSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Microseconds as written ("12", "-3.5", "1700000000000.123") -> nanoseconds,
// exactly, rounded half away from zero past the third decimal. False for text
// this does not cover (exponents, more nanoseconds than an int64 holds): the
// caller falls back to the double.
bool exactMicros(std::string_view text, int64_t* ns) {
  size_t i = 0;
  const bool negative = i < text.size() && text[i] == '-';
  if (negative) ++i;
  constexpr int64_t kMaxWhole = (std::numeric_limits<int64_t>::max() - 1000) / 1000;
  int64_t whole = 0;
  size_t digits = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    whole = whole * 10 + (text[i++] - '0');
    if (++digits > 16 || whole > kMaxWhole) return false;  // whole * 1000 must fit
  }
  if (digits == 0) return false;
  int64_t frac = 0;
  if (i < text.size() && text[i] == '.') {
    ++i;
    int place = 0;
    bool roundUp = false;
    const size_t start = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      if (place < 3) {
        frac = frac * 10 + (text[i] - '0');
      } else if (place == 3) {
        roundUp = text[i] >= '5';
      }
      ++place;
      ++i;
    }
    if (i == start) return false;
    for (; place < 3; ++place) frac *= 10;
    if (roundUp) ++frac;
  }
  while (i < text.size() && isSpace(text[i])) ++i;  // raw tokens keep trailing space
  if (i != text.size()) return false;               // an exponent, or not a number
  const int64_t value = whole * 1000 + frac;
  *ns = negative ? -value : value;
  return true;
}

// Replaces every byte that is not part of valid UTF-8 with '?', in place (the
// length, and so every byte offset, stays). Returns how many were replaced.
size_t replaceInvalidUtf8(char* data, size_t size) {
  auto* p = reinterpret_cast<unsigned char*>(data);
  size_t replaced = 0;
  for (size_t i = 0; i < size;) {
    const size_t n = utf8SequenceLength(p + i, size - i);
    if (n == 0) {
      p[i++] = '?';
      ++replaced;
    } else {
      i += n;
    }
  }
  return replaced;
}

// "rank N" or "rank N (host)", the ringx exporter's process names.
bool ringxRank(std::string_view name, int32_t* rank) {
  constexpr std::string_view kPrefix = "rank ";
  if (name.substr(0, kPrefix.size()) != kPrefix) return false;
  size_t i = kPrefix.size();
  int64_t value = 0;
  const size_t start = i;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && i - start < 9)
    value = value * 10 + (name[i++] - '0');
  if (i == start || (i < name.size() && name[i] != ' ')) return false;
  *rank = static_cast<int32_t>(value);
  return true;
}

void Reader::fail(const std::string& what) const {
  throw trace::FormatError(strCat("'", source_, "' is not a Chrome trace: ", what));
}

void Reader::failAt(size_t at, const std::string& what) const {
  const bool cutOff = at >= size_;
  fail(strCat("JSON error at byte ", std::min(at, size_), ": ", what,
              cutOff ? strCat(" (the file ends there after ", eventsSeen_,
                              " events: is it cut off? Re-export or re-record the trace)")
                     : std::string(" (a Chrome trace is a JSON object with a \"traceEvents\" "
                                   "array, or a JSON array of events)")));
}

void Reader::failJson(error_code code, size_t at) const {
  if (code == simdjson::MEMALLOC)
    throw Error(strCat("not enough memory to read '", source_, "' (", size_, " bytes)"));
  if (code == simdjson::CAPACITY)
    fail("one event is larger than the 4 GiB the JSON parser reads in one piece");
  std::string hint;
  if (code == simdjson::INCOMPLETE_ARRAY_OR_OBJECT || code == simdjson::UNCLOSED_STRING ||
      code == simdjson::TAPE_ERROR) {
    hint = strCat(" (", eventsSeen_,
                  " events were read before it; is the file cut off? "
                  "Re-export or re-record the trace)");
  } else {
    hint =
        " (a Chrome trace is a JSON object with a \"traceEvents\" array, or a JSON array of "
        "events)";
  }
  fail(strCat("JSON error", at == std::string::npos ? std::string() : strCat(" at byte ", at), ": ",
              simdjson::error_message(code), hint));
}

// Where the parser stopped in data_, or npos.
size_t Reader::offsetOf(od::document& doc) const {
  const char* at = nullptr;
  if (doc.current_location().get(at) != simdjson::SUCCESS) return std::string::npos;
  if (at < data_ || at > data_ + size_) return std::string::npos;
  return static_cast<size_t>(at - data_);
}

size_t Reader::skipSpace(size_t i) const {
  while (i < size_ && isSpace(data_[i])) ++i;
  return i;
}

// data_[i] is '"': returns the offset after the closing quote.
size_t Reader::skipString(size_t i) const {
  for (size_t from = i + 1;;) {
    const void* quote = std::memchr(data_ + from, '"', size_ - from);
    if (quote == nullptr) return npos;
    const size_t q = static_cast<size_t>(static_cast<const char*>(quote) - data_);
    size_t backslashes = 0;
    while (q - backslashes > i + 1 && data_[q - backslashes - 1] == '\\') ++backslashes;
    if (backslashes % 2 == 0) return q + 1;
    from = q + 1;
  }
}

// Skips one JSON value starting at data_[i]: strings and nesting are followed
// (with brackets matched), scalars are not checked; the chunk parser does that.
// Returns the offset after it, npos when the text ends first, kMalformed when
// there is no value at i or its brackets do not match.
size_t Reader::skipValue(size_t i) const {
  if (i >= size_) return npos;
  const char c = data_[i];
  if (c == '"') return skipString(i);
  if (c != '{' && c != '[') {
    const size_t start = i;
    while (i < size_ && !isSpace(data_[i]) && data_[i] != ',' && data_[i] != ']' &&
           data_[i] != '}' && data_[i] != ':')
      ++i;
    return i > start ? i : kMalformed;
  }
  std::string closers;  // the brackets still open, innermost last
  while (i < size_) {
    switch (data_[i]) {
      case '"':
        i = skipString(i);
        if (i == npos) return npos;
        continue;
      case '{':
        closers.push_back('}');
        break;
      case '[':
        closers.push_back(']');
        break;
      case '}':
      case ']':
        if (closers.empty() || closers.back() != data_[i]) return kMalformed;
        closers.pop_back();
        if (closers.empty()) return i + 1;
        break;
      default:
        break;
    }
    if (closers.size() > kMaxDepth) return kMalformed;
    ++i;
  }
  return npos;
}

// A likely end of a chunk at or after `from`: a comma between two events, "}"
// before it and "{" after. Only a guess (the pattern may sit in a nested array
// or a string); chunk() checks it. npos when there is none before `limit`.
size_t Reader::guessChunkEnd(size_t from, size_t limit) const {
  while (from < limit) {
    const void* brace = std::memchr(data_ + from, '}', limit - from);
    if (brace == nullptr) return npos;
    const size_t b = static_cast<size_t>(static_cast<const char*>(brace) - data_);
    const size_t comma = skipSpace(b + 1);
    if (comma < size_ && data_[comma] == ',') {
      const size_t next = skipSpace(comma + 1);
      if (next < size_ && data_[next] == '{') return comma;
    }
    from = b + 1;
  }
  return npos;
}

// An integer (or an integral double, as some writers emit pids); false for
// anything else, setting *bad.
bool Reader::number(od::value value, int64_t* out, bool* bad) {
  if (take(value.type()) != od::json_type::number) {
    *bad = true;
    return false;
  }
  od::number n;
  const error_code e = value.get_number().get(n);
  checkSoft(e);
  if (e == simdjson::SUCCESS) {
    if (n.is_int64()) {
      *out = n.get_int64();
      return true;
    }
    const double d = n.as_double();
    if (std::isfinite(d) && std::fabs(d) < 9e18) {
      *out = static_cast<int64_t>(d);
      return true;
    }
  }
  *bad = true;
  return false;
}

// A pid or tid: a number, or a string. A string of digits is that number;
// any other string names its process or thread (the legacy profiler writes
// "CPU functions") and gets an id of its own.
bool Reader::entityId(od::value value, int64_t* out, bool* bad) {
  if (take(value.type()) != od::json_type::string) return number(value, out, bad);
  std::string_view text;
  const error_code e = value.get_string().get(text);
  checkSoft(e);
  if (e != simdjson::SUCCESS) {
    *bad = true;
    return false;
  }
  *out = namedId(text);
  return true;
}

int64_t Reader::namedId(std::string_view text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto parsed = std::from_chars(text.data(), end, value);
  if (parsed.ec == std::errc() && parsed.ptr == end) return value;
  auto [it, added] = namedIds_.emplace(std::string(text), 0);
  if (added) {
    it->second = kNamedIdBase + static_cast<int64_t>(namedIdText_.size());
    namedIdText_.push_back(it->first);
  }
  return it->second;
}

const std::string* Reader::namedText(int64_t id) const {
  if (id < kNamedIdBase || static_cast<uint64_t>(id - kNamedIdBase) >= namedIdText_.size())
    return nullptr;
  return &namedIdText_[static_cast<size_t>(id - kNamedIdBase)];
}

// An async or flow id ("id", "bind_id"): a number's text or a string's; empty
// (setting *bad) for anything else.
std::string_view Reader::idText(od::value value, bool* bad) {
  const od::json_type type = take(value.type());
  if (type == od::json_type::number) {
    std::string_view text = value.raw_json_token();
    while (!text.empty() && isSpace(text.back())) text.remove_suffix(1);
    return text;
  }
  if (type == od::json_type::string) {
    std::string_view text;
    const error_code e = value.get_string().get(text);
    checkSoft(e);
    if (e == simdjson::SUCCESS) return text;
  }
  *bad = true;
  return {};
}

// A time in microseconds -> nanoseconds. False when absent or not a number.
bool Reader::micros(od::value value, int64_t* out, bool* bad) {
  if (take(value.type()) != od::json_type::number) {
    *bad = true;
    return false;
  }
  if (exactMicros(value.raw_json_token(), out)) return true;
  double d = 0;
  const error_code e = value.get_double().get(d);
  checkSoft(e);
  if (e == simdjson::SUCCESS && std::isfinite(d) && std::fabs(d) < 9e15) {
    *out = std::llround(d * 1000);
    return true;
  }
  *bad = true;
  return false;
}

}  // namespace ringx::model::chrome_detail
