// Parquet by hand (parquet_writer.h). Thrift's compact protocol, as much of it as the metadata
// needs: a field is a byte (delta from the previous field id << 4 | type) then its value; ints
// are zigzag varints, strings a varint length and bytes, lists a byte (size << 4 | element type)
// (or 0xF0 | type and a varint size from 15 on), structs their fields and a 0 byte.
#include "base/parquet_writer.h"

#include <cstring>

#include "base/error.h"

namespace ringx {
namespace {

enum ThriftType : uint8_t { kI32 = 5, kI64 = 6, kBinary = 8, kList = 9, kStruct = 12 };

class Thrift {
 public:
  std::string bytes;

  void varint(uint64_t v) {
    while (v >= 0x80) {
      bytes += char((v & 0x7f) | 0x80);
      v >>= 7;
    }
    bytes += char(v);
  }
  void zigzag(int64_t v) { varint((uint64_t(v) << 1) ^ uint64_t(v >> 63)); }
  void field(int16_t id, uint8_t type) {
    const int16_t delta = int16_t(id - last_.back());
    if (delta > 0 && delta <= 15) {
      bytes += char((delta << 4) | type);
    } else {
      bytes += char(type);
      zigzag(id);
    }
    last_.back() = id;
  }
  void i32(int16_t id, int32_t v) {
    field(id, kI32);
    zigzag(v);
  }
  void i64(int16_t id, int64_t v) {
    field(id, kI64);
    zigzag(v);
  }
  void string(int16_t id, std::string_view s) {
    field(id, kBinary);
    rawString(s);
  }
  void rawString(std::string_view s) {
    varint(s.size());
    bytes += s;
  }
  void listHeader(int16_t id, uint8_t elementType, size_t size) {
    field(id, kList);
    rawListHeader(elementType, size);
  }
  void rawListHeader(uint8_t elementType, size_t size) {
    if (size < 15) {
      bytes += char((size << 4) | elementType);
    } else {
      bytes += char(0xf0 | elementType);
      varint(size);
    }
  }
  // A struct: as a field (id > 0), or as a list's element (id 0).
  void beginStruct(int16_t id) {
    if (id > 0) field(id, kStruct);
    last_.push_back(0);
  }
  void endStruct() {
    bytes += char(0);
    last_.pop_back();
  }

 private:
  std::vector<int16_t> last_{0};
};

enum ParquetType : int32_t { kParquetInt64 = 2, kParquetDouble = 5, kParquetByteArray = 6 };
constexpr int32_t kPlain = 0, kRle = 3, kUtf8 = 0, kOptional = 1, kDataPage = 0;

void littleEndian(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += char((v >> (8 * i)) & 0xff);
}

}  // namespace

ParquetWriter::ParquetWriter(std::ostream& out, std::vector<Column> schema)
    : out_(out), schema_(std::move(schema)) {
  out_.write("PAR1", 4);
  position_ = 4;
}

void ParquetWriter::writeRowGroup(const std::vector<Cells>& cells, size_t rows) {
  if (rows == 0) return;
  std::vector<ChunkMeta> chunks;
  for (size_t c = 0; c < schema_.size(); ++c) {
    const Cells& col = cells[c];
    // Definition levels (1: present, 0: missing), bit-packed in groups of 8, after the
    // hybrid encoding's run header and a 4-byte length.
    std::string levels;
    const size_t groups = (rows + 7) / 8;
    Thrift header;
    header.varint((uint64_t(groups) << 1) | 1);
    levels = header.bytes;
    for (size_t g = 0; g < groups; ++g) {
      uint8_t byte = 0;
      for (size_t b = 0; b < 8 && g * 8 + b < rows; ++b)
        if (col.present[g * 8 + b]) byte |= uint8_t(1 << b);
      levels += char(byte);
    }
    std::string page;
    littleEndian(page, levels.size(), 4);
    page += levels;
    for (size_t r = 0; r < rows; ++r) {
      if (!col.present[r]) continue;
      switch (schema_[c].type) {
        case Type::kInt64:
          littleEndian(page, uint64_t(col.ints[r]), 8);
          break;
        case Type::kDouble: {
          uint64_t bits;
          std::memcpy(&bits, &col.doubles[r], 8);
          littleEndian(page, bits, 8);
          break;
        }
        case Type::kString:
          littleEndian(page, col.strings[r].size(), 4);
          page += col.strings[r];
          break;
      }
    }
    Thrift ph;
    ph.beginStruct(0);
    ph.i32(1, kDataPage);
    ph.i32(2, int32_t(page.size()));
    ph.i32(3, int32_t(page.size()));
    ph.beginStruct(5);
    ph.i32(1, int32_t(rows));
    ph.i32(2, kPlain);
    ph.i32(3, kRle);
    ph.i32(4, kRle);
    ph.endStruct();
    ph.endStruct();
    ChunkMeta meta;
    meta.offset = position_;
    meta.size = int64_t(ph.bytes.size() + page.size());
    meta.values = int64_t(rows);
    out_.write(ph.bytes.data(), std::streamsize(ph.bytes.size()));
    out_.write(page.data(), std::streamsize(page.size()));
    position_ += meta.size;
    chunks.push_back(meta);
  }
  rows_ += int64_t(rows);
  groups_.emplace_back(int64_t(rows), std::move(chunks));
}

void ParquetWriter::finish() {
  auto parquetType = [](Type t) {
    return t == Type::kInt64    ? kParquetInt64
           : t == Type::kDouble ? kParquetDouble
                                : kParquetByteArray;
  };
  Thrift m;
  m.beginStruct(0);
  m.i32(1, 1);  // version
  m.listHeader(2, kStruct, schema_.size() + 1);
  m.beginStruct(0);  // the root
  m.string(4, "schema");
  m.i32(5, int32_t(schema_.size()));
  m.endStruct();
  for (const Column& c : schema_) {
    m.beginStruct(0);
    m.i32(1, parquetType(c.type));
    m.i32(3, kOptional);
    m.string(4, c.name);
    if (c.type == Type::kString) m.i32(6, kUtf8);
    m.endStruct();
  }
  m.i64(3, rows_);
  m.listHeader(4, kStruct, groups_.size());
  for (const auto& [rows, chunks] : groups_) {
    m.beginStruct(0);
    m.listHeader(1, kStruct, chunks.size());
    int64_t total = 0;
    for (size_t c = 0; c < chunks.size(); ++c) {
      const ChunkMeta& k = chunks[c];
      total += k.size;
      m.beginStruct(0);
      m.i64(2, k.offset);
      m.beginStruct(3);
      m.i32(1, parquetType(schema_[c].type));
      m.listHeader(2, kI32, 2);
      m.zigzag(kPlain);
      m.zigzag(kRle);
      m.listHeader(3, kBinary, 1);
      m.rawString(schema_[c].name);
      m.i32(4, 0);  // uncompressed
      m.i64(5, k.values);
      m.i64(6, k.size);
      m.i64(7, k.size);
      m.i64(9, k.offset);
      m.endStruct();
      m.endStruct();
    }
    m.i64(2, total);
    m.i64(3, rows);
    m.endStruct();
  }
  m.string(6, "ringx-trace");
  m.endStruct();
  out_.write(m.bytes.data(), std::streamsize(m.bytes.size()));
  std::string tail;
  littleEndian(tail, m.bytes.size(), 4);
  tail += "PAR1";
  out_.write(tail.data(), std::streamsize(tail.size()));
  if (!out_) throw IoError("the Parquet file could not be written");
}

}  // namespace ringx
