#include "base/delimited_text.h"

#include <charconv>
#include <cmath>

namespace ringx {

void DelimitedWriter::separate() {
  if (!first_) out_ << (delimiter_ == Delimiter::kCsv ? ',' : '\t');
  first_ = false;
}

DelimitedWriter& DelimitedWriter::field(std::string_view text) {
  separate();
  if (delimiter_ == Delimiter::kTsv) {
    for (char c : text) out_ << (c == '\t' || c == '\n' || c == '\r' ? ' ' : c);
    return *this;
  }
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) {
    out_ << text;
    return *this;
  }
  out_ << '"';
  for (char c : text) {
    if (c == '"') out_ << '"';
    out_ << c;
  }
  out_ << '"';
  return *this;
}

DelimitedWriter& DelimitedWriter::field(int64_t value) {
  separate();
  out_ << value;
  return *this;
}

DelimitedWriter& DelimitedWriter::field(double value) {
  separate();
  if (!std::isfinite(value)) return *this;
  char text[32];
  const auto done = std::to_chars(text, text + sizeof(text), value);
  out_.write(text, done.ptr - text);
  return *this;
}

DelimitedWriter& DelimitedWriter::empty() {
  separate();
  return *this;
}

void DelimitedWriter::endRow() {
  out_ << '\n';
  first_ = true;
}

}  // namespace ringx
