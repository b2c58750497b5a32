// A Parquet file written by hand, for tables that pandas, pyarrow, DuckDB or Spark read: one row
// group per writeRowGroup(), each column a PLAIN-encoded, uncompressed data page (format v1),
// every column OPTIONAL (definition levels RLE/bit-packed, so a cell may be missing), the
// metadata in Thrift's compact protocol. INT64, DOUBLE and UTF-8 strings only: what ringx's tables
// hold. No dependency: the format's spec (parquet-format's parquet.thrift) is all it follows.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace ringx {

class ParquetWriter {
 public:
  enum class Type { kInt64, kDouble, kString };
  struct Column {
    std::string name;
    Type type = Type::kString;
  };
  // One column's cells of a row group, by row; `present[i]` false: missing (the value unused).
  struct Cells {
    std::vector<int64_t> ints;
    std::vector<double> doubles;
    std::vector<std::string> strings;
    std::vector<uint8_t> present;
    void clear() {
      ints.clear();
      doubles.clear();
      strings.clear();
      present.clear();
    }
  };

  ParquetWriter(std::ostream& out, std::vector<Column> schema);
  // Writes `rows` rows: cells[c] holds column c's (present.size() == rows; a present cell's value
  // at the same index in the vector of the column's type).
  void writeRowGroup(const std::vector<Cells>& cells, size_t rows);
  // The footer: after the last row group. Throws IoError when the stream failed.
  void finish();

 private:
  struct ChunkMeta {
    int64_t offset = 0, size = 0, values = 0;
  };
  std::ostream& out_;
  std::vector<Column> schema_;
  int64_t position_ = 0;
  int64_t rows_ = 0;
  std::vector<std::pair<int64_t, std::vector<ChunkMeta>>> groups_;  // rows, chunks
};

}  // namespace ringx
