// The live attach's background thread and the hand-over to the UI thread.
//
// Threads. The background thread owns the sockets and the LiveStreams: it waits
// in poll(2) without any lock, lets the ready streams decode into their own
// RankTrace, then takes mutex_ only to merge the new records into the rank's
// accumulated trace (and empties the stream's trace so nothing is held twice).
// drainInto() and saveTo() read the accumulated traces under the same mutex.
//
// Reconnects. A new stream begins with the server's backlog (its most recent
// records), which usually repeats the tail of what the previous stream gave. The
// first event of a new stream is looked up among the events received before,
// latest first; from a match on, the new stream's events are compared one by one
// with the old ones and skipped while they repeat them. A new event that matches
// nothing is kept (one the old stream lost, or a gap), so nothing is lost and
// nothing is counted twice.
#include "trace/model/live_source.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "base/error.h"
#include "base/format.h"
#include "trace/format/manifest.h"
#include "trace/model/ringx_ingest.h"
#include "trace/read/alignment.h"
#include "trace/read/trace_dir.h"

namespace ringx::model {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// poll(2)'s longest wait: the wake-up pipe makes stopping immediate anyway, this
// only bounds how late a scheduled reconnect can be.
constexpr int kPollMs = 50;
// A stream that lived this long was healthy: its end restarts the backoff.
constexpr auto kHealthyStream = std::chrono::seconds(5);
// Consecutive new events matching none received before, after which a new
// stream is taken as unrelated to the old one (a restarted process).
constexpr int kMaxMismatchRun = 256;
constexpr size_t kNone = std::numeric_limits<size_t>::max();

// Backoff after the n-th consecutive failure (n >= 1). Refusals (wrong token,
// not a ringx server) will not heal by themselves: retry them slowly, so a
// wrong token costs the server one request every few seconds, not a busy loop.
milliseconds backoff(int failures, bool refused) {
  const int64_t base = refused ? 1000 : 100;
  const int64_t cap = refused ? 5000 : 2000;
  const int shift = std::min(std::max(failures - 1, 0), 10);
  return milliseconds(std::min(cap, base << shift));
}

// An error's text without RINGX_THROW's " [file.cc:123]" suffix: the UI shows it.
std::string plainMessage(const char* what) {
  std::string text = what;
  if (!text.empty() && text.back() == ']') {
    const size_t open = text.rfind(" [");
    if (open != std::string::npos && text.find(':', open) != std::string::npos) text.resize(open);
  }
  return text;
}

std::string endpointText(const std::string& host, int port) {
  return host.find(':') != std::string::npos ? strCat("[", host, "]:", port)
                                             : strCat(host, ":", port);
}

// True once the stream's header was decoded. The header is always the first
// record (the decoder refuses anything else), and every real one names a pid or
// a host, so a default-valued header means nothing arrived yet.
bool headerDecoded(const trace::RankTrace& t) {
  const trace::StreamHeader none;
  const trace::StreamHeader& h = t.header;
  return t.strings.size() > 1 || !t.events.empty() || !t.clockSyncs.empty() || t.dropped > 0 ||
         h.pid != none.pid || h.host != none.host || h.rank != none.rank ||
         h.worldSize != none.worldSize || h.startSteadyNs != none.startSteadyNs ||
         h.startWallNs != none.startWallNs;
}

bool sameBits(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0; }

bool sameArg(const trace::Arg& a, const trace::Arg& b) {
  if (a.key != b.key || a.type != b.type) return false;
  switch (a.type) {
    case trace::ArgType::kInt:
      return a.intValue == b.intValue;
    case trace::ArgType::kDouble:
      return sameBits(a.doubleValue, b.doubleValue);
    case trace::ArgType::kString:
      return a.stringId == b.stringId;
  }
  return false;
}

void writeFileAtomically(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) RINGX_THROW(IoError, "cannot write ", tmp, ": ", std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) RINGX_THROW(IoError, "cannot rename ", tmp, " to ", path, ": ", ec.message());
}

}  // namespace

// The connection attempts' machinery; named in the header only as pointees.
namespace live_detail {

// What a connection attempt produced.
struct AttemptResult {
  std::vector<trace::DirectoryEntry> directory;  // fetchDirectory()'s
  std::unique_ptr<trace::LiveStream> stream;     // a handshaken stream
  std::exception_ptr error;
};

// A blocking client call (fetchDirectory(), a LiveStream's handshake) on a
// thread of its own. Neither can be interrupted, and a silent server holds one
// for its whole timeout; on their own thread they never delay the streams of
// the other ranks nor stopping. The attempt shares nothing with the LiveSource
// but this object, so a LiveSource that stops leaves a running attempt to
// finish alone (its result, a socket at most, is then simply closed).
struct Attempt {
  int fd = -1;  // an eventfd, readable once finished
  std::mutex mutex;
  bool finished = false;
  AttemptResult result;
  ~Attempt() {
    if (fd >= 0) ::close(fd);
  }
};

// Runs work(AttemptResult&) on a detached thread.
template <typename Work>
std::shared_ptr<Attempt> startAttempt(Work work) {
  auto attempt = std::make_shared<Attempt>();
  attempt->fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (attempt->fd < 0) RINGX_THROW(IoError, "eventfd: ", std::strerror(errno));
  std::thread([attempt, work = std::move(work)] {
    AttemptResult result;
    try {
      work(result);
    } catch (...) {
      result.error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(attempt->mutex);
      attempt->result = std::move(result);
      attempt->finished = true;
    }
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(attempt->fd, &one, sizeof(one));
  }).detach();
  return attempt;
}

// Moves the result out once the attempt finished; false while it runs.
bool takeResult(Attempt& attempt, AttemptResult* out) {
  std::lock_guard<std::mutex> lock(attempt.mutex);
  if (!attempt.finished) return false;
  *out = std::move(attempt.result);
  return true;
}

// Why an attempt failed, for the UI, and whether the server refused us (a
// wrong token, not a ringx server: retrying will not help soon).
struct Failure {
  std::string message;
  bool refused = false;
};

Failure classify(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const PeerError& e) {
    return {plainMessage(e.what()), true};
  } catch (const trace::FormatError& e) {
    return {plainMessage(e.what()), true};
  } catch (const std::exception& e) {
    return {plainMessage(e.what()), false};  // not up yet, unreachable, timed out
  } catch (...) {
    return {"unknown error", false};
  }
}

}  // namespace live_detail

using live_detail::Attempt;
using live_detail::AttemptResult;
using live_detail::classify;
using live_detail::Failure;
using live_detail::startAttempt;
using live_detail::takeResult;

const char* liveStateName(LiveRankStatus::State state) {
  switch (state) {
    case LiveRankStatus::kConnecting:
      return "connecting";
    case LiveRankStatus::kConnected:
      return "connected";
    case LiveRankStatus::kDisconnected:
      return "disconnected";
    case LiveRankStatus::kFailed:
      return "failed";
  }
  return "?";
}

// One rank of the directory. "Shared" fields are read by the UI thread and
// guarded by LiveSource::mutex_; the rest belongs to the background thread.
struct LiveSource::Rank {
  // ---- shared ----
  trace::RankTrace trace;  // everything received, with this object's own string ids
  bool headerSeen = false;
  LiveRankStatus status;
  // drainInto()'s progress (only the UI thread uses these, under the mutex).
  size_t drained = 0;
  bool metaDirty = false;  // header, dropped count: re-set the store's rank data
  size_t syncsInModel = kNone;
  trace::ClockModel clock;

  // ---- background thread only ----
  trace::DirectoryEntry entry;
  std::unique_ptr<trace::LiveStream> stream;
  std::shared_ptr<Attempt> pending;                              // a connection attempt under way
  std::unordered_map<std::string, uint32_t> stringIds{{"", 0}};  // trace.strings' ids
  std::unordered_set<int64_t> syncTimes;                         // clock syncs already kept
  std::vector<uint32_t> idMap;  // the current stream's string id -> trace's
  bool headerTaken = false;     // the current stream's header was copied
  uint64_t bytesBefore = 0;     // received by earlier streams
  bool everConnected = false;
  std::string lastEnd;  // why the last stream ended
  int failures = 0;
  Clock::time_point nextAttempt{};
  Clock::time_point connectedAt{};
  // Skipping a new stream's replay of what earlier streams delivered.
  bool resolving = false;
  size_t overlapEnd = 0;      // events received before this stream
  size_t overlapPos = kNone;  // next old event expected; kNone: no event seen yet
  int mismatchRun = 0;
  std::vector<trace::Arg> scratch;

  uint32_t intern(const std::string& text) {
    const auto it = stringIds.find(text);
    if (it != stringIds.end()) return it->second;
    const auto id = static_cast<uint32_t>(trace.strings.size());
    trace.strings.push_back(text);
    stringIds.emplace(text, id);
    return id;
  }
  uint32_t map(uint32_t streamId) const { return streamId < idMap.size() ? idMap[streamId] : 0; }

  bool sameAs(size_t old, const trace::Event& e, const std::vector<trace::Arg>& args) const {
    const trace::Event& o = trace.events[old];
    if (o.beginNs != e.beginNs || o.endNs != e.endNs || o.kind != e.kind ||
        o.category != e.category || o.track != e.track || o.name != e.name ||
        o.argCount != e.argCount || !sameBits(o.value, e.value)) {
      return false;
    }
    for (uint32_t i = 0; i < o.argCount; ++i) {
      if (!sameArg(trace.args[o.firstArg + i], args[i])) return false;
    }
    return true;
  }

  // True when `e` (already in this trace's string ids) repeats an event an
  // earlier stream delivered; false for a new one.
  bool isReplay(const trace::Event& e, const std::vector<trace::Arg>& args) {
    if (!resolving) return false;
    if (overlapPos == kNone) {
      for (size_t p = overlapEnd; p-- > 0;) {
        if (sameAs(p, e, args)) {
          overlapPos = p + 1;
          resolving = overlapPos < overlapEnd;
          return true;
        }
      }
      resolving = false;  // starts after what we have (a gap, or another process)
      return false;
    }
    if (sameAs(overlapPos, e, args)) {
      mismatchRun = 0;
      resolving = ++overlapPos < overlapEnd;
      return true;
    }
    // One the old stream lost (shed for a slow client): keep it, go on comparing.
    if (++mismatchRun > kMaxMismatchRun) resolving = false;
    return false;
  }
};

LiveSource::LiveSource(std::string hostPort, std::string token, std::vector<int32_t> ranks,
                       bool summarizeOthers)
    : hostPort_(std::move(hostPort)),
      token_(std::move(token)),
      only_(std::move(ranks)),
      summarizeOthers_(summarizeOthers && !only_.empty()) {
  address_ = trace::parseHostPort(hostPort_);
  if (address_.port == 0) {
    RINGX_THROW(
        InvalidArgument, "bad address '", hostPort_,
        "': port 0 cannot be attached to; pass the port the job's RINGX_TRACE_LISTEN names");
  }
  const bool tokenOk =
      token_.size() <= 256 &&
      std::all_of(token_.begin(), token_.end(), [](char c) { return c > ' ' && c < 127; });
  if (!tokenOk) {
    RINGX_THROW(InvalidArgument, "the live trace token must be printable characters without ",
                "spaces, at most 256 (RINGX_TRACE_TOKEN)");
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    RINGX_THROW(IoError, "pipe2: ", std::strerror(errno));
  }
  wakeRead_ = fds[0];
  wakeWrite_ = fds[1];
  thread_ = std::thread([this] { run(); });
}

LiveSource::~LiveSource() {
  stop_ = true;
  const char byte = 1;
  [[maybe_unused]] const ssize_t n = ::write(wakeWrite_, &byte, 1);
  if (thread_.joinable()) thread_.join();
  ::close(wakeRead_);
  ::close(wakeWrite_);
}

bool LiveSource::sleepUnlessStopped(milliseconds ms) {
  if (stop_) return false;
  pollfd pfd{wakeRead_, POLLIN, 0};
  ::poll(&pfd, 1, static_cast<int>(ms.count()));
  return !stop_;
}

void LiveSource::run() {
  try {
    fetchDirectoryLoop();
    if (!stop_) streamLoop();
  } catch (const std::exception& e) {
    // Nothing should get here (each connection's errors are its own), but a
    // thread that dies must say so rather than look connected.
    std::lock_guard<std::mutex> lock(mutex_);
    haveDirectory_ = false;
    directoryState_ = LiveRankStatus::kFailed;
    directoryMessage_ = strCat("the live attach stopped: ", plainMessage(e.what()));
  }
}

bool LiveSource::waitForAttempt(const Attempt& attempt) {
  pollfd fds[2] = {{wakeRead_, POLLIN, 0}, {attempt.fd, POLLIN, 0}};
  while (!stop_) {
    const int rc = ::poll(fds, 2, -1);
    if (rc < 0 && errno != EINTR) return sleepUnlessStopped(milliseconds(kPollMs));
    if (rc > 0) return !stop_ && fds[0].revents == 0;
  }
  return false;
}

void LiveSource::fetchDirectoryLoop() {
  int failures = 0;
  while (!stop_) {
    Failure failure;
    try {
      auto attempt = startAttempt(
          [host = address_.host, port = address_.port, token = token_](AttemptResult& r) {
            r.directory = trace::fetchDirectory(host, port, token);
          });
      if (!waitForAttempt(*attempt)) return;
      AttemptResult result;
      if (!takeResult(*attempt, &result)) continue;  // a spurious wake-up
      if (!result.error) {
        std::vector<std::unique_ptr<Rank>> ranks;
        size_t followed = 0;  // in full
        for (const trace::DirectoryEntry& entry : result.directory) {
          if (!ranks.empty() && ranks.back()->entry.rank == entry.rank) continue;
          const bool listed =
              only_.empty() || std::binary_search(only_.begin(), only_.end(), entry.rank);
          if (!listed && !summarizeOthers_) continue;
          auto rank = std::make_unique<Rank>();
          rank->entry = entry;
          rank->trace.source = endpointText(entry.host, entry.port);
          rank->status.rank = entry.rank;
          rank->status.endpoint = rank->trace.source;
          rank->status.summary = !listed;
          followed += listed;
          ranks.push_back(std::move(rank));
        }
        std::lock_guard<std::mutex> lock(mutex_);
        if (followed == 0 && !only_.empty()) {
          // Nothing to follow: say so rather than show "connected to 0/0 ranks".
          directoryState_ = LiveRankStatus::kFailed;
          directoryMessage_ =
              strCat("the job's directory at ", hostPort_, " has none of ", ringx::rankList(only_),
                     " (it lists ", result.directory.size(), " ranks)");
          return;
        }
        ranks_ = std::move(ranks);
        haveDirectory_ = true;
        directoryState_ = LiveRankStatus::kConnected;
        directoryMessage_.clear();
        return;
      }
      failure = classify(result.error);
      // Rank 0's server is up but the job has not published every endpoint yet.
      if (failure.message.find("directory not ready") != std::string::npos) failure.refused = false;
    } catch (const std::exception& e) {
      failure = Failure{plainMessage(e.what()), false};  // no thread or eventfd to be had
    }
    ++failures;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      directoryState_ = failure.refused ? LiveRankStatus::kFailed : LiveRankStatus::kConnecting;
      directoryMessage_ = failure.message;
    }
    if (!sleepUnlessStopped(backoff(failures, failure.refused))) return;
  }
}

void LiveSource::streamLoop() {
  // ranks_ does not change after the directory arrived, so this thread may walk
  // it without the lock.
  std::vector<pollfd> fds;
  std::vector<Rank*> fdRank;
  while (!stop_) {
    const Clock::time_point now = Clock::now();
    fds.assign(1, pollfd{wakeRead_, POLLIN, 0});
    fdRank.assign(1, nullptr);
    int timeoutMs = kPollMs;
    for (const auto& rank : ranks_) {
      if (!rank->stream && !rank->pending && now >= rank->nextAttempt) startConnect(*rank);
      if (rank->stream) {
        fds.push_back(pollfd{rank->stream->fd(), POLLIN, 0});
        fdRank.push_back(rank.get());
      } else if (rank->pending) {
        fds.push_back(pollfd{rank->pending->fd, POLLIN, 0});
        fdRank.push_back(rank.get());
      } else {
        const auto wait =
            std::chrono::duration_cast<milliseconds>(rank->nextAttempt - now).count() + 1;
        timeoutMs = static_cast<int>(std::clamp<int64_t>(wait, 0, timeoutMs));
      }
    }
    const int rc = ::poll(fds.data(), fds.size(), timeoutMs);
    if (rc < 0) {
      if (errno != EINTR && !sleepUnlessStopped(milliseconds(kPollMs))) return;
      continue;
    }
    if (fds[0].revents != 0 || stop_) return;
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Rank& rank = *fdRank[i];
      if (rank.stream) {
        pump(rank);
      } else {
        finishConnect(rank);
      }
    }
  }
}

void LiveSource::startConnect(Rank& rank) {
  try {
    // status.summary is fixed once the directory arrived: no lock needed to read it here.
    const trace::LiveStreamKind kind =
        rank.status.summary ? trace::LiveStreamKind::kSummary : trace::LiveStreamKind::kFull;
    rank.pending = startAttempt([host = rank.entry.host, port = rank.entry.port, token = token_,
                                 kind](AttemptResult& r) {
      r.stream =
          std::make_unique<trace::LiveStream>(host, port, token, trace::kLiveDefaultTimeout, kind);
    });
  } catch (const std::exception& e) {
    connectFailed(rank, Failure{plainMessage(e.what()), false});
  }
}

void LiveSource::connectFailed(Rank& rank, const Failure& failure) {
  ++rank.failures;
  rank.nextAttempt = Clock::now() + backoff(rank.failures, failure.refused);
  std::lock_guard<std::mutex> lock(mutex_);
  LiveRankStatus& s = rank.status;
  if (failure.refused) {
    s.state = LiveRankStatus::kFailed;
    s.message = failure.message;
  } else if (rank.everConnected) {
    s.state = LiveRankStatus::kDisconnected;
    s.message = strCat(rank.lastEnd, " (reconnecting: ", failure.message, ")");
  } else {
    s.state = LiveRankStatus::kConnecting;
    s.message = failure.message;
  }
}

void LiveSource::finishConnect(Rank& rank) {
  AttemptResult result;
  if (!takeResult(*rank.pending, &result)) return;
  rank.pending.reset();
  if (result.error) {
    connectFailed(rank, classify(result.error));
    return;
  }
  rank.stream = std::move(result.stream);
  rank.connectedAt = Clock::now();
  rank.idMap.assign(1, 0);
  rank.headerTaken = false;
  rank.overlapEnd = rank.trace.events.size();
  rank.resolving = rank.overlapEnd > 0;
  rank.overlapPos = kNone;
  rank.mismatchRun = 0;
  std::lock_guard<std::mutex> lock(mutex_);
  LiveRankStatus& s = rank.status;
  s.state = LiveRankStatus::kConnected;
  s.message.clear();
  if (rank.everConnected) ++s.reconnects;
  rank.everConnected = true;
  // The handshake may have read the first records along with the status line.
  mergeLocked(rank);
}

void LiveSource::pump(Rank& rank) {
  bool alive = true;
  std::string reason;
  try {
    alive = rank.stream->poll(0);
    if (!alive) reason = rank.stream->closeReason();
  } catch (const std::exception& e) {
    alive = false;
    reason = plainMessage(e.what());
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    mergeLocked(rank);  // what was decoded before an error still counts
  }
  if (!alive) endStream(rank, reason.empty() ? "the stream ended" : reason);
}

void LiveSource::mergeLocked(Rank& rank) {
  trace::RankTrace& in = rank.stream->trace();
  trace::RankTrace& out = rank.trace;
  bool changed = false;

  if (!rank.headerTaken && headerDecoded(in)) {
    rank.headerTaken = true;
    out.header = in.header;
    // The directory says which rank this endpoint is; the store is keyed by it.
    out.header.rank = rank.entry.rank;
    rank.headerSeen = true;
    rank.metaDirty = true;
    changed = true;
  }
  for (size_t id = rank.idMap.size(); id < in.strings.size(); ++id) {
    rank.idMap.push_back(rank.intern(in.strings[id]));
  }

  // Dropped records replayed from the backlog were counted by the old stream;
  // until the replay is over, the new stream's are taken as such.
  const bool countDropped = !rank.resolving;
  for (const trace::Event& e : in.events) {
    trace::Event m = e;
    m.track = rank.map(e.track);
    m.name = rank.map(e.name);
    rank.scratch.clear();
    for (uint32_t i = 0; i < e.argCount && e.firstArg + i < in.args.size(); ++i) {
      trace::Arg a = in.args[e.firstArg + i];
      a.key = rank.map(a.key);
      if (a.type == trace::ArgType::kString) a.stringId = rank.map(a.stringId);
      rank.scratch.push_back(a);
    }
    m.argCount = static_cast<uint32_t>(rank.scratch.size());
    if (rank.isReplay(m, rank.scratch)) continue;
    m.firstArg = static_cast<uint32_t>(out.args.size());
    out.args.insert(out.args.end(), rank.scratch.begin(), rank.scratch.end());
    out.events.push_back(m);
    changed = true;
  }
  // The decoder appends after whatever is there (firstArg = args.size()), so the
  // stream's copy can go: only its strings are needed for later records.
  in.events.clear();
  in.args.clear();

  for (const trace::ClockSync& sync : in.clockSyncs) {
    if (rank.syncTimes.insert(sync.localNs).second) {
      out.clockSyncs.push_back(sync);
      changed = true;
    }
  }
  in.clockSyncs.clear();
  if (in.dropped > 0) {
    if (countDropped) {
      out.dropped += in.dropped;
      rank.metaDirty = true;
      changed = true;
    }
    in.dropped = 0;
  }

  rank.status.bytes = rank.bytesBefore + rank.stream->bytesReceived();
  rank.status.events = out.events.size();
  if (changed) fresh_ = true;
}

void LiveSource::endStream(Rank& rank, std::string reason) {
  const Clock::time_point now = Clock::now();
  // A stream that stayed up a while was fine: its end starts the backoff anew.
  if (now - rank.connectedAt >= kHealthyStream) rank.failures = 0;
  ++rank.failures;
  rank.nextAttempt = now + backoff(rank.failures, false);
  rank.lastEnd = reason;
  std::lock_guard<std::mutex> lock(mutex_);
  rank.bytesBefore += rank.stream->bytesReceived();
  rank.status.bytes = rank.bytesBefore;
  rank.stream.reset();
  rank.status.state = LiveRankStatus::kDisconnected;
  rank.status.message = std::move(reason);
}

// ---- the UI thread's side ------------------------------------------------------------

std::vector<LiveRankStatus> LiveSource::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<LiveRankStatus> out;
  out.reserve(ranks_.size());
  for (const auto& rank : ranks_) out.push_back(rank->status);
  return out;
}

LiveRankStatus::State LiveSource::state() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!haveDirectory_) return directoryState_;
  bool failed = false, disconnected = false, connecting = false;
  for (const auto& rank : ranks_) {
    failed |= rank->status.state == LiveRankStatus::kFailed;
    disconnected |= rank->status.state == LiveRankStatus::kDisconnected;
    connecting |= rank->status.state == LiveRankStatus::kConnecting;
  }
  if (failed) return LiveRankStatus::kFailed;
  if (disconnected) return LiveRankStatus::kDisconnected;
  if (connecting) return LiveRankStatus::kConnecting;
  return LiveRankStatus::kConnected;
}

std::string LiveSource::stateText() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!haveDirectory_) {
    if (directoryState_ == LiveRankStatus::kFailed) return directoryMessage_;
    std::string text = strCat("fetching the directory from ", hostPort_);
    if (!directoryMessage_.empty()) text += strCat(" (last try: ", directoryMessage_, ")");
    return text;
  }
  // Full streams and summaries counted apart: "connected to 8 ranks" must not
  // claim the full events of ranks that only send their collectives.
  size_t connected[2] = {0, 0}, total[2] = {0, 0};
  const LiveRankStatus* firstProblem = nullptr;
  for (const auto& rank : ranks_) {
    const int summary = rank->status.summary ? 1 : 0;
    ++total[summary];
    if (rank->status.state == LiveRankStatus::kConnected) {
      ++connected[summary];
    } else if (firstProblem == nullptr) {
      firstProblem = &rank->status;
    }
  }
  std::string text = strCat("connected to ", connected[0], "/", total[0], " ranks");
  if (total[1] > 0) text += strCat(", summaries from ", connected[1], "/", total[1]);
  if (firstProblem != nullptr) {
    text += strCat("; rank ", firstProblem->rank, " ", liveStateName(firstProblem->state));
    if (!firstProblem->message.empty()) text += strCat(": ", firstProblem->message);
  }
  return text;
}

bool LiveSource::drainInto(TraceStore& store) {
  if (!fresh_.exchange(false)) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  bool changed = false;
  for (const auto& rank : ranks_) {
    Rank& r = *rank;
    if (!r.headerSeen) continue;
    const bool newSyncs = r.trace.clockSyncs.size() != r.syncsInModel;
    if (r.drained == r.trace.events.size() && !r.metaDirty && !newSyncs) continue;
    // Events already in the store keep the alignment they were ingested with;
    // new ones use every clock sync received so far.
    if (newSyncs) {
      r.clock = trace::ClockModel::forRank(r.trace);
      r.syncsInModel = r.trace.clockSyncs.size();
    }
    r.drained = ingestRankTrace(store, r.trace, r.clock, r.drained, &chains_);
    // Aggregate lanes leave such ranks out of the compute share (they sent none).
    if (r.status.summary) store.rank(r.trace.header.rank).summaryOnly = true;
    r.metaDirty = false;
    changed = true;
  }
  if (changed) addCollectiveFlows(store, chains_.takeComplete());
  if (changed) store.finalize();
  return changed;
}

void LiveSource::restartDrain() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& rank : ranks_) {
    rank->drained = 0;
    rank->metaDirty = true;
  }
  chains_ = trace::CollectiveChains(kMaxOpenCollectives);
  fresh_ = true;
}

void LiveSource::saveTo(const std::string& dir) const {
  struct Output {
    int32_t rank;
    std::string host;
    int64_t pid;
    std::string bytes;
  };
  std::vector<Output> outputs;
  int32_t worldSize = 0;
  int64_t startWallNs = 0;
  uint32_t version = 0;
  {
    // Encoding is memory work only; the files are written after the lock is
    // released, so the streams are not held up by the disk.
    std::lock_guard<std::mutex> lock(mutex_);
    worldSize = static_cast<int32_t>(ranks_.empty() ? 0 : ranks_.back()->entry.rank + 1);
    for (const auto& rank : ranks_) {
      const trace::RankTrace& t = rank->trace;
      if (!rank->headerSeen) continue;
      worldSize = std::max(worldSize, t.header.worldSize);
      version = std::max(version, t.header.version);
      if (t.header.rank == 0 || startWallNs == 0) startWallNs = t.header.startWallNs;
      trace::Encoder enc;
      enc.magic();
      enc.header(t.header);
      for (size_t id = 1; id < t.strings.size(); ++id) {
        enc.string(static_cast<uint32_t>(id), t.strings[id]);
      }
      for (const trace::ClockSync& sync : t.clockSyncs) enc.clockSync(sync);
      int64_t lastNs = t.header.startSteadyNs;
      for (const trace::Event& e : t.events) {
        enc.event(e, t.args.data() + e.firstArg);
        lastNs = std::max(lastNs, e.endNs);
      }
      if (t.dropped > 0) enc.dropped(trace::Dropped{lastNs, t.dropped, 0});
      outputs.push_back(Output{t.header.rank, t.header.host, t.header.pid, std::move(enc.bytes())});
    }
  }

  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) RINGX_THROW(IoError, "cannot create the trace directory ", dir, ": ", ec.message());
  trace::Manifest manifest;
  manifest.schemaVersion = version == 0 ? trace::kSchemaVersion : version;
  manifest.worldSize = std::max(worldSize, 1);
  manifest.startWallNs = startWallNs;
  for (const Output& o : outputs) {
    writeFileAtomically(trace::rankFileName(dir, o.rank), o.bytes);
    manifest.ranks.push_back(
        trace::ManifestRank{o.rank, o.host, o.pid, strCat("rank-", o.rank, ".ringx")});
  }
  trace::writeManifest(dir, manifest);
}

}  // namespace ringx::model
