// Chrome Trace Event JSON -> the viewer's store: ringx-trace exports, PyTorch
// profiler (Kineto) traces, anything chrome://tracing or Perfetto opens.
//
// Speed. The file is mapped, not copied, and the event array is parsed in
// chunks of about a megabyte with one reused simdjson On-Demand parser.
// Parsing a 100 MB file as one document makes simdjson index all of it at once
// (four bytes per structural character), and faulting in that much fresh
// memory takes many times longer than the indexing itself (0.55 s against
// 0.01 s for 137 MB on the 2-core development VM). A chunk is cut after an
// event (a "}", a comma, a "{"), bracketed in place ("[" ... "]") and checked
// to be one array of whole events before any is used; where the guess is wrong
// (the pattern inside a nested array or a string) the chunk's extent is found
// by scanning exactly instead. The top level, which holds little, is walked by
// a small scanner here.
//
// Events are collected in file order and put into the store after the pass,
// because which rank a process is can only be decided at the end: metadata
// ("process_name", Kineto's "distributedInfo", the ringx exporter's
// "otherData") may come after the events it describes.
//
// Times are parsed from the number's text, not through a double: "ts" is in
// microseconds with up to three decimals (ringx writes exact nanoseconds;
// Kineto writes microseconds since the epoch, where a double no longer holds a
// nanosecond), so a ringx export reads back to the nanosecond.
//
// What Perfetto accepts, this reads too: pid and tid as numbers or strings (a
// string that is not a number names its process or thread, as the legacy
// profiler's "CPU functions" does); nested "B"/"E"; async "b"/"e"/"n" (matched
// by process, category, scope and id, then by name; each category is one lane
// per process, and overlapping async spans stack on it); flows ("s"/"t"/"f" by
// category and id, and "bind_id" with "flow_out"/"flow_in") as arrows between
// the events' lanes; "M" metadata; counters; gzip-compressed files (.json.gz).
//
// Bad input: text that is not JSON, is cut off, or whose top level is neither
// an object with "traceEvents" nor an array of events throws FormatError naming
// the file and the byte. Single malformed events are skipped, counted and
// reported in one warning, so one odd event does not cost the whole trace.
#include "viewer/model/chrome_ingest.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <simdjson.h>
#include <zlib.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "backend/common/error.h"
#include "backend/trace/chrome_export.h"
#include "backend/trace/codec.h"
#include "backend/trace/schema.h"

namespace ringx::viewer {
namespace {

namespace od = simdjson::ondemand;
using simdjson::error_code;

// A JSON error that ends the pass (the document cannot be read further).
struct JsonFailure {
  error_code code;
};

// Unwraps a simdjson result; any error ends the pass.
template <typename T>
T take(simdjson::simdjson_result<T>&& result) {
  T value{};
  const error_code e = std::move(result).get(value);
  if (e != simdjson::SUCCESS) throw JsonFailure{e};
  return value;
}

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
    const size_t n = trace::utf8SequenceLength(p + i, size - i);
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

constexpr uint8_t kPendingFailed = 1;   // Span::flags' kSpanFailed
constexpr uint8_t kPendingInstant = 2;  // an instant, not a span

// A span or instant read but not yet in the store (its rank is not known yet).
struct PendingEvent {
  int64_t begin = 0;
  int64_t end = 0;
  uint32_t name = 0;
  uint32_t firstArg = 0;  // in Reader::args_
  uint32_t thread = 0;    // Reader::threads_ index
  uint16_t argCount = 0;
  uint8_t category = 0;
  uint8_t bits = 0;  // kPendingFailed, kPendingInstant
};
static_assert(sizeof(PendingEvent) == 32, "a million pending events stay small");

struct PendingCounter {
  int64_t time = 0;
  uint32_t series = 0;  // string id
  uint32_t process = 0;
  double value = 0;
};

// A "B" waiting for its "E"; its args wait in Thread::openArgs.
struct OpenSpan {
  int64_t begin = 0;
  uint32_t name = 0;
  uint32_t firstArg = 0;
  uint32_t argCount = 0;
  uint8_t category = 0;
};

// An async "b" waiting for its "e".
struct OpenAsync {
  int64_t begin = 0;
  uint32_t name = 0;
  uint32_t thread = 0;  // its lane: the process's track for the category
  uint8_t category = 0;
  std::vector<ArgValue> args;
};

// One end of a flow arrow, waiting for its rank and track.
enum FlowRole : uint8_t { kFlowStart, kFlowStep, kFlowFinish };
struct PendingFlowEnd {
  int64_t time = 0;
  uint32_t key = 0;  // the flow's (category, id), or its bind_id
  uint32_t thread = 0;
  uint32_t name = 0;
  FlowRole role = kFlowStart;
};

// Ids for string pids and tids that are not numbers: far from any real one.
constexpr int64_t kNamedIdBase = int64_t{1} << 62;

struct Thread {
  int64_t tid = 0;
  uint32_t process = 0;
  std::string name;   // thread_name's, else empty
  bool used = false;  // has spans or instants (a track is made only then)
  std::vector<OpenSpan> open;
  std::vector<ArgValue> openArgs;
};

struct Process {
  int64_t pid = 0;
  int32_t ringxRank = -1;       // from a process_name "rank N (host)"
  std::vector<ArgValue> facts;  // process_name's args (ringx: host, clock, loss)
};

// Why events were skipped, for the one warning about them.
enum Skip { kNotObject, kNoPh, kNoTs, kBadField, kUnmatchedEnd, kSkipReasons };
const char* const kSkipText[kSkipReasons] = {
    "not JSON objects", "without \"ph\"", "without a numeric \"ts\"",
    "with a field of the wrong type (pid, tid, dur, name, ...)", "\"E\" without an open \"B\""};

class Reader {
 public:
  Reader(TraceStore& store, std::string source) : store_(store), source_(std::move(source)) {
    nameKey_ = intern("name");
    errorKey_ = intern(trace::arg::kError);
    for (const char* k : trace::arg::kSteadyTimes) timeKeys_.push_back(intern(k));
  }

  // Reads the JSON text in data[0, size), which it may change; `capacity` bytes
  // are writable there, at least size + 1 + SIMDJSON_PADDING (the spare byte
  // closes an array the file left open).
  void read(char* data, size_t size, size_t capacity);
  // Puts what was read into the store, decides ranks and track names, finalizes.
  void commit();

 private:
  uint32_t intern(std::string_view text) { return store_.strings().intern(text); }
  uint8_t category(uint32_t cat);
  [[noreturn]] void fail(const std::string& what) const;
  [[noreturn]] void failAt(size_t at, const std::string& what) const;
  [[noreturn]] void failJson(error_code code, size_t at) const;
  size_t offsetOf(od::document& doc) const;

  // The hand-written scanner for the top level and for finding chunk ends:
  // offsets into data_; npos where the text ends too early.
  size_t skipSpace(size_t i) const;
  size_t skipString(size_t i) const;
  size_t skipValue(size_t i) const;
  size_t guessChunkEnd(size_t from, size_t limit) const;

  void topObject(size_t i);
  void smallObject(std::string_view key, size_t begin, size_t end);
  size_t eventArray(size_t open, bool bare);
  bool chunk(size_t open, size_t close, bool guess);
  void event(od::value value);
  void addEvent(PendingEvent& e);
  void parseArgs(od::value value, bool* bad);
  bool number(od::value value, int64_t* out, bool* bad);
  bool entityId(od::value value, int64_t* out, bool* bad);
  int64_t namedId(std::string_view text);
  std::string_view idText(od::value value, bool* bad);
  void asyncEvent(char kind, const std::string& key, int64_t ts, uint32_t thread, uint32_t name,
                  uint8_t category);
  void flowEnd(const std::string& key, int64_t time, uint32_t thread, uint32_t name, FlowRole role);
  void commitFlows(const std::vector<int32_t>& rankOf, const std::vector<RankData*>& dataOf,
                   const std::vector<int32_t>& trackOf, const std::vector<int64_t>& shift);
  bool micros(od::value value, int64_t* out, bool* bad);
  uint32_t processIndex(int64_t pid);
  uint32_t threadIndex(int64_t pid, int64_t tid);
  void metadata(std::string_view name, int64_t pid, int64_t tid);
  const ArgValue* scratchArg(uint32_t key) const;
  uint32_t counterSeries(uint32_t name, uint32_t key, bool single);
  std::string trackName(const Thread& t) const;

  TraceStore& store_;
  std::string source_;
  char* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
  od::parser parser_;               // reused by every chunk: its memory stays warm
  std::vector<Process> processes_;  // in order of first appearance
  std::vector<Thread> threads_;
  // What was read, in file order, for commit() to hand out to ranks.
  std::vector<PendingEvent> events_;
  std::vector<ArgValue> args_;
  std::vector<PendingCounter> counters_;
  std::unordered_map<int64_t, uint32_t> processOf_;
  std::map<std::pair<int64_t, int64_t>, uint32_t> threadOf_;
  int64_t lastPid_ = 0, lastTid_ = 0;
  uint32_t lastThread_ = UINT32_MAX;
  std::vector<ArgValue> scratch_;          // the current event's args
  std::vector<int16_t> categoryOf_;        // by string id; -1: not looked up yet
  std::map<uint64_t, uint32_t> seriesOf_;  // (name, key) -> counter series name
  uint32_t nameKey_ = 0, errorKey_ = 0;
  std::vector<uint32_t> timeKeys_;  // ringx args that hold a steady-clock time
  bool sawEvents_ = false;
  bool distributedRank_ = false;
  int32_t distributedRankValue_ = 0;
  bool ringxExport_ = false;
  bool haveOrigin_ = false;
  bool haveBaseTime_ = false;  // Kineto's baseTimeNanoseconds
  int64_t baseTimeNs_ = 0;
  int64_t originNs_ = 0;
  int64_t lastTime_ = std::numeric_limits<int64_t>::min();
  uint64_t eventsSeen_ = 0;
  uint64_t skipped_[kSkipReasons] = {};
  std::map<std::string, uint64_t> unknownPh_;
  std::unordered_map<std::string, int64_t> namedIds_;  // string pid/tid -> id
  std::vector<std::string> namedIdText_;               // id - kNamedIdBase -> text
  std::unordered_map<std::string, std::vector<OpenAsync>> asyncOpen_;
  std::unordered_map<std::string, uint32_t> flowKeys_;
  std::vector<PendingFlowEnd> flowEnds_;
  int guessesMissed_ = 0;  // in a row; guessing stops when it keeps missing
  bool unclosedArray_ = false;
  bool cutEvent_ = false;  // the bare array ends inside an event
  size_t replacedBytes_ = 0;
};

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

uint8_t Reader::category(uint32_t cat) {
  if (cat >= categoryOf_.size()) categoryOf_.resize(cat + 1, -1);
  if (categoryOf_[cat] < 0) categoryOf_[cat] = cat == 0 ? 0 : store_.category(store_.str(cat));
  return static_cast<uint8_t>(categoryOf_[cat]);
}

constexpr size_t npos = std::string::npos;
// Chunks of the event array parsed at a time: small enough that the parser's
// memory is reused while in cache, large enough that per-chunk costs vanish.
constexpr size_t kChunkBytes = 1 << 20;
constexpr size_t kMaxDepth = 1024;       // as simdjson's default
constexpr size_t kMalformed = npos - 1;  // skipValue(): not a value

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

void Reader::read(char* data, size_t size, size_t capacity) {
  data_ = data;
  size_ = size;
  capacity_ = capacity;
  std::memset(data + size, 0, capacity - size);  // the padding simdjson may read
  // Room for a guess at what the file holds (events take 100 to 300 bytes of
  // JSON): only the part used is ever touched, and growing a vector of
  // millions copies it, in fresh memory, again and again.
  events_.reserve(std::min<size_t>(size / 64, size_t{1} << 26));
  args_.reserve(std::min<size_t>(size / 24, size_t{1} << 27));
  const size_t first = skipSpace(0);
  if (first == size_) fail("the file is empty");
  if (data_[first] == '{') {
    topObject(first);
    if (!sawEvents_) fail("the top-level object has no \"traceEvents\" array");
  } else if (data_[first] == '[') {
    const size_t end = skipSpace(eventArray(first, true));
    if (end < size_) failAt(end, "unexpected text after the event array");
  } else {
    failAt(first, "the text does not start with '{' or '['");
  }
}

void Reader::topObject(size_t i) {
  i = skipSpace(i + 1);
  if (i < size_ && data_[i] == '}') {
    ++i;
  } else {
    for (;;) {
      if (i >= size_ || data_[i] != '"') failAt(i, "expected a key in the top-level object");
      const size_t keyEnd = skipString(i);
      if (keyEnd == npos) failAt(size_, "a key is not closed");
      const std::string_view key(data_ + i + 1, keyEnd - i - 2);  // raw: no escapes expected
      i = skipSpace(keyEnd);
      if (i >= size_ || data_[i] != ':') failAt(i, "expected ':' after a key");
      i = skipSpace(i + 1);
      if (key == "traceEvents") {
        if (i >= size_ || data_[i] != '[') failAt(i, "\"traceEvents\" is not an array");
        sawEvents_ = true;
        i = eventArray(i, false);
      } else {
        const size_t start = i;
        i = skipValue(i);
        if (i == npos) failAt(size_, strCat("the file ends inside the value of \"", key, "\""));
        if (i == kMalformed)
          failAt(start, strCat("the value of \"", key,
                               "\" is missing, or nested too deep, or its brackets do not match"));
        if (key == "distributedInfo" || key == "otherData") smallObject(key, start, i);
        if (key == "baseTimeNanoseconds") {
          // Kineto: "ts" counts microseconds from this Unix-epoch time.
          const char* end = data_ + i;
          while (end > data_ + start && isSpace(end[-1])) --end;
          const auto parsed = std::from_chars(data_ + start, end, baseTimeNs_);
          haveBaseTime_ = parsed.ec == std::errc() && parsed.ptr == end;
        }
      }
      i = skipSpace(i);
      if (i < size_ && data_[i] == ',') {
        i = skipSpace(i + 1);
        continue;
      }
      if (i < size_ && data_[i] == '}') {
        ++i;
        break;
      }
      failAt(i, "expected ',' or '}' in the top-level object");
    }
  }
  i = skipSpace(i);
  if (i < size_) failAt(i, "unexpected text after the top-level object");
}

// Kineto's "distributedInfo" (the file's rank) and the ringx exporter's
// "otherData" (its time origin, which puts time arguments such as enqueue_ns
// on the events' time base): small, so parsed from a copy.
void Reader::smallObject(std::string_view key, size_t begin, size_t end) {
  const simdjson::padded_string text(data_ + begin, end - begin);
  od::document doc;
  error_code e = parser_.iterate(text).get(doc);
  if (e != simdjson::SUCCESS) failJson(e, begin);
  try {
    if (take(doc.type()) != od::json_type::object) return;
    for (auto fieldResult : take(doc.get_object())) {
      od::field field = take(std::move(fieldResult));
      const od::raw_json_string name = field.key();
      od::value v = field.value();
      bool bad = false;
      int64_t n = 0;
      if (key == "distributedInfo" && name == "rank") {
        if (number(v, &n, &bad) && n >= 0 && n <= std::numeric_limits<int32_t>::max()) {
          distributedRank_ = true;
          distributedRankValue_ = static_cast<int32_t>(n);
        }
      } else if (key == "otherData" && name == "format") {
        std::string_view format;
        if (take(v.type()) == od::json_type::string) {
          checkSoft(v.get_string().get(format));
          ringxExport_ = format == "ringx-trace";
        }
      } else if (key == "otherData" && name == "time_origin_ns") {
        haveOrigin_ = number(v, &originNs_, &bad);
      }
    }
  } catch (const JsonFailure& failure) {
    failJson(failure.code, begin);
  }
}

// The event array whose '[' is at `open`; returns the offset after its ']'.
// `bare`: the array is the whole file, which the format lets a writer that was
// still running leave unclosed.
size_t Reader::eventArray(size_t open, bool bare) {
  size_t start = open;  // a chunk starts at the '[' or at the comma after the last chunk
  for (;;) {
    // The fast way: guess where about a megabyte of events ends (unless the
    // guesses keep missing: then each costs a parse for nothing).
    if (size_ - start > 2 * kChunkBytes && guessesMissed_ < 8) {
      const size_t end =
          guessChunkEnd(start + kChunkBytes, std::min(size_, start + 4 * kChunkBytes));
      if (end != npos && chunk(start, end, true)) {
        guessesMissed_ = 0;
        start = end;
        continue;
      }
      ++guessesMissed_;
    }
    // The exact way: scan event by event (the last chunk, and where guesses fail).
    size_t i = skipSpace(start + 1);
    size_t close = npos;  // where the chunk's ']' goes
    bool done = false;
    if (i < size_ && data_[i] == ']' && data_[start] == '[') {
      close = i;
      done = true;
    }
    while (!done) {
      if (i >= size_) {  // after '[' or ',': the array was never closed
        if (!bare) failAt(size_, "the file ends inside the \"traceEvents\" array");
        close = size_;  // the spare byte after the text
        done = true;
        break;
      }
      const size_t after = skipValue(i);
      if (after == npos && bare) {
        // A writer that died mid-event (the format lets a running writer leave
        // the array open): the events before this one are whole; read them.
        cutEvent_ = true;
        if (close == npos) return size_;  // nothing whole in this chunk
        chunk(start, close, false);
        return size_;
      }
      if (after == npos) failAt(size_, "the file ends inside an event");
      if (after == kMalformed)
        failAt(i, "an event is missing, or nested too deep, or its brackets do not match");
      i = skipSpace(after);
      if (i >= size_) {
        if (!bare) failAt(size_, "the file ends inside the \"traceEvents\" array");
        close = size_;
        done = true;
        break;
      }
      if (data_[i] == ']') {
        close = i;
        done = true;
        break;
      }
      if (data_[i] != ',') failAt(i, "expected ',' or ']' after an event");
      close = i;
      if (close - start >= kChunkBytes) break;
      i = skipSpace(i + 1);
    }
    if (close == size_) {
      // The format lets a writer that is still running leave the array open
      // ("[{...},{...},"), and chrome://tracing reads such files: close it, in
      // place of a trailing comma if there is one.
      unclosedArray_ = true;
      size_t last = close;
      while (last > start + 1 && isSpace(data_[last - 1])) --last;
      if (last > start + 1 && data_[last - 1] == ',') close = last - 1;
    }
    chunk(start, close, false);
    if (done) return std::min(close + 1, size_);
    start = close;
  }
}

// Parses the events between data_[open] and data_[close], which are made '['
// and ']' for the purpose. A guessed chunk is first checked to be exactly one
// array of whole events; false when it is not (nothing was used from it).
bool Reader::chunk(size_t open, size_t close, bool guess) {
  struct Restore {
    char* at;
    char saved;
    ~Restore() { *at = saved; }
  } restoreOpen{data_ + open, data_[open]}, restoreClose{data_ + close, data_[close]};
  data_[open] = '[';
  data_[close] = ']';
  const simdjson::padded_string_view text(data_ + open, close + 1 - open, capacity_ - open);
  od::document doc;
  error_code e = parser_.iterate(text).get(doc);
  if (e == simdjson::UTF8_ERROR) {
    // Names from some tools carry bytes that are not UTF-8; Perfetto shows
    // them as replacement characters rather than refusing the file, so do we.
    replacedBytes_ += replaceInvalidUtf8(data_ + open, close + 1 - open);
    e = parser_.iterate(text).get(doc);
  }
  if (e != simdjson::SUCCESS) {
    if (guess) return false;
    failJson(e, open);
  }
  if (guess) {
    try {
      for (auto element : take(doc.get_array())) take(std::move(element));
    } catch (const JsonFailure&) {
      return false;
    }
    if (offsetOf(doc) != npos) return false;  // the array closed before our ']'
    doc.rewind();
  }
  try {
    for (auto element : take(doc.get_array())) {
      event(take(std::move(element)));
      ++eventsSeen_;
    }
  } catch (const JsonFailure& failure) {
    failJson(failure.code, offsetOf(doc));
  }
  const size_t trailing = offsetOf(doc);
  if (trailing != npos) failAt(trailing, "unexpected text after an event");
  return true;
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

void Reader::parseArgs(od::value value, bool* bad) {
  if (take(value.type()) != od::json_type::object) {
    *bad = true;
    return;
  }
  for (auto fieldResult : take(value.get_object())) {
    od::field field = take(std::move(fieldResult));
    std::string_view keyText;
    const error_code keyError = field.unescaped_key().get(keyText);
    checkSoft(keyError);
    if (keyError != simdjson::SUCCESS) {
      *bad = true;
      continue;
    }
    const uint32_t key = intern(keyText);
    od::value v = field.value();
    switch (take(v.type())) {
      case od::json_type::number: {
        od::number n;
        const error_code e = v.get_number().get(n);
        checkSoft(e);
        if (e != simdjson::SUCCESS) {
          // Past what a double holds (a 40-digit id): keep the digits.
          std::string_view text = v.raw_json_token();
          while (!text.empty() && isSpace(text.back())) text.remove_suffix(1);
          scratch_.push_back(ArgValue::ofString(key, intern(text)));
        } else if (n.is_int64()) {
          scratch_.push_back(ArgValue::ofInt(key, n.get_int64()));
        } else {
          scratch_.push_back(ArgValue::ofDouble(key, n.as_double()));
        }
        break;
      }
      case od::json_type::string: {
        std::string_view text;
        const error_code e = v.get_string().get(text);
        checkSoft(e);
        if (e == simdjson::SUCCESS) {
          scratch_.push_back(ArgValue::ofString(key, intern(text)));
        } else {
          *bad = true;
        }
        break;
      }
      case od::json_type::boolean: {
        bool b = false;
        const error_code e = v.get_bool().get(b);
        checkSoft(e);
        if (e == simdjson::SUCCESS) {
          scratch_.push_back(ArgValue::ofInt(key, b ? 1 : 0));
        } else {
          *bad = true;
        }
        break;
      }
      case od::json_type::null: {
        bool isNull = false;
        checkSoft(v.is_null().get(isNull));
        scratch_.push_back(ArgValue::ofString(key, intern("null")));
        break;
      }
      case od::json_type::array:
        scratch_.push_back(ArgValue::ofString(key, intern(take(take(v.get_array()).raw_json()))));
        break;
      case od::json_type::object:
        scratch_.push_back(ArgValue::ofString(key, intern(take(take(v.get_object()).raw_json()))));
        break;
    }
  }
}

uint32_t Reader::processIndex(int64_t pid) {
  auto [it, added] = processOf_.emplace(pid, static_cast<uint32_t>(processes_.size()));
  if (added) {
    processes_.emplace_back();
    processes_.back().pid = pid;
  }
  return it->second;
}

uint32_t Reader::threadIndex(int64_t pid, int64_t tid) {
  if (lastThread_ != UINT32_MAX && pid == lastPid_ && tid == lastTid_) return lastThread_;
  auto [it, added] = threadOf_.emplace(std::make_pair(pid, tid), 0);
  if (added) {
    const uint32_t process = processIndex(pid);
    it->second = static_cast<uint32_t>(threads_.size());
    threads_.emplace_back();
    threads_.back().tid = tid;
    threads_.back().process = process;
  }
  lastPid_ = pid;
  lastTid_ = tid;
  lastThread_ = it->second;
  return it->second;
}

const ArgValue* Reader::scratchArg(uint32_t key) const {
  for (const ArgValue& a : scratch_)
    if (a.key == key) return &a;
  return nullptr;
}

void Reader::metadata(std::string_view name, int64_t pid, int64_t tid) {
  const ArgValue* label = scratchArg(nameKey_);
  const std::string_view text =
      label != nullptr && label->kind == ArgKind::kString ? store_.str(label->stringId) : "";
  if (name == "process_name") {
    Process& p = processes_[processIndex(pid)];
    int32_t rank = 0;
    if (ringxRank(text, &rank)) p.ringxRank = rank;
    p.facts = scratch_;
  } else if (name == "thread_name") {
    threads_[threadIndex(pid, tid)].name = std::string(text);
  } else {
    processIndex(pid);  // sort indices, labels: the process exists, nothing else
  }
}

// The counter series an arg of counter `name` feeds: "<name>" when the event
// has one value (ringx's counters), else "<name>.<key>".
uint32_t Reader::counterSeries(uint32_t name, uint32_t key, bool single) {
  if (single) return name;
  const uint64_t k = (uint64_t{name} << 32) | key;
  auto it = seriesOf_.find(k);
  if (it != seriesOf_.end()) return it->second;
  const uint32_t id = intern(strCat(store_.str(name), ".", store_.str(key)));
  seriesOf_.emplace(k, id);
  return id;
}

void Reader::event(od::value value) {
  if (take(value.type()) != od::json_type::object) {
    ++skipped_[kNotObject];
    return;
  }
  scratch_.clear();
  std::string_view ph, name, cat, id, bindId, scope;
  bool havePh = false, haveTs = false, haveDur = false, bad = false;
  bool flowIn = false, flowOut = false;
  int64_t ts = 0, dur = 0, pid = 0, tid = 0;
  for (auto fieldResult : take(value.get_object())) {
    od::field field = take(std::move(fieldResult));
    const od::raw_json_string key = field.key();
    od::value v = field.value();
    // Dispatch on the raw key: keys with escapes are not ones we read.
    if (key == "ph") {
      if (take(v.type()) == od::json_type::string) {
        const error_code e = v.get_string().get(ph);
        checkSoft(e);
        havePh = e == simdjson::SUCCESS;
      }
    } else if (key == "ts") {
      haveTs = micros(v, &ts, &bad);
    } else if (key == "dur") {
      haveDur = micros(v, &dur, &bad);
    } else if (key == "name" || key == "cat") {
      std::string_view text;
      if (take(v.type()) == od::json_type::string) {
        const error_code e = v.get_string().get(text);
        checkSoft(e);
        bad |= e != simdjson::SUCCESS;
      } else {
        bad = true;
      }
      (key == "name" ? name : cat) = text;
    } else if (key == "pid") {
      entityId(v, &pid, &bad);
    } else if (key == "tid") {
      entityId(v, &tid, &bad);
    } else if (key == "args") {
      parseArgs(v, &bad);
    } else if (key == "id") {
      id = idText(v, &bad);
    } else if (key == "id2") {
      // {"local": ...} or {"global": ...}: its text is the id.
      if (take(v.type()) == od::json_type::object) {
        id = take(take(v.get_object()).raw_json());
      } else {
        bad = true;
      }
    } else if (key == "bind_id") {
      bindId = idText(v, &bad);
    } else if (key == "scope") {
      if (take(v.type()) == od::json_type::string) checkSoft(v.get_string().get(scope));
    } else if (key == "flow_in" || key == "flow_out") {
      bool b = false;
      if (take(v.type()) == od::json_type::boolean) checkSoft(v.get_bool().get(b));
      (key == "flow_in" ? flowIn : flowOut) = b;
    }
  }
  if (!havePh || ph.size() != 1) {
    ++skipped_[kNoPh];
    return;
  }
  const char kind = ph[0];
  if (kind == 'M') {
    metadata(name, pid, tid);
    return;
  }
  const bool known = kind == 'X' || kind == 'B' || kind == 'E' || kind == 'i' || kind == 'I' ||
                     kind == 'n' || kind == 'C' || kind == 'b' || kind == 'e' || kind == 's' ||
                     kind == 't' || kind == 'f';
  if (!known) {
    ++unknownPh_[std::string(ph)];
    return;
  }
  if (bad) {
    ++skipped_[kBadField];
    return;
  }
  if (!haveTs) {
    ++skipped_[kNoTs];
    return;
  }
  const uint32_t threadIdx = threadIndex(pid, tid);
  Thread& thread = threads_[threadIdx];
  const int64_t end = kind == 'X' && haveDur ? ts + std::max<int64_t>(dur, 0) : ts;
  lastTime_ = std::max(lastTime_, end);

  if (kind == 'C') {
    // Counters belong to the process (as in chrome://tracing), not the thread.
    const uint32_t counter = intern(name);
    const bool single = scratch_.size() == 1;
    for (const ArgValue& a : scratch_) {
      double v;
      if (a.kind == ArgKind::kInt) {
        v = static_cast<double>(a.intValue);
      } else if (a.kind == ArgKind::kDouble) {
        v = a.doubleValue;
      } else {
        continue;
      }
      counters_.push_back(
          PendingCounter{ts, counterSeries(counter, a.key, single), thread.process, v});
    }
    return;
  }
  const uint8_t categoryIdx = category(cat.empty() ? 0 : intern(cat));
  if (kind == 's' || kind == 't' || kind == 'f') {
    if (id.empty()) {
      ++skipped_[kBadField];
      return;
    }
    // A "f" binds to the slice that encloses it ("bp":"e") or to the next one;
    // either way its arrow ends at its time on its thread, so "bp" is not read.
    flowEnd(strCat("flow\x1f", cat, "\x1f", id), ts, threadIdx, intern(name),
            kind == 's'   ? kFlowStart
            : kind == 't' ? kFlowStep
                          : kFlowFinish);
    return;
  }
  if (kind == 'b' || kind == 'e' || (kind == 'n' && !id.empty())) {
    // Async events live on a lane of their process, one per category.
    const uint32_t lane =
        threadIndex(pid, namedId(strCat("async ", cat.empty() ? std::string_view("events") : cat)));
    asyncEvent(kind, strCat(pid, "\x1f", cat, "\x1f", scope, "\x1f", id), ts, lane, intern(name),
               categoryIdx);
    return;
  }
  if (kind == 'B') {
    OpenSpan open;
    open.begin = ts;
    open.name = intern(name);
    open.category = categoryIdx;
    open.firstArg = static_cast<uint32_t>(thread.openArgs.size());
    open.argCount = static_cast<uint32_t>(scratch_.size());
    thread.openArgs.insert(thread.openArgs.end(), scratch_.begin(), scratch_.end());
    thread.open.push_back(open);
    return;
  }

  PendingEvent e;
  e.begin = ts;
  e.end = end;
  e.thread = threadIdx;
  e.firstArg = static_cast<uint32_t>(args_.size());
  if (kind == 'E') {
    if (thread.open.empty()) {
      ++skipped_[kUnmatchedEnd];
      return;
    }
    // The span is the "B"'s, with the args of both (as chrome://tracing merges them).
    const OpenSpan open = thread.open.back();
    thread.open.pop_back();
    e.begin = open.begin;
    e.name = open.name;
    e.category = open.category;
    for (uint32_t i = 0; i < open.argCount; ++i)
      args_.push_back(thread.openArgs[open.firstArg + i]);
    thread.openArgs.resize(open.firstArg);
  } else {
    e.name = intern(name);
    e.category = categoryIdx;
    if (kind != 'X') e.bits |= kPendingInstant;
  }
  for (const ArgValue& a : scratch_) args_.push_back(a);
  addEvent(e);
  // Flow events of the newer form: the slice itself is the arrow's end.
  if (kind == 'X' && !bindId.empty()) {
    const std::string key = strCat("bind\x1f", bindId);
    if (flowOut) flowEnd(key, e.end, threadIdx, e.name, kFlowStart);
    if (flowIn) flowEnd(key, e.begin, threadIdx, e.name, kFlowFinish);
  }
}

// An async "b", "e" or "n" whose matching key (process, category, scope, id) is
// `key`, on lane `thread`.
void Reader::asyncEvent(char kind, const std::string& key, int64_t ts, uint32_t thread,
                        uint32_t name, uint8_t category) {
  std::vector<OpenAsync>& open = asyncOpen_[key];
  PendingEvent e;
  e.begin = e.end = ts;
  e.name = name;
  e.category = category;
  e.thread = thread;
  e.firstArg = static_cast<uint32_t>(args_.size());
  if (kind == 'b') {
    open.push_back(OpenAsync{ts, name, thread, category, scratch_});
    return;
  }
  if (kind == 'e') {
    // The innermost open "b" of the same name ("e" may leave its name out).
    auto match = open.rbegin();
    while (match != open.rend() && name != 0 && match->name != name) ++match;
    if (match == open.rend()) {
      ++skipped_[kUnmatchedEnd];
      return;
    }
    e.begin = match->begin;
    e.name = match->name;
    e.category = match->category;
    args_.insert(args_.end(), match->args.begin(), match->args.end());
    open.erase(std::next(match).base());
  } else {
    e.bits |= kPendingInstant;
  }
  args_.insert(args_.end(), scratch_.begin(), scratch_.end());
  addEvent(e);
}

void Reader::flowEnd(const std::string& key, int64_t time, uint32_t thread, uint32_t name,
                     FlowRole role) {
  auto [it, added] = flowKeys_.emplace(key, static_cast<uint32_t>(flowKeys_.size()));
  flowEnds_.push_back(PendingFlowEnd{time, it->second, thread, name, role});
}

// Joins the ends of each flow, in time order, into arrows: start -> step ->
// ... -> finish, a new chain after each finish. Ends on threads that have no
// events (so no lane) and ends alone are counted in a warning.
void Reader::commitFlows(const std::vector<int32_t>& rankOf, const std::vector<RankData*>& dataOf,
                         const std::vector<int32_t>& trackOf, const std::vector<int64_t>& shift) {
  std::stable_sort(flowEnds_.begin(), flowEnds_.end(),
                   [](const PendingFlowEnd& a, const PendingFlowEnd& b) {
                     if (a.key != b.key) return a.key < b.key;
                     if (a.time != b.time) return a.time < b.time;
                     return a.role < b.role;
                   });
  uint64_t alone = 0, added = 0;
  auto endOf = [&](const PendingFlowEnd& p, FlowEnd* out) {
    const int32_t track = trackOf[p.thread];
    if (track < 0) return false;
    const uint32_t process = threads_[p.thread].process;
    *out = FlowEnd{rankOf[process], dataOf[process]->tracks[static_cast<size_t>(track)].name,
                   p.time + shift[process]};
    return true;
  };
  for (size_t i = 0; i < flowEnds_.size();) {
    size_t j = i;
    while (j < flowEnds_.size() && flowEnds_[j].key == flowEnds_[i].key) ++j;
    std::vector<bool> joined(j - i, false);
    for (size_t k = i; k + 1 < j; ++k) {
      if (flowEnds_[k].role == kFlowFinish || flowEnds_[k + 1].role == kFlowStart) continue;
      Flow flow;
      flow.name = flowEnds_[k].name;
      if (!endOf(flowEnds_[k], &flow.from) || !endOf(flowEnds_[k + 1], &flow.to)) continue;
      store_.addFlow(flow);
      joined[k - i] = joined[k + 1 - i] = true;
      ++added;
    }
    for (bool b : joined) alone += b ? 0 : 1;
    i = j;
  }
  if (alone > 0)
    store_.addWarning(strCat(alone, " flow events in '", source_,
                             "' have no other end on a thread with events; their arrows are "
                             "not drawn (",
                             added, " arrows are)"));
  flowEnds_ = {};
}

// Finishes an event whose args are args_[e.firstArg, end).
void Reader::addEvent(PendingEvent& e) {
  const size_t argCount = std::min<size_t>(args_.size() - e.firstArg, UINT16_MAX);
  args_.resize(e.firstArg + argCount);
  e.argCount = static_cast<uint16_t>(argCount);
  for (size_t i = 0; i < argCount; ++i)
    if (args_[e.firstArg + i].key == errorKey_) e.bits |= kPendingFailed;
  threads_[e.thread].used = true;
  events_.push_back(e);
}

std::string Reader::trackName(const Thread& t) const {
  if (!t.name.empty()) return t.name;
  if (t.tid >= kNamedIdBase) return namedIdText_[static_cast<size_t>(t.tid - kNamedIdBase)];
  return strCat("thread ", t.tid);
}

void Reader::commit() {
  // "B"s and "b"s never closed (a trace cut off mid-span) end where the trace
  // ends, as chrome://tracing draws them.
  uint64_t unclosed = 0;
  auto endAtTraceEnd = [&](int64_t begin, uint32_t name, uint8_t category, uint32_t thread,
                           const ArgValue* args, size_t argCount) {
    PendingEvent e;
    e.begin = begin;
    e.end = std::max(begin, lastTime_);
    e.name = name;
    e.category = category;
    e.thread = thread;
    e.firstArg = static_cast<uint32_t>(args_.size());
    args_.insert(args_.end(), args, args + argCount);
    addEvent(e);
    ++unclosed;
  };
  for (uint32_t i = 0; i < threads_.size(); ++i) {
    Thread& t = threads_[i];
    for (const OpenSpan& open : t.open)
      endAtTraceEnd(open.begin, open.name, open.category, i, t.openArgs.data() + open.firstArg,
                    open.argCount);
    t.open.clear();
    t.openArgs.clear();
  }
  for (const auto& [key, open] : asyncOpen_)
    for (const OpenAsync& o : open)
      endAtTraceEnd(o.begin, o.name, o.category, o.thread, o.args.data(), o.args.size());
  asyncOpen_.clear();

  // Ranks: a ringx export names its processes "rank N (host)"; a Kineto file
  // says its rank in distributedInfo (every process in it is that rank: the
  // CPU threads and the GPU streams); anything else numbers its processes in
  // the order they appear, skipping ranks a named process already took.
  // Ranks an earlier file put in the store are taken too: two files without
  // rank information are two ranks, not one.
  std::vector<int32_t> rankOf(processes_.size());
  std::vector<bool> taken;
  for (const RankData& r : store_.ranks()) {
    if (static_cast<size_t>(r.rank) >= taken.size()) taken.resize(r.rank + 1);
    taken[r.rank] = true;
  }
  for (const Process& p : processes_)
    if (p.ringxRank >= 0) {
      if (static_cast<size_t>(p.ringxRank) >= taken.size()) taken.resize(p.ringxRank + 1);
      taken[p.ringxRank] = true;
    }
  int32_t next = 0;
  for (size_t i = 0; i < processes_.size(); ++i) {
    const Process& p = processes_[i];
    if (p.ringxRank >= 0) {
      rankOf[i] = p.ringxRank;
    } else if (distributedRank_) {
      rankOf[i] = distributedRankValue_;
    } else {
      while (static_cast<size_t>(next) < taken.size() && taken[next]) ++next;
      rankOf[i] = next++;
    }
  }
  // A profiler file whose rank has a ringx stream already: its times (epoch
  // ns, baseTimeNanoseconds + ts) move onto the ringx rank's aligned clock
  // through that stream's (steady, wall) reference.
  std::vector<int64_t> shift(processes_.size(), 0);
  for (size_t i = 0; i < processes_.size(); ++i) {
    const RankData* ringx = store_.findRank(rankOf[i]);
    if (haveBaseTime_ && processes_[i].ringxRank < 0 && ringx != nullptr && ringx->hasWallClock)
      shift[i] = baseTimeNs_ + ringx->wallToAlignedNs;
  }
  // Every rank exists before any is used: creating one moves the others.
  for (int32_t rank : rankOf) store_.rank(rank);
  std::vector<RankData*> dataOf(processes_.size());
  for (size_t i = 0; i < processes_.size(); ++i) dataOf[i] = &store_.rank(rankOf[i]);

  auto fact = [&](const Process& p, std::string_view key) -> const ArgValue* {
    const uint32_t id = store_.strings().find(key);
    if (id == 0) return nullptr;
    for (const ArgValue& a : p.facts)
      if (a.key == id) return &a;
    return nullptr;
  };
  auto intFact = [&](const Process& p, std::string_view key, int64_t fallback) {
    const ArgValue* a = fact(p, key);
    return a != nullptr && a->kind == ArgKind::kInt ? a->intValue : fallback;
  };
  std::vector<int64_t> timeShift(processes_.size(), 0);  // for ringx time args
  for (size_t i = 0; i < processes_.size(); ++i) {
    const Process& p = processes_[i];
    RankData& data = *dataOf[i];
    data.source = source_;
    if (p.ringxRank >= 0) {
      // The facts ringx ingest takes from the stream, as the exporter wrote them.
      const ArgValue* host = fact(p, "host");
      if (host != nullptr && host->kind == ArgKind::kString)
        data.host = std::string(store_.str(host->stringId));
      data.pid = intFact(p, "os_pid", p.pid);
      data.truncated = intFact(p, "truncated", 0) != 0;
      data.clockAligned = intFact(p, "clock_aligned", 1) != 0;
      data.clockUncertaintyNs = intFact(p, "clock_uncertainty_ns", 0);
      data.dropped = static_cast<uint64_t>(std::max<int64_t>(0, intFact(p, "dropped_events", 0)));
      // Time arguments (enqueue_ns, ...) hold the rank's own steady clock,
      // while the exporter aligned the events to rank 0's clock and moved them
      // to its origin: shift them the same way, with the offset it reports
      // (exact unless the clock drifted during the trace; then off by that).
      if (ringxExport_ && haveOrigin_) timeShift[i] = intFact(p, "clock_offset_ns", 0) - originNs_;
    } else if (data.pid == 0) {
      data.pid = p.pid;
    }
  }

  // Track names: the thread's name, made unique within the rank when several
  // threads share one (a Kineto rank's CPU process and GPU process may both
  // have a "thread 7"), so that they do not merge into one lane: the later
  // one gets its pid, or its tid when both are in one process.
  std::vector<int32_t> trackOf(threads_.size(), -1);
  std::map<std::pair<int32_t, std::string>, uint32_t> claimed;  // (rank, name) -> thread
  for (uint32_t i = 0; i < threads_.size(); ++i) {
    const Thread& t = threads_[i];
    if (!t.used) continue;
    const int32_t rank = rankOf[t.process];
    const int64_t pid = processes_[t.process].pid;
    std::string name = trackName(t);
    auto [it, fresh] = claimed.emplace(std::make_pair(rank, name), i);
    if (!fresh) {
      const bool sameProcess = threads_[it->second].process == t.process;
      name = sameProcess ? strCat(name, " (tid ", t.tid, ")") : strCat(name, " (pid ", pid, ")");
      if (!claimed.emplace(std::make_pair(rank, name), i).second) {
        name = strCat(trackName(t), " (pid ", pid, ", tid ", t.tid, ")");
        claimed.emplace(std::make_pair(rank, name), i);
      }
    }
    trackOf[i] = static_cast<int32_t>(store_.track(*dataOf[t.process], name));
  }

  commitFlows(rankOf, dataOf, trackOf, shift);

  // Room for what each track and rank gets, so that a million events are not
  // copied again and again while their vectors grow.
  std::vector<size_t> perTrack(threads_.size(), 0);
  std::vector<size_t> argsOf(processes_.size(), 0);
  for (const PendingEvent& e : events_) {
    ++perTrack[e.thread];
    argsOf[threads_[e.thread].process] += e.argCount;
  }
  for (uint32_t i = 0; i < threads_.size(); ++i) {
    if (perTrack[i] == 0) continue;
    Track& track = dataOf[threads_[i].process]->tracks[static_cast<size_t>(trackOf[i])];
    track.pendingSpans.reserve(track.pendingSpans.size() + perTrack[i]);
  }
  // Packed args take about 3 bytes each (ArgList).
  for (size_t i = 0; i < processes_.size(); ++i)
    dataOf[i]->argBytes.reserve(dataOf[i]->argBytes.size() + 3 * argsOf[i]);

  for (PendingEvent& e : events_) {
    const uint32_t process = threads_[e.thread].process;
    RankData& data = *dataOf[process];
    e.begin += shift[process];
    e.end += shift[process];
    uint32_t first = e.firstArg;
    if (timeShift[process] != 0) {
      for (uint32_t a = e.firstArg; a < e.firstArg + e.argCount; ++a) {
        ArgValue& arg = args_[a];
        if (arg.kind != ArgKind::kInt || arg.intValue <= 0) continue;
        for (uint32_t k : timeKeys_)
          if (arg.key == k) arg.intValue += timeShift[process];
      }
    }
    first = store_.addArgs(data, &args_[e.firstArg], e.argCount);
    const uint32_t track = static_cast<uint32_t>(trackOf[e.thread]);
    if (e.bits & kPendingInstant) {
      Instant in;
      in.time = e.begin;
      in.name = e.name;
      in.firstArg = first;
      in.argCount = e.argCount;
      in.category = e.category;
      store_.addInstant(data, track, in);
    } else {
      Span s;
      s.begin = e.begin;
      s.end = e.end;
      s.name = e.name;
      s.firstArg = first;
      s.argCount = e.argCount;
      s.category = e.category;
      s.flags = (e.bits & kPendingFailed) ? kSpanFailed : 0;
      store_.addSpan(data, track, s);
    }
  }
  events_ = {};
  args_ = {};
  for (const PendingCounter& c : counters_)
    store_.addCounter(*dataOf[c.process], store_.str(c.series), c.time + shift[c.process], c.value);
  counters_ = {};

  uint64_t skipped = 0;
  std::string reasons;
  for (int r = 0; r < kSkipReasons; ++r) {
    if (skipped_[r] == 0) continue;
    skipped += skipped_[r];
    reasons += strCat(reasons.empty() ? "" : ", ", skipped_[r], " ", kSkipText[r]);
  }
  if (skipped > 0)
    store_.addWarning(strCat(skipped, " events in '", source_, "' were skipped: ", reasons));
  if (unclosed > 0)
    store_.addWarning(strCat(unclosed, " \"B\" or \"b\" events in '", source_,
                             "' have no matching end; they are shown ending where the trace "
                             "ends"));
  if (!unknownPh_.empty()) {
    uint64_t count = 0;
    std::string kinds;
    for (const auto& [ph, n] : unknownPh_) {
      count += n;
      kinds += strCat(kinds.empty() ? "" : ", ", "\"", ph, "\" x", n);
    }
    store_.addWarning(strCat(count, " events in '", source_,
                             "' are of kinds the viewer does not show and were left out (ph ",
                             kinds, ")"));
  }
  if (cutEvent_)
    store_.addWarning(strCat("'", source_,
                             "' ends inside an event (cut off while being written?); the ",
                             eventsSeen_, " complete events before it were read"));
  if (unclosedArray_)
    store_.addWarning(strCat("'", source_,
                             "' ends without closing its event array (a trace still being "
                             "written?); its complete events were read"));
  if (replacedBytes_ > 0)
    store_.addWarning(strCat("'", source_, "' has ", replacedBytes_,
                             " bytes that are not UTF-8; they are shown as '?'"));
  store_.finalize();
}

// The text of a trace with the room after it that simdjson reads past the end
// (and a spare byte to close an array the file left open), writable: a file
// is mapped copy-on-write (no copy; a chunk's brackets are written in place).
class JsonText {
 public:
  JsonText() = default;
  JsonText(const JsonText&) = delete;
  JsonText& operator=(const JsonText&) = delete;
  ~JsonText() { release(); }

  // A writable copy of `text`.
  void copy(std::string_view text) {
    allocate(text.size());
    std::memcpy(data_, text.data(), text.size());
  }
  void allocate(size_t size) {
    release();
    heap_.reset(new char[size + kSlack]);
    data_ = heap_.get();
    size_ = size;
    capacity_ = size + kSlack;
  }
  // Maps a regular file of `size` bytes; false where mapping is not possible.
  bool map(int fd, size_t size) {
    release();
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    const size_t length = (size + kSlack + page - 1) / page * page;
    // Zeroed pages first, then the file over their start: the slack after the
    // file's end is then ordinary memory, never past the end of a mapping.
    void* region =
        ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) return false;
    void* file = ::mmap(region, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd, 0);
    if (file == MAP_FAILED) {
      ::munmap(region, length);
      return false;
    }
    data_ = static_cast<char*>(region);
    mapped_ = length;
    size_ = size;
    capacity_ = size + kSlack;
    return true;
  }
  void release() {
    if (mapped_ > 0) ::munmap(data_, mapped_);
    mapped_ = 0;
    heap_.reset();
    data_ = nullptr;
  }

  char* data() { return data_; }
  size_t size() const { return size_; }
  void setSize(size_t size) { size_ = size; }
  size_t capacity() const { return capacity_; }

 private:
  static constexpr size_t kSlack = 1 + simdjson::SIMDJSON_PADDING;
  std::unique_ptr<char[]> heap_;
  char* data_ = nullptr;
  size_t mapped_ = 0;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

void ingest(TraceStore& store, JsonText& text, const std::string& source) {
  Reader reader(store, source);
  reader.read(text.data(), text.size(), text.capacity());
  text.release();  // no longer needed: give the memory back before the store grows
  reader.commit();
}

// A gzip-compressed trace (the profiler's use_gzip=True writes .json.gz),
// decompressed into memory. A file cut off mid-stream (a crash while writing)
// gives what was decompressed, with a warning; the JSON reader then treats the
// text as cut off.
void gunzipInto(const std::string& path, JsonText& text, std::string* warning) {
  gzFile in = ::gzopen(path.c_str(), "rb");
  if (in == nullptr) throw IoError(strCat("cannot open '", path, "': ", std::strerror(errno)));
  struct Closer {
    gzFile f;
    ~Closer() { ::gzclose(f); }
  } closer{in};
  ::gzbuffer(in, 1 << 17);
  std::string bytes;
  char chunk[1 << 16];
  for (;;) {
    const int n = ::gzread(in, chunk, sizeof chunk);
    if (n > 0) {
      bytes.append(chunk, static_cast<size_t>(n));
      continue;
    }
    int code = 0;
    const char* message = ::gzerror(in, &code);
    if (n == 0 && code == Z_OK) break;  // a whole stream (a cut one ends in Z_BUF_ERROR)
    if (bytes.empty())
      throw trace::FormatError(strCat("'", path, "' is not a readable gzip file: ", message));
    *warning = strCat("'", path, "' is cut off or damaged after ", bytes.size(),
                      " decompressed bytes (", message, "); what came before was read");
    break;
  }
  text.copy(bytes);
}

bool isGzip(int fd) {
  char head[2] = {};
  return ::pread(fd, head, 2, 0) == 2 && startsLikeGzip(head, 2);
}

}  // namespace

bool startsLikeGzip(const char* head, size_t size) {
  return size >= 2 && static_cast<unsigned char>(head[0]) == 0x1f &&
         static_cast<unsigned char>(head[1]) == 0x8b;
}

void ingestChromeTraceFile(TraceStore& store, const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw IoError(strCat("cannot open '", path, "': ", std::strerror(errno),
                         " (give a Chrome trace .json file)"));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    throw IoError(strCat("cannot read '", path, "': ", std::strerror(errno)));
  if (S_ISDIR(st.st_mode))
    throw IoError(strCat("cannot read '", path, "': it is a directory, not a Chrome trace file"));
  JsonText text;
  const size_t size = static_cast<size_t>(st.st_size);
  if (S_ISREG(st.st_mode) && isGzip(fd)) {
    std::string warning;
    gunzipInto(path, text, &warning);
    if (!warning.empty()) store.addWarning(warning);
  } else if (!(S_ISREG(st.st_mode) && size > 0 && text.map(fd, size))) {
    // Not mappable (a pipe, an empty or special file): read it.
    std::string bytes;
    char chunk[1 << 16];
    for (;;) {
      const ssize_t n = ::read(fd, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw IoError(strCat("cannot read '", path, "': ", std::strerror(errno)));
      if (n == 0) break;
      bytes.append(chunk, static_cast<size_t>(n));
    }
    text.copy(bytes);
  }
  ingest(store, text, path);
}

void ingestChromeTraceText(TraceStore& store, std::string_view text, const std::string& source) {
  JsonText copy;
  copy.copy(text);
  ingest(store, copy, source);
}

}  // namespace ringx::viewer
