// Format detection and loading (see loader.h).
#include "trace/model/loader.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>

#include "base/error.h"
#include "base/release.h"
#include "trace/format/codec.h"
#include "trace/model/aggregate_lanes.h"
#include "trace/model/chrome_ingest.h"
#include "trace/model/flight_ingest.h"
#include "trace/model/ringx_ingest.h"
#include "trace/model/torch_flight_ingest.h"
#include "trace/model/trace_index.h"
#include "trace/read/torch_flight.h"
#include "trace/read/trace_dir.h"

namespace ringx::model {
namespace {

// A directory of flight recorder dumps and no trace: what RINGX_DUMP_DIR holds.
bool isFlightDumpDirectory(const std::string& path) {
  bool dumps = false;
  std::error_code ec;
  for (const auto& item : std::filesystem::directory_iterator(path, ec)) {
    const std::string name = item.path().filename().string();
    if (name == trace::kManifestFile || name.rfind("rank-", 0) == 0) return false;  // a trace
    dumps |= name.rfind("flight-rank-", 0) == 0;
  }
  return dumps;
}

// A torch Flight Recorder dump's first bytes name its keys early enough (torch_flight.h).
constexpr size_t kTorchDumpHeadBytes = 4096;

std::string headOf(const std::string& file, size_t bytes) {
  std::ifstream in(file, std::ios::binary);
  std::string head(bytes, '\0');
  in.read(head.data(), static_cast<std::streamsize>(bytes));
  head.resize(static_cast<size_t>(in.gcount()));
  return head;
}

// A directory of torch's own dumps (NCCL's _dump_<N>, a gloo job's fr_trace_rank_<N>) and no
// trace; other files beside them (logs, an expected analysis) do not matter.
bool isTorchFlightDumpDirectory(const std::string& path) {
  std::error_code ec;
  for (const auto& item : std::filesystem::directory_iterator(path, ec)) {
    const std::string name = item.path().filename().string();
    if (name == trace::kManifestFile || name.rfind("rank-", 0) == 0) return false;  // a trace
  }
  for (const auto& item : std::filesystem::directory_iterator(path, ec)) {
    if (item.is_regular_file(ec) &&
        trace::looksLikeTorchFlightDump(headOf(item.path().string(), kTorchDumpHeadBytes)))
      return true;
  }
  return false;
}

bool endsWith(const std::string& text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::vector<std::string> chromeFilesIn(const std::string& directory) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& item : std::filesystem::directory_iterator(directory, ec)) {
    const std::string name = item.path().filename().string();
    if (!item.is_regular_file(ec) || (!endsWith(name, ".json") && !endsWith(name, ".json.gz")))
      continue;
    const std::string head = headOf(item.path().string(), kTorchDumpHeadBytes);
    if (trace::looksLikeFlightDump(head) || trace::looksLikeTorchFlightDump(head)) continue;
    files.push_back(item.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TraceFormat detectFormat(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw IoError(strCat("cannot open '", path, "': ", std::strerror(errno),
                         " (give a ringx trace directory, a .ringx file or a Chrome trace .json)"));
  if (S_ISDIR(st.st_mode)) {
    if (isFlightDumpDirectory(path)) return TraceFormat::kFlightDump;
    if (isTorchFlightDumpDirectory(path)) return TraceFormat::kTorchFlightDump;
    // No ringx trace (no rank files, no manifest) but profiler files: their folder.
    std::error_code ec;
    bool ringx = false;
    for (const auto& item : std::filesystem::directory_iterator(path, ec)) {
      const std::string name = item.path().filename().string();
      ringx |= name == trace::kManifestFile || name.rfind("rank-", 0) == 0;
    }
    if (!ringx && !chromeFilesIn(path).empty()) return TraceFormat::kChromeDirectory;
    return TraceFormat::kRingxDirectory;
  }
  if (path.size() >= 13 && path.substr(path.size() - 13) == "manifest.json")
    return TraceFormat::kRingxDirectory;
  const std::string head = headOf(path, kTorchDumpHeadBytes);
  // The formats that say what they are in their first bytes.
  const std::string_view first(head.data(), std::min<size_t>(head.size(), 64));
  if (first.size() >= sizeof trace::kMagic &&
      std::memcmp(first.data(), trace::kMagic, sizeof trace::kMagic) == 0)
    return TraceFormat::kRingxFile;
  // gzip (.json.gz, as the profiler's use_gzip=True writes): a Chrome trace,
  // which the reader decompresses and checks.
  if (startsLikeGzip(first.data(), first.size())) return TraceFormat::kChromeJson;
  if (trace::looksLikeFlightDump(first)) return TraceFormat::kFlightDump;
  if (trace::looksLikeTorchFlightDump(head)) return TraceFormat::kTorchFlightDump;
  for (const char c : first) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '{' || c == '[') return TraceFormat::kChromeJson;
    break;
  }
  throw trace::FormatError(strCat("'", path,
                                  "' is neither a ringx trace (directory or .ringx file) nor a "
                                  "Chrome Trace Event JSON file (.json or .json.gz)"));
}

namespace {

// Waits while a test holds the load; throws once it is cancelled.
void checkpoint(LoadProgress& progress) {
  while (progress.holdAtFile.load() >= 0 &&
         progress.filesDone.load() >= uint32_t(progress.holdAtFile.load()) &&
         !progress.cancel.load())
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  if (progress.cancel.load()) throw LoadCancelled("loading was cancelled");
}

// Workers may only find categories (TraceStore's parallel building rule).
void registerRingxCategories(TraceStore& store) {
  for (int c = 1; c <= trace::kCategoryCount; ++c)
    store.category(trace::categoryName(static_cast<trace::Category>(c)));
}

// A rank file's records as a rank apart from the store (for adoptRank): aligned,
// its records dropped before the sort needs the memory, sorted. `events` is how
// many records it had, for the progress.
RankData ingestRankFile(TraceStore& store, trace::RankTrace&& trace,
                        std::vector<CollectiveSighting>* sightings, uint64_t* events) {
  RankData data;
  ingestRankTraceInto(store, data, trace, trace::ClockModel::forRank(trace), 0, sightings);
  *events = trace.events.size();
  trace = trace::RankTrace();
  TraceStore::sortRank(data);
  return data;
}

// A file is done: its records, its bytes, and one more file.
void countFile(LoadProgress& progress, uint64_t events, const std::string& file) {
  std::error_code ec;
  progress.events += events;
  progress.bytesDone += std::filesystem::file_size(file, ec);
  ++progress.filesDone;
}

// One ringx trace (a directory or a rank file), its ranks on `threads` workers.
void loadRingx(TraceStore& store, const std::string& path, LoadProgress& progress,
               unsigned threads) {
  trace::TraceReader reader(path);
  const size_t files = reader.files().size();
  progress.filesTotal += uint32_t(files);
  progress.bytesTotal += reader.totalBytes();
  registerRingxCategories(store);
  const bool arrows = files <= kMaxRanksWithCollectiveArrows;
  std::mutex mutex;  // guards the store's rank list and the sightings
  std::vector<CollectiveSighting> sightings;
  const trace::TraceScan scan = trace::scanTrace(reader, threads, [&](trace::RankTrace&& trace) {
    checkpoint(progress);
    std::vector<CollectiveSighting> local;
    uint64_t events = 0;
    RankData data = ingestRankFile(store, std::move(trace), arrows ? &local : nullptr, &events);
    TraceStore::compactRank(data);
    const std::string file = data.source;
    std::lock_guard<std::mutex> lock(mutex);
    store.adoptRank(std::move(data));
    sightings.insert(sightings.end(), local.begin(), local.end());
    countFile(progress, events, file);
  });
  for (const auto& w : scan.warnings) store.addWarning(w);
  if (arrows) {
    trace::CollectiveChains chains;
    for (const CollectiveSighting& s : sightings)
      chains.add(store.str(s.group), s.seq, s.groupSize, s.arrival);
    addCollectiveFlows(store, chains.takeAll());
  }
}

}  // namespace

void indexTrace(TraceStore& store, const std::string& path, LoadProgress* progressOrNull,
                unsigned threads) {
  LoadProgress own;
  LoadProgress& progress = progressOrNull ? *progressOrNull : own;
  trace::TraceReader reader(path);
  progress.filesTotal += uint32_t(reader.files().size());
  progress.bytesTotal += reader.totalBytes();
  registerRingxCategories(store);
  // Opened before, and unchanged since: the index on disk has it all.
  const std::string indexPath = traceIndexPath(path);
  if (loadTraceIndex(indexPath, reader, store)) {
    progress.fromIndexFile = true;
    progress.filesDone += uint32_t(reader.files().size());
    progress.bytesDone += reader.totalBytes();
    progress.events += store.eventCount();
    return;
  }
  // The lanes' groups come before the events: every file's header (its first
  // bytes) names its rank and host.
  std::vector<std::pair<int32_t, std::string>> hosts;
  for (size_t i = 0; i < reader.files().size(); ++i)
    if (const std::optional<trace::StreamHeader> h = reader.header(i))
      hosts.emplace_back(h->rank, h->host);
  auto lanes = std::make_shared<AggregateLanes>(AggregateLanes::groupRanks(hosts));
  std::mutex mutex;
  const trace::TraceScan scan = trace::scanTrace(reader, threads, [&](trace::RankTrace&& trace) {
    checkpoint(progress);
    uint64_t events = 0;
    RankData data = ingestRankFile(store, std::move(trace), nullptr, &events);
    lanes->add(store, data);
    // What stays: the rank without its events (its extent first).
    TraceStore::measureExtent(data);
    releaseMemory(data.tracks);
    releaseMemory(data.counters);
    releaseMemory(data.argBytes);
    data.eventsLoaded = false;
    const std::string file = data.source;
    std::lock_guard<std::mutex> lock(mutex);
    store.adoptRank(std::move(data));
    countFile(progress, events, file);
  });
  for (const auto& w : scan.warnings) store.addWarning(w);
  lanes->finish();
  lanes->setFromFiles();
  store.finalize();
  store.setAggregates(std::move(lanes));
  saveTraceIndex(indexPath, reader, store);  // best effort: a read-only cache just reads again
}

std::vector<RankData> loadRankEvents(TraceStore& store, const std::vector<int32_t>& ranks,
                                     unsigned threads) {
  std::vector<std::string> files;
  for (int32_t r : ranks)
    if (const RankData* rank = store.findRank(r); rank && !rank->eventsLoaded)
      files.push_back(rank->source);
  trace::TraceReader reader(std::move(files));
  std::vector<RankData> out;
  std::mutex mutex;
  trace::scanTrace(reader, threads ? threads : std::max(1u, std::thread::hardware_concurrency()),
                   [&](trace::RankTrace&& trace) {
                     uint64_t events = 0;
                     RankData data = ingestRankFile(store, std::move(trace), nullptr, &events);
                     TraceStore::compactRank(data);
                     std::lock_guard<std::mutex> lock(mutex);
                     out.push_back(std::move(data));
                   });
  return out;
}

void loadTraces(TraceStore& store, const std::vector<std::string>& paths, LoadProgress* progress,
                unsigned threads) {
  LoadProgress own;
  LoadProgress& p = progress ? *progress : own;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  // ringx traces first, whatever the order given: a profiler file aligns to
  // its rank's ringx clock reference, which must be in the store by then.
  std::vector<std::string> chrome, dumps, torchDumps;
  for (const auto& path : paths) {
    switch (detectFormat(path)) {
      case TraceFormat::kRingxDirectory:
      case TraceFormat::kRingxFile:
        loadRingx(store, path, p, threads);
        break;
      case TraceFormat::kChromeJson:
        chrome.push_back(path);
        break;
      case TraceFormat::kChromeDirectory:
        for (std::string& file : chromeFilesIn(path)) chrome.push_back(std::move(file));
        break;
      case TraceFormat::kFlightDump:
        dumps.push_back(path);
        break;
      case TraceFormat::kTorchFlightDump:
        torchDumps.push_back(path);
        break;
    }
  }
  // After the ringx traces too: a dump's rank moves onto its trace's clock.
  auto sequential = [&](const std::string& path) {
    checkpoint(p);
    std::error_code ec;
    const uint64_t bytes =
        std::filesystem::is_regular_file(path, ec) ? std::filesystem::file_size(path, ec) : 0;
    p.filesTotal += 1;
    p.bytesTotal += bytes;
    return bytes;
  };
  auto finished = [&](uint64_t bytes) {
    p.bytesDone += bytes;
    ++p.filesDone;
  };
  for (const auto& path : dumps) {
    const uint64_t bytes = sequential(path);
    const trace::FlightDumpSet set = trace::readFlightDumps(path);
    if (set.dumps.empty())
      throw trace::FormatError(strCat("no readable flight recorder dump in '", path, "'",
                                      set.warnings.empty() ? "" : ": " + set.warnings.front()));
    ingestFlightDumps(store, set);
    finished(bytes);
  }
  // torch's dumps of every path are one job's: one set, so the hang report sees every rank.
  if (!torchDumps.empty()) {
    trace::TorchFlightSet all;
    all.path = torchDumps.front();
    for (const auto& path : torchDumps) {
      const uint64_t bytes = sequential(path);
      trace::TorchFlightSet set = trace::readTorchFlightDumps(path);
      if (set.dumps.empty())
        throw trace::FormatError(strCat("no readable torch Flight Recorder dump in '", path, "'",
                                        set.warnings.empty() ? "" : ": " + set.warnings.front()));
      for (auto& d : set.dumps) all.dumps.push_back(std::move(d));
      for (auto& w : set.warnings) all.warnings.push_back(std::move(w));
      finished(bytes);
    }
    std::stable_sort(all.dumps.begin(), all.dumps.end(),
                     [](const trace::TorchFlightDump& a, const trace::TorchFlightDump& b) {
                       return a.rank < b.rank;
                     });
    ingestTorchFlightDumps(store, std::move(all));
  }
  for (const auto& path : chrome) {
    const uint64_t bytes = sequential(path);
    ingestChromeTraceFile(store, path);
    finished(bytes);
  }
  store.finalize();
  p.events = store.eventCount();
}

BackgroundLoad::BackgroundLoad(std::vector<std::string> paths, LoadOptions options)
    : paths_(std::move(paths)), store_(std::make_unique<TraceStore>()) {
  progress_.holdAtFile = options.holdAtFile;
  thread_ = std::thread([this, options] {
    const auto begin = std::chrono::steady_clock::now();
    const unsigned threads =
        options.threads ? options.threads : std::max(1u, std::thread::hardware_concurrency());
    try {
      // One ringx trace of many ranks and more bytes than the limit opens as an index.
      if (paths_.size() == 1) {
        const TraceFormat format = detectFormat(paths_[0]);
        if (format == TraceFormat::kRingxDirectory) {
          const trace::TraceReader reader(paths_[0]);
          indexed_ = reader.files().size() > kAggregateAboveRanks &&
                     reader.totalBytes() > options.indexAboveBytes;
        }
      }
      if (indexed_) {
        indexTrace(*store_, paths_[0], &progress_, threads);
      } else {
        loadTraces(*store_, paths_, &progress_, threads);
        // Built here, not by the first frame: it reads every span once.
        if (store_->ranks().size() > kAggregateAboveRanks)
          store_->setAggregates(std::make_shared<AggregateLanes>(*store_));
      }
    } catch (...) {
      error_ = std::current_exception();
    }
    elapsedMs_ =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
    done_.store(true, std::memory_order_release);
  });
}

BackgroundLoad::~BackgroundLoad() {
  progress_.cancel = true;
  if (thread_.joinable()) thread_.join();
}

std::unique_ptr<TraceStore> BackgroundLoad::take() {
  if (thread_.joinable()) thread_.join();
  if (error_) std::rethrow_exception(error_);
  return std::move(store_);
}

}  // namespace ringx::model
