// Opening what a user names on the command line or in the File menu: a ringx
// trace directory, one rank's .ringx file, a Chrome Trace Event JSON file, or
// the flight recorder dumps of a failed or hung job: ringx's (a directory of
// flight-rank-<N>.json, or one of them) or torch's own (a directory of NCCL's
// _dump_<N> pickles or of what a gloo job wrote, pickle or JSON, or one of them),
// or a directory of torch.profiler traces (what tensorboard_trace_handler writes:
// a .json or .json.gz per rank and step).
#pragma once

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"

#include "trace/model/trace_store.h"

namespace ringx::model {

enum class TraceFormat {
  kRingxDirectory,
  kRingxFile,
  kChromeJson,
  kFlightDump,
  kTorchFlightDump,
  kChromeDirectory,  // Chrome/Kineto files and no ringx trace: a profiler's folder
};

// The Chrome trace files of a directory (kChromeDirectory), by name: its .json and .json.gz
// files that are not torch Flight Recorder dumps.
std::vector<std::string> chromeFilesIn(const std::string& directory);

// Decides by what is at `path` (a directory and the files in it, the ringx
// magic, a flight recorder dump's first bytes, torch's, or JSON text).
// Throws IoError for a missing or unreadable path, FormatError for anything else.
TraceFormat detectFormat(const std::string& path);

// How far a load has come, updated by its workers as they go (read from any thread).
struct LoadProgress {
  std::atomic<uint32_t> filesDone{0};
  std::atomic<uint32_t> filesTotal{0};
  std::atomic<uint64_t> bytesDone{0};
  std::atomic<uint64_t> bytesTotal{0};
  std::atomic<uint64_t> events{0};
  std::atomic<bool> cancel{false};  // set to stop between files (LoadCancelled)
  // Tests: workers wait before file number holdAtFile (counted from 0) until it
  // is -1 again (with one thread, the bar stops exactly there).
  std::atomic<int> holdAtFile{-1};
  // An index (indexTrace) came from its file on disk (trace_index.h), not a pass.
  std::atomic<bool> fromIndexFile{false};
};

class LoadCancelled : public Error {
 public:
  using Error::Error;
};

// Collective arrows (ringx_ingest.h) join every rank's span of a collective.
// Above this many ranks in one trace they are not drawn: a thousand-rank chain
// is a wall of lines and costs a flow per rank per collective; the aggregate
// lanes' straggler marks say who arrived last instead.
inline constexpr size_t kMaxRanksWithCollectiveArrows = 64;

// Reads every path into one store (ranks from several files merge; a rank that
// appears twice keeps both sets of events) and finalizes it. The rank files of
// a ringx trace are read on `threads` workers at once (0: one per core), each
// decoding, aligning and sorting its rank apart from the others, so a worker
// holds one rank's decoded records at a time, never the whole job's.
void loadTraces(TraceStore& store, const std::vector<std::string>& paths,
                LoadProgress* progress = nullptr, unsigned threads = 0);

// A trace bigger than this (its rank files' bytes, with more than
// kAggregateAboveRanks ranks) opens as an index: see indexTrace.
inline constexpr uint64_t kIndexAboveBytes = 1000ull * 1000 * 1000;

// Opens a ringx trace too big to hold: every rank file is read once, on
// `threads` workers, into aggregate lanes (busy time per host and bucket,
// straggler marks; set on the store and valid whatever it loads later) and
// dropped. The store keeps a placeholder per rank (RankData::eventsLoaded
// false: its host, file, event count and extent) until loadRankEvents. The
// result is saved as an index file (trace_index.h), which the next open of the
// unchanged trace reads instead.
void indexTrace(TraceStore& store, const std::string& path, LoadProgress* progress,
                unsigned threads);

// Reads the files of these placeholder ranks (their RankData::source) into
// ranks for TraceStore::adoptRank, on `threads` workers (0: one per core). Safe
// while the store is drawn: it only interns strings.
std::vector<RankData> loadRankEvents(TraceStore& store, const std::vector<int32_t>& ranks,
                                     unsigned threads);

struct LoadOptions {
  unsigned threads = 0;                         // 0: one per core
  int holdAtFile = -1;                          // tests: LoadProgress::holdAtFile
  uint64_t indexAboveBytes = kIndexAboveBytes;  // one big ringx trace opens as an index
};

// A load on a thread of its own, so that the window opens at once and draws
// the progress (ringx-viewer's command-line inputs).
class BackgroundLoad {
 public:
  explicit BackgroundLoad(std::vector<std::string> paths, LoadOptions options = {});
  ~BackgroundLoad();  // cancels and waits
  BackgroundLoad(const BackgroundLoad&) = delete;
  BackgroundLoad& operator=(const BackgroundLoad&) = delete;

  bool done() const { return done_.load(std::memory_order_acquire); }
  const LoadProgress& progress() const { return progress_; }
  const std::vector<std::string>& paths() const { return paths_; }
  // Once done(): the store, or the load's error rethrown.
  std::unique_ptr<TraceStore> take();
  // How long the load took (once done()).
  double elapsedMs() const { return elapsedMs_; }
  // How long it has been going (any time).
  double elapsedSoFarMs() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin_)
        .count();
  }
  // Whether the trace opened as an index (indexTrace).
  bool indexed() const { return indexed_; }
  // For tests: lets a load held by the constructor's holdAtFile go on.
  void release() { progress_.holdAtFile = -1; }

 private:
  std::vector<std::string> paths_;
  LoadProgress progress_;
  std::unique_ptr<TraceStore> store_;
  std::exception_ptr error_;
  std::atomic<bool> done_{false};
  bool indexed_ = false;
  double elapsedMs_ = 0;
  std::chrono::steady_clock::time_point begin_ = std::chrono::steady_clock::now();
  std::thread thread_;
};

}  // namespace ringx::model
