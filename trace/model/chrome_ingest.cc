// Chrome Trace Event JSON -> the trace model's store: ringx-trace exports, PyTorch
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
// "otherData") may come after the events it describes. Kineto's pids for each
// GPU and for its own bookkeeping are not processes: they join the process
// that launched on the GPU (chrome_devices.cc).
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
#include "trace/model/chrome_ingest.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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

#include "base/error.h"
#include "base/json_text.h"
#include "trace/format/codec.h"
#include "trace/format/schema.h"

#include "trace/model/chrome_reader.h"

namespace ringx::model {
namespace {

using chrome_detail::Reader;

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

std::optional<int64_t> profilerStepNumber(std::string_view name) {
  constexpr std::string_view kScope = "ProfilerStep#";
  if (name.substr(0, kScope.size()) != kScope) return std::nullopt;
  int64_t n = 0;
  bool digits = false;
  for (char c : name.substr(kScope.size())) {
    if (c < '0' || c > '9') break;
    n = n * 10 + (c - '0');
    digits = true;
  }
  return digits ? std::optional<int64_t>(n) : std::nullopt;
}

bool isDeviceTrack(std::string_view trackName) { return trackName.substr(0, 4) == "GPU "; }

void ingestChromeTraceText(TraceStore& store, std::string_view text, const std::string& source) {
  JsonText copy;
  copy.copy(text);
  ingest(store, copy, source);
}

}  // namespace ringx::model
