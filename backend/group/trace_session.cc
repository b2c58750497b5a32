#include "backend/group/trace_session.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <sstream>

#include "backend/bootstrap/host_identity.h"
#include "backend/bootstrap/sockets.h"
#include "backend/group/clock_sync.h"
#include "base/error.h"
#include "trace/format/live_protocol.h"
#include "trace/format/manifest.h"
#include "trace/record/file_sink.h"
#include "trace/record/live_server.h"
#include "trace/record/recorder.h"

namespace ringx {
namespace {

int intFromEnvironment(const char* name, int fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  RINGX_CHECK(end != nullptr && *end == '\0' && value >= 0, "ringx: ", name, "='", text,
              "' is not a non-negative integer (milliseconds)");
  return static_cast<int>(value);
}

struct SessionState {
  std::mutex mutex;
  bool active = false;
  int started = 0;  // sessions so far: keeps store keys of successive sessions apart
  std::unique_ptr<ClockService> clock;
  std::string liveAddress;
  bool atexitRegistered = false;
};

SessionState& state() {
  static SessionState* s = new SessionState();  // outlives static destructors (atexit stop)
  return *s;
}

// Starts this rank's live server and publishes its endpoint; rank 0 (which
// listens on the configured port) then serves every rank's endpoint as its
// directory. Returns this rank's "host:port".
std::string startLiveServer(const TraceConfig& config, Store& store, const std::string& prefix,
                            int rank, int size, std::chrono::milliseconds timeout) {
  const trace::HostPort listen = trace::parseHostPort(config.listen);
  trace::LiveServer::Options options;
  options.host = listen.host;
  options.port = rank == 0 ? listen.port : 0;  // the others: ephemeral ports
  options.token = config.token;
  auto server = std::make_unique<trace::LiveServer>(options);
  trace::LiveServer* raw = server.get();
  // A wildcard bind is reached through one of this host's addresses.
  std::string host = listen.host;
  if (host == "0.0.0.0" || host == "::" || host.empty()) {
    const auto addresses = bootstrap::advertisedAddresses();
    host = addresses.empty() ? "127.0.0.1" : addresses.front();
  }
  const int port = raw->port();
  trace::Recorder::instance().addSink(std::move(server));
  store.setString(strCat(prefix, "live/", rank), strCat(host, " ", port));
  if (rank == 0) {
    std::vector<trace::DirectoryEntry> entries;
    for (int r = 0; r < size; ++r) {
      std::istringstream entry(store.getString(strCat(prefix, "live/", r), timeout));
      trace::DirectoryEntry e;
      e.rank = r;
      entry >> e.host >> e.port;
      entries.push_back(e);
    }
    raw->setDirectory(std::move(entries));
  }
  return strCat(host, ":", port);
}

// Rank 0 lists every rank's host and pid, so a reader knows the job even when
// some rank files are missing.
void writeManifest(const std::string& dir, Store& store, const std::string& prefix, int size,
                   std::chrono::milliseconds timeout, int64_t startWallNs) {
  trace::Manifest manifest;
  manifest.worldSize = size;
  manifest.startWallNs = startWallNs;
  for (int r = 0; r < size; ++r) {
    // Each rank published "host\npid".
    const std::string entry = store.getString(strCat(prefix, "rank/", r), timeout);
    const size_t split = entry.find('\n');
    trace::ManifestRank rank;
    rank.rank = r;
    rank.host = entry.substr(0, split);
    rank.pid =
        split == std::string::npos ? 0 : std::strtoll(entry.c_str() + split + 1, nullptr, 10);
    rank.file = strCat("rank-", r, ".ringx");
    manifest.ranks.push_back(std::move(rank));
  }
  trace::writeManifest(dir, manifest);
}

}  // namespace

TraceConfig traceConfigFromEnvironment() {
  TraceConfig config;
  if (const char* dir = std::getenv("RINGX_TRACE_DIR")) config.dir = dir;
  if (const char* listen = std::getenv("RINGX_TRACE_LISTEN")) config.listen = listen;
  if (const char* token = std::getenv("RINGX_TRACE_TOKEN")) config.token = token;
  config.rssIntervalMs = intFromEnvironment("RINGX_TRACE_RSS_MS", config.rssIntervalMs);
  config.flushIntervalMs = intFromEnvironment("RINGX_TRACE_FLUSH_MS", config.flushIntervalMs);
  config.clockSyncIntervalMs =
      intFromEnvironment("RINGX_TRACE_CLOCK_SYNC_MS", config.clockSyncIntervalMs);
  return config;
}

void TraceSession::start(const TraceConfig& config, Store& store, int rank, int size,
                         const std::string& token, std::chrono::milliseconds timeout) {
  SessionState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  RINGX_CHECK(!s.active, "ringx: tracing is already on in this process; stop it first");
  RINGX_CHECK(config.enabled(), "ringx: tracing needs a directory or a live address");
  const std::string prefix = strCat("ringx/trace/", s.started, "/");
  const auto deadline = Clock::now() + timeout;

  if (!config.dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(config.dir, error);
    if (error) {
      RINGX_THROW(IoError, "ringx: cannot create the trace directory ", config.dir, ": ",
                  error.message(), " (set RINGX_TRACE_DIR to a writable directory)");
    }
  }

  trace::RecorderOptions options;
  options.rank = rank;
  options.worldSize = size;
  options.rssIntervalMs = config.rssIntervalMs;
  options.flushIntervalMs = config.flushIntervalMs;
  trace::Recorder& recorder = trace::Recorder::instance();
  recorder.start(options);
  try {
    if (!config.dir.empty()) {
      recorder.addSink(std::make_unique<trace::FileSink>(trace::rankFileName(config.dir, rank)));
    }
    if (!config.listen.empty()) {
      s.liveAddress = startLiveServer(config, store, prefix, rank, size, timeout);
    }
    store.setString(strCat(prefix, "rank/", rank),
                    strCat(recorder.options().host, "\n", ::getpid()));
    if (rank == 0 && !config.dir.empty()) {
      writeManifest(config.dir, store, prefix, size, timeout,
                    std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count());
    }
    if (size > 1) {
      // Clock connections: the edges of the clock tree only (clock_sync.h).
      const int parent = clockTreeParent(rank);
      const std::vector<int> children = clockTreeChildren(rank, size);
      std::vector<int> edges = children;
      if (parent >= 0) edges.push_back(parent);
      auto sockets = bootstrap::connectSockets(store, rank, size, strCat("clock", s.started), token,
                                               deadline, edges);
      std::vector<int> childFds;
      for (int child : children) childFds.push_back(sockets[child].fd);
      s.clock = std::make_unique<ClockService>(
          rank, parent >= 0 ? sockets[parent].fd : -1, std::move(childFds),
          std::chrono::milliseconds(config.clockSyncIntervalMs));
      s.clock->waitFirstMeasurement(std::chrono::seconds(5));
    }
  } catch (...) {
    s.clock.reset();
    s.liveAddress.clear();
    recorder.stop();
    throw;
  }
  s.active = true;
  ++s.started;
  if (!s.atexitRegistered) {
    // A job that never calls stop() still gets its last events on disk.
    std::atexit([] { TraceSession::stop(); });
    s.atexitRegistered = true;
  }
}

void TraceSession::stop() {
  SessionState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.active) return;
  s.clock.reset();
  trace::Recorder::instance().stop();
  s.liveAddress.clear();
  s.active = false;
}

bool TraceSession::active() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().active;
}

std::string TraceSession::liveAddress() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().liveAddress;
}

}  // namespace ringx
