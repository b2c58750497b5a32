// The binary codec for trace streams: files on disk and the live socket use the
// same bytes and the same parser.
//
// A stream is kMagic followed by records: u32 little-endian length (of type +
// payload), u8 RecordType, payload. Integers in payloads are LEB128 varints
// (signed ones zigzag-encoded), doubles 8 bytes little-endian, strings a varint
// length and the bytes. The length prefix lets a reader stop cleanly at the last
// whole record of a file that was cut off (a killed job) and skip record types
// it does not know (a newer writer with the same schema version).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "trace/format/schema.h"

namespace ringx::trace {

// Input that is not a ringx trace, or a corrupt one. The message says where.
class FormatError : public Error {
 public:
  using Error::Error;
};

// Appends encoded records to a byte buffer. String ids are the producer's: define
// each with string() before the first record that uses it (ids start at 1; 0 is
// the empty string).
class Encoder {
 public:
  void magic();
  void header(const StreamHeader& header);
  void string(uint32_t id, std::string_view text);
  // `args` points at event.argCount arguments (event.firstArg is ignored).
  void event(const Event& event, const Arg* args);
  void clockSync(const ClockSync& sync);
  void dropped(const Dropped& dropped);

  const std::string& bytes() const { return out_; }
  std::string& bytes() { return out_; }
  void clear() { out_.clear(); }

 private:
  size_t beginRecord(RecordType type);
  void endRecord(size_t start);
  std::string out_;
};

// Everything one rank's stream said.
struct RankTrace {
  StreamHeader header;
  std::vector<std::string> strings{""};  // by id; id 0 is ""
  std::vector<Event> events;             // in stream order
  std::vector<Arg> args;                 // events' args, see Event::firstArg
  std::vector<ClockSync> clockSyncs;
  uint64_t dropped = 0;  // sum of the Dropped records' counts
  // Set when the input ended inside a record (a file cut off by a crash).
  bool truncated = false;
  std::string source;  // file path or peer address, for messages

  std::string_view str(uint32_t id) const {
    return id < strings.size() ? std::string_view(strings[id]) : std::string_view();
  }
  // The argument `key` of `event`, or nullptr.
  const Arg* findArg(const Event& event, std::string_view key) const;
  // Convenience: an int argument (or `fallback` when absent or not an int).
  int64_t intArg(const Event& event, std::string_view key, int64_t fallback = -1) const;
  // A string argument's text ("" when absent).
  std::string_view stringArg(const Event& event, std::string_view key) const;
  // Looks up a string's id (0 when the stream never defined it).
  uint32_t findString(std::string_view text) const;
};

// Incremental decoder: feed it bytes as they arrive (file chunks, socket reads);
// it decodes every whole record and keeps the rest for the next feed().
// Throws FormatError on input that is not a ringx stream or is corrupt.
class Decoder {
 public:
  explicit Decoder(RankTrace* out) : out_(out) {}
  void feed(const char* data, size_t bytes);
  // Bytes of an incomplete record (or magic) still waiting for more input.
  size_t pendingBytes() const { return buffer_.size() - consumed_; }
  bool sawHeader() const { return sawHeader_; }
  // Records decoded so far (including the header).
  uint64_t records() const { return records_; }
  // Total bytes consumed so far; errors report offsets relative to this.
  uint64_t offset() const { return offset_; }

 private:
  void decodeRecord(RecordType type, const char* payload, size_t bytes);

  RankTrace* out_;
  std::string buffer_;
  size_t consumed_ = 0;
  bool sawMagic_ = false;
  bool sawHeader_ = false;
  uint64_t records_ = 0;
  uint64_t offset_ = 0;
};

// Reads a whole trace file. A file cut off inside a record reads up to its last
// whole record and comes back with `truncated` set. Throws IoError for a missing
// or unreadable file and FormatError for a foreign or corrupt one.
RankTrace readTraceFile(const std::string& path);

}  // namespace ringx::trace
