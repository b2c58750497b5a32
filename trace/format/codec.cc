#include "trace/format/codec.h"

#include <cerrno>
#include <cstring>
#include <fstream>

namespace ringx::trace {
namespace {

// ---- writing ------------------------------------------------------------------

void putVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void putSigned(std::string& out, int64_t v) {
  putVarint(out, (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
}

void putByte(std::string& out, uint8_t v) { out.push_back(static_cast<char>(v)); }

void putDouble(std::string& out, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(bits >> (8 * i)));
}

void putString(std::string& out, std::string_view s) {
  putVarint(out, s.size());
  out.append(s.data(), s.size());
}

// ---- reading ------------------------------------------------------------------

// Reads one record's payload; every read is bounds-checked, so corrupt input
// becomes a FormatError rather than a crash.
class PayloadReader {
 public:
  PayloadReader(const char* data, size_t size, RecordType type, uint64_t offset)
      : p_(reinterpret_cast<const uint8_t*>(data)), end_(p_ + size), type_(type), offset_(offset) {}

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      need(1);
      const uint8_t b = *p_++;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
    }
    fail("a varint longer than 10 bytes");
  }
  int64_t signedVarint() {
    const uint64_t z = varint();
    return static_cast<int64_t>((z >> 1) ^ (~(z & 1) + 1));
  }
  uint8_t byte() {
    need(1);
    return *p_++;
  }
  double dbl() {
    need(8);
    uint64_t bits = 0;
    for (int i = 0; i < 8; ++i) bits |= static_cast<uint64_t>(p_[i]) << (8 * i);
    p_ += 8;
    double v;
    std::memcpy(&v, &bits, 8);
    return v;
  }
  std::string str() {
    const uint64_t n = varint();
    need(n);
    std::string s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return s;
  }
  uint32_t id(const RankTrace& trace) {
    const uint64_t v = varint();
    if (v >= trace.strings.size()) {
      fail(strCat("string id ", v, ", which was never defined (", trace.strings.size(),
                  " strings so far)"));
    }
    return static_cast<uint32_t>(v);
  }
  [[noreturn]] void fail(const std::string& what) const {
    RINGX_THROW(FormatError, "corrupt trace record (type ", static_cast<int>(type_), ") at byte ",
                offset_, ": ", what);
  }

 private:
  void need(uint64_t n) {
    if (static_cast<uint64_t>(end_ - p_) < n) fail("the record ends in the middle of a field");
  }
  const uint8_t* p_;
  const uint8_t* end_;
  RecordType type_;
  uint64_t offset_;
};

uint32_t readU32(const char* p) {
  const auto* b = reinterpret_cast<const uint8_t*>(p);
  return static_cast<uint32_t>(b[0]) | static_cast<uint32_t>(b[1]) << 8 |
         static_cast<uint32_t>(b[2]) << 16 | static_cast<uint32_t>(b[3]) << 24;
}

}  // namespace

// ---- Encoder --------------------------------------------------------------------

size_t Encoder::beginRecord(RecordType type) {
  const size_t start = out_.size();
  out_.append(4, '\0');  // length, patched by endRecord
  putByte(out_, static_cast<uint8_t>(type));
  return start;
}

void Encoder::endRecord(size_t start) {
  const uint32_t length = static_cast<uint32_t>(out_.size() - start - 4);
  for (int i = 0; i < 4; ++i) out_[start + i] = static_cast<char>(length >> (8 * i));
}

void Encoder::magic() { out_.append(kMagic, sizeof(kMagic)); }

void Encoder::header(const StreamHeader& h) {
  const size_t start = beginRecord(RecordType::kHeader);
  putVarint(out_, h.version);
  putSigned(out_, h.rank);
  putSigned(out_, h.worldSize);
  putSigned(out_, h.pid);
  putString(out_, h.host);
  putSigned(out_, h.startSteadyNs);
  putSigned(out_, h.startWallNs);
  endRecord(start);
}

void Encoder::string(uint32_t id, std::string_view text) {
  const size_t start = beginRecord(RecordType::kString);
  putVarint(out_, id);
  putString(out_, text);
  endRecord(start);
}

void Encoder::event(const Event& e, const Arg* args) {
  const size_t start = beginRecord(RecordType::kEvent);
  putByte(out_, static_cast<uint8_t>(e.kind));
  putByte(out_, static_cast<uint8_t>(e.category));
  putSigned(out_, e.rank);
  putVarint(out_, e.track);
  putVarint(out_, e.name);
  putSigned(out_, e.beginNs);
  if (e.kind == EventKind::kSpan) putSigned(out_, e.endNs - e.beginNs);
  if (e.kind == EventKind::kCounter) putDouble(out_, e.value);
  putVarint(out_, e.argCount);
  for (uint32_t i = 0; i < e.argCount; ++i) {
    const Arg& a = args[i];
    putVarint(out_, a.key);
    putByte(out_, static_cast<uint8_t>(a.type));
    switch (a.type) {
      case ArgType::kInt:
        putSigned(out_, a.intValue);
        break;
      case ArgType::kDouble:
        putDouble(out_, a.doubleValue);
        break;
      case ArgType::kString:
        putVarint(out_, a.stringId);
        break;
    }
  }
  endRecord(start);
}

void Encoder::clockSync(const ClockSync& s) {
  const size_t start = beginRecord(RecordType::kClockSync);
  putSigned(out_, s.localNs);
  putSigned(out_, s.offsetNs);
  putSigned(out_, s.uncertaintyNs);
  endRecord(start);
}

void Encoder::dropped(const Dropped& d) {
  const size_t start = beginRecord(RecordType::kDropped);
  putSigned(out_, d.localNs);
  putVarint(out_, d.count);
  putVarint(out_, d.reason);
  endRecord(start);
}

// ---- RankTrace --------------------------------------------------------------------

const Arg* RankTrace::findArg(const Event& event, std::string_view key) const {
  for (uint32_t i = 0; i < event.argCount; ++i) {
    const Arg& a = args[event.firstArg + i];
    if (str(a.key) == key) return &a;
  }
  return nullptr;
}

int64_t RankTrace::intArg(const Event& event, std::string_view key, int64_t fallback) const {
  const Arg* a = findArg(event, key);
  return a != nullptr && a->type == ArgType::kInt ? a->intValue : fallback;
}

std::string_view RankTrace::stringArg(const Event& event, std::string_view key) const {
  const Arg* a = findArg(event, key);
  return a != nullptr && a->type == ArgType::kString ? str(a->stringId) : std::string_view();
}

uint32_t RankTrace::findString(std::string_view text) const {
  for (size_t i = 1; i < strings.size(); ++i) {
    if (strings[i] == text) return static_cast<uint32_t>(i);
  }
  return 0;
}

// ---- Decoder --------------------------------------------------------------------

void Decoder::feed(const char* data, size_t bytes) {
  // Drop what earlier feeds consumed before growing the buffer again.
  if (consumed_ > 0 && consumed_ * 2 >= buffer_.size()) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  buffer_.append(data, bytes);
  if (!sawMagic_) {
    const size_t have = std::min(buffer_.size() - consumed_, sizeof(kMagic));
    if (std::memcmp(buffer_.data() + consumed_, kMagic, have) != 0) {
      RINGX_THROW(FormatError,
                  "not a ringx trace: ", out_->source.empty() ? "the input" : out_->source,
                  " does not start with the ringx trace magic");
    }
    if (have < sizeof(kMagic)) return;
    consumed_ += sizeof(kMagic);
    offset_ += sizeof(kMagic);
    sawMagic_ = true;
  }
  while (buffer_.size() - consumed_ >= 4) {
    const char* at = buffer_.data() + consumed_;
    const uint32_t length = readU32(at);
    if (length == 0 || length > kMaxRecordBytes) {
      RINGX_THROW(FormatError, "corrupt trace: record at byte ", offset_, " claims ", length,
                  " bytes (", out_->source, ")");
    }
    if (buffer_.size() - consumed_ - 4 < length) break;  // wait for the rest
    const auto type = static_cast<RecordType>(static_cast<uint8_t>(at[4]));
    if (!sawHeader_ && type != RecordType::kHeader) {
      RINGX_THROW(FormatError, "corrupt trace: the first record (byte ", offset_,
                  ") is not the stream header (", out_->source, ")");
    }
    decodeRecord(type, at + 5, length - 1);
    consumed_ += 4 + length;
    offset_ += 4 + length;
    ++records_;
  }
}

void Decoder::decodeRecord(RecordType type, const char* payload, size_t bytes) {
  PayloadReader in(payload, bytes, type, offset_);
  RankTrace& t = *out_;
  switch (type) {
    case RecordType::kHeader: {
      if (sawHeader_) in.fail("a second stream header");
      StreamHeader h;
      const uint64_t version = in.varint();
      if (version == 0 || version > kSchemaVersion) {
        RINGX_THROW(FormatError, "trace schema version ", version, " is not supported by this ",
                    "reader (it reads versions 1 to ", kSchemaVersion,
                    "); use the ringx build that recorded it (", t.source, ")");
      }
      h.version = static_cast<uint32_t>(version);
      h.rank = static_cast<int32_t>(in.signedVarint());
      h.worldSize = static_cast<int32_t>(in.signedVarint());
      h.pid = in.signedVarint();
      h.host = in.str();
      h.startSteadyNs = in.signedVarint();
      h.startWallNs = in.signedVarint();
      t.header = std::move(h);
      sawHeader_ = true;
      return;
    }
    case RecordType::kString: {
      const uint64_t id = in.varint();
      std::string text = in.str();
      if (id == t.strings.size()) {
        t.strings.push_back(std::move(text));
      } else if (id == 0 || id > t.strings.size() || t.strings[id] != text) {
        in.fail(strCat("string id ", id, " defined out of order or redefined (next id is ",
                       t.strings.size(), ")"));
      }
      return;
    }
    case RecordType::kEvent: {
      Event e;
      const uint8_t kind = in.byte();
      if (kind < 1 || kind > 3) in.fail(strCat("unknown event kind ", static_cast<int>(kind)));
      e.kind = static_cast<EventKind>(kind);
      const uint8_t category = in.byte();
      if (category < 1 || category > kCategoryCount) {
        in.fail(strCat("unknown category ", static_cast<int>(category)));
      }
      e.category = static_cast<Category>(category);
      e.rank = static_cast<int32_t>(in.signedVarint());
      e.track = in.id(t);
      e.name = in.id(t);
      e.beginNs = in.signedVarint();
      e.endNs = e.beginNs;
      if (e.kind == EventKind::kSpan) {
        const int64_t duration = in.signedVarint();
        if (duration < 0) in.fail("a span that ends before it begins");
        if (__builtin_add_overflow(e.beginNs, duration, &e.endNs)) {
          in.fail("a span that ends after the end of time (its begin + duration overflows)");
        }
      }
      if (e.kind == EventKind::kCounter) e.value = in.dbl();
      const uint64_t argCount = in.varint();
      if (argCount > bytes) in.fail("more arguments than bytes");
      e.firstArg = static_cast<uint32_t>(t.args.size());
      e.argCount = static_cast<uint32_t>(argCount);
      for (uint64_t i = 0; i < argCount; ++i) {
        Arg a;
        a.key = in.id(t);
        const uint8_t argType = in.byte();
        switch (argType) {
          case static_cast<uint8_t>(ArgType::kInt):
            a.type = ArgType::kInt;
            a.intValue = in.signedVarint();
            break;
          case static_cast<uint8_t>(ArgType::kDouble):
            a.type = ArgType::kDouble;
            a.doubleValue = in.dbl();
            break;
          case static_cast<uint8_t>(ArgType::kString):
            a.type = ArgType::kString;
            a.stringId = in.id(t);
            break;
          default:
            t.args.resize(e.firstArg);
            in.fail(strCat("unknown argument type ", static_cast<int>(argType)));
        }
        t.args.push_back(a);
      }
      t.events.push_back(e);
      return;
    }
    case RecordType::kClockSync: {
      ClockSync s;
      s.localNs = in.signedVarint();
      s.offsetNs = in.signedVarint();
      s.uncertaintyNs = in.signedVarint();
      t.clockSyncs.push_back(s);
      return;
    }
    case RecordType::kDropped: {
      Dropped d;
      d.localNs = in.signedVarint();
      d.count = in.varint();
      d.reason = in.id(t);
      t.dropped += d.count;
      return;
    }
  }
  // Unknown record types are skipped: the length prefix says how far.
}

// ---- files --------------------------------------------------------------------------

RankTrace readTraceFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    RINGX_THROW(IoError, "cannot open trace file ", path, ": ", std::strerror(errno));
  }
  RankTrace trace;
  trace.source = path;
  Decoder decoder(&trace);
  std::string chunk(1 << 20, '\0');
  while (file) {
    file.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const std::streamsize got = file.gcount();
    if (got <= 0) break;
    decoder.feed(chunk.data(), static_cast<size_t>(got));
  }
  if (file.bad()) RINGX_THROW(IoError, "error reading trace file ", path);
  if (!decoder.sawHeader()) {
    RINGX_THROW(FormatError, "not a ringx trace: ", path, " ends before its stream header (",
                decoder.offset() + decoder.pendingBytes(), " bytes)");
  }
  trace.truncated = decoder.pendingBytes() > 0;
  return trace;
}

}  // namespace ringx::trace
