// Chrome Trace Event JSON ingest, inside: the Reader that chrome_ingest.cc drives, shared by
// the files that implement it (chrome_ingest.h is the public face; nothing else includes this).
//   chrome_tokens.cc  the tokenizer: raw scanning of the text (spaces, strings, values, chunk
//                     ends), numbers and ids read exactly, error reporting
//   chrome_parse.cc   the parser: the top level, event arrays in chunks, each event into the
//                     pending state below (spans, counters, async spans, flows, metadata)
//   chrome_devices.cc Kineto's GPU and bookkeeping pids: which process's rank each joins, and
//                     what a GPU's lanes are called there
//   chrome_commit.cc  the commit: ranks decided, pending events into the store, flows joined
//   chrome_nccl.cc    NCCL and RCCL kernels of profiler traces (a CPU job's: its backend's
//                     scopes) as collectives matched across ranks (before the commit puts them
//                     into the store)
// (chrome_ingest.cc explains the format's rules and the speed.)
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "trace/format/codec.h"
#include "trace/format/schema.h"
#include "trace/model/trace_store.h"

namespace ringx::model::chrome_detail {

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
void checkSoft(error_code e);
bool isSpace(char c);
// Replaces bytes that are not UTF-8 in place with '?'; returns how many.
size_t replaceInvalidUtf8(char* data, size_t size);
// Microseconds as written ("12", "-3.5", "1700000000000.123") -> nanoseconds,
// exactly, rounded half away from zero past the third decimal. False for text
// this does not cover (exponents, more nanoseconds than an int64 holds): the
// caller falls back to the double.
bool exactMicros(std::string_view text, int64_t* ns);
// "rank N" or "rank N (host)", the ringx exporter's process names.
bool ringxRank(std::string_view name, int32_t* rank);
// A GPU's lane or counter in the rank it joins: "GPU 2 / stream 7" (chrome_devices.cc).
std::string onGpu(int32_t device, std::string_view name);

constexpr size_t npos = std::string::npos;

// Chunks of the event array parsed at a time: small enough that the parser's
// memory is reused while in cache, large enough that per-chunk costs vanish.
constexpr size_t kChunkBytes = 1 << 20;
constexpr size_t kMaxDepth = 1024;       // as simdjson's default
constexpr size_t kMalformed = npos - 1;  // skipValue(): not a value

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
  uint32_t nameText = 0;        // process_name's "name" (string id; 0: none)
  uint32_t labelText = 0;       // process_labels' "labels" other than "CPU" (Kineto: "GPU 3")
  bool cpuLabel = false;        // process_labels "CPU": Kineto's name for the process itself
  // Decided by findOwners() at commit (chrome_devices.cc):
  int32_t device = -1;  // a GPU's index: its lanes are "GPU N / ..."
  uint32_t owner = 0;   // the process whose rank this one's events join (itself, mostly)
  bool active = false;  // has events (Kineto lists every visible GPU, used or not)
};

// Why events were skipped, for the one warning about them.
enum Skip { kNotObject, kNoPh, kNoTs, kBadField, kUnmatchedEnd, kSkipReasons };
inline constexpr const char* kSkipText[kSkipReasons] = {
    "not JSON objects", "without \"ph\"", "without a numeric \"ts\"",
    "with a field of the wrong type (pid, tid, dur, name, ...)", "\"E\" without an open \"B\""};

class Reader {
 public:
  Reader(TraceStore& store, std::string source) : store_(store), source_(std::move(source)) {
    nameKey_ = intern("name");
    labelsKey_ = intern("labels");
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
  // The text a namedId() stands for; null for an id that was a number (even
  // one past kNamedIdBase: a pid or tid may be that large).
  const std::string* namedText(int64_t id) const;
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
  void findOwners();
  // `rankOf`: each process's rank (chrome_nccl.cc).
  void ncclCollectives(const std::vector<int32_t>& rankOf);

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
  uint32_t nameKey_ = 0, labelsKey_ = 0, errorKey_ = 0;
  std::vector<uint32_t> timeKeys_;  // ringx args that hold a steady-clock time
  bool sawEvents_ = false;
  bool distributedRank_ = false;
  int32_t distributedRankValue_ = 0;
  int64_t distributedWorldSize_ = 0;  // distributedInfo's world_size; 0: not said
  bool ringxExport_ = false;
  bool haveOrigin_ = false;
  bool haveBaseTime_ = false;  // Kineto's baseTimeNanoseconds
  std::string kinetoHost_;     // Kineto's host_name
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

}  // namespace ringx::model::chrome_detail
