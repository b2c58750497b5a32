// Tables as delimited text: CSV (RFC 4180: a field holding the separator, a quote or a line
// break is quoted, quotes doubled) for files that pandas, spreadsheets and SQL tools read, and
// TSV for pasting into a spreadsheet (a tab or line break inside a field becomes a space: TSV
// has no quoting). One writer for ringx-trace's tables and the viewer's copied ones.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

namespace ringx {

enum class Delimiter { kCsv, kTsv };

class DelimitedWriter {
 public:
  DelimitedWriter(std::ostream& out, Delimiter delimiter) : out_(out), delimiter_(delimiter) {}
  DelimitedWriter& field(std::string_view text);
  DelimitedWriter& field(int64_t value);
  // Shortest text that reads back as the same double; nan and infinities as empty fields.
  DelimitedWriter& field(double value);
  DelimitedWriter& empty();  // a missing value
  void endRow();

 private:
  void separate();
  std::ostream& out_;
  Delimiter delimiter_;
  bool first_ = true;
};

}  // namespace ringx
