// The live trace server (protocol in live_server.h).
//
// Two threads touch it. The recorder's writer thread calls write(): under
// mutex_ it appends the batch to the backlog and to every streaming client's
// `pending` queue (a SUMMARY client's gets the batch without the events it
// leaves out, filtered once per batch), then pokes an eventfd. The server thread owns every socket:
// it polls them, accepts, reads request lines, and moves each client's pending
// bytes into that connection's own `out` buffer (a swap under the lock, so no
// socket call ever happens with the lock held) before sending them.
//
// Index:
//   [SECTION] Helpers: record walking, addresses, tokens
//   [SECTION] State shared with the writer thread
//   [SECTION] The server thread
//   [SECTION] LiveServer
#include "trace/record/live_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <string_view>
#include <thread>

#include "base/error.h"
#include "trace/format/codec.h"
#include "trace/format/live_protocol.h"

namespace ringx::trace {
namespace {

using Clock = std::chrono::steady_clock;

// [SECTION] Helpers: record walking, addresses, tokens ---------------------------------

constexpr int kLingerMs = 5000;      // how long a rejected client has to read its ERR line
constexpr int kAcceptPauseMs = 100;  // out of file descriptors: retry accept() after this
constexpr size_t kMaxTokenBytes = 256;

// Calls fn(type, wholeRecord) for each framed record of `bytes`. Batches come
// from our own recorder, so bad framing is a bug; rather than throw on the
// writer thread, the rest is handed over as one record of unknown type, which
// every caller keeps.
template <typename Fn>
void forEachFramedRecord(std::string_view bytes, Fn&& fn) {
  size_t at = 0;
  while (at < bytes.size()) {
    size_t size = bytes.size() - at;
    auto type = static_cast<RecordType>(0);
    if (size >= 5) {
      const auto* b = reinterpret_cast<const uint8_t*>(bytes.data() + at);
      const uint32_t length = static_cast<uint32_t>(b[0]) | static_cast<uint32_t>(b[1]) << 8 |
                              static_cast<uint32_t>(b[2]) << 16 | static_cast<uint32_t>(b[3]) << 24;
      if (length >= 1 && length <= size - 4) {
        size = 4 + length;
        type = static_cast<RecordType>(b[4]);
      }
    }
    fn(type, bytes.substr(at, size));
    at += size;
  }
}

// What a SUMMARY client gets of `records`: every record but the event records
// isSummaryEventRecord() leaves out (an unknown-type remainder is kept, as above).
std::string summaryRecords(std::string_view records) {
  std::string out;
  forEachFramedRecord(records, [&](RecordType type, std::string_view record) {
    if (type != RecordType::kEvent || isSummaryEventRecord(record)) out += record;
  });
  return out;
}

bool isLoopback(const sockaddr* addr) {
  if (addr->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (addr->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
    if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return true;
    return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127;
  }
  return false;
}

// Compares in time independent of where the tokens differ, so response times do
// not leak the token a byte at a time. (Its length is not the secret.)
bool isTokenText(std::string_view token) {
  if (token.empty() || token.size() > kMaxTokenBytes || token == "-") return false;
  return std::all_of(token.begin(), token.end(), [](char c) { return c > ' ' && c < 127; });
}

int64_t steadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

int millisUntil(Clock::time_point when) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(when - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count() + 1, 0, 60000));
}

}  // namespace

// [SECTION] State shared with the writer thread -----------------------------------------

class LiveServer::Impl {
 public:
  // One streaming client's queue; every field is guarded by mutex_.
  struct StreamQueue {
    std::string pending;   // written by write(), not yet taken by the server thread
    size_t unsent = 0;     // bytes the server thread took and has not sent yet
    uint64_t shed = 0;     // events shed since the last Dropped record (> 0: shedding)
    bool summary = false;  // a SUMMARY client: gets summaryRecords() of every batch
    size_t queued() const { return pending.size() + unsent; }
  };

  // One socket; touched only by the server thread.
  struct Connection {
    enum class Phase {
      kRequest,    // waiting for the request line
      kStreaming,  // sending the stream
      kReplying,   // sending a final reply (ERR, directory), then kLingering
      kLingering,  // our side shut down; waiting for the client's EOF
    };
    int fd = -1;
    Phase phase = Phase::kRequest;
    std::string in;  // request line bytes so far
    std::string out;
    size_t outOffset = 0;
    Clock::time_point deadline;  // for kRequest and kLingering
    std::shared_ptr<StreamQueue> queue;
    bool closed = false;

    bool hasOutput() const { return outOffset < out.size(); }
  };

  explicit Impl(Options options) : options_(std::move(options)) {}
  ~Impl() { stop(); }

  void start();
  void stop();

  // Sink, on the writer thread.
  void begin(const std::string& preamble);
  void write(const Batch& batch);

  void setDirectory(std::vector<DirectoryEntry> entries, bool replace);
  Stats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  const Options& options() const { return options_; }
  int port() const { return port_; }

 private:
  void bindAndListen();
  void wake();
  void enqueueLocked(StreamQueue& q, std::string_view strings, std::string_view records);
  void appendBacklogLocked(const std::string& records);
  void resumeIfDrainedLocked(StreamQueue& q);

  // The server thread.
  void run();
  void loop();
  void refillLocked();
  void acceptAll();
  void readRequest(Connection& c);
  void handleRequest(Connection& c, std::string_view line);
  void reject(Connection& c, const std::string& message);
  void sendSome(Connection& c);
  void discardInput(Connection& c);
  void closeConnection(Connection& c);

  const Options options_;
  int listenFd_ = -1;
  int wakeFd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::mutex stopMutex_;  // serialises stop() against itself

  mutable std::mutex mutex_;
  // Guarded by mutex_.
  bool stopping_ = false;
  bool begun_ = false;
  std::string preamble_;  // magic, header, every string defined so far
  std::deque<std::string> backlog_;
  size_t backlogFront_ = 0;    // bytes of backlog_.front() already trimmed
  size_t backlogBytes_ = 0;    // bytes in the backlog after trimming
  std::string lostClockSync_;  // the latest clock-sync record trimmed from the backlog
  std::vector<std::shared_ptr<StreamQueue>> streams_;
  std::map<int, DirectoryEntry> directory_;
  bool directorySet_ = false;
  Stats stats_;

  // Server thread only.
  std::vector<std::unique_ptr<Connection>> connections_;
  Clock::time_point acceptPausedUntil_;
};

void LiveServer::Impl::start() {
  RINGX_CHECK(!options_.host.empty(),
              "live trace server: empty host; use 127.0.0.1 (this machine only) or 0.0.0.0 (every "
              "interface, needs RINGX_TRACE_TOKEN)");
  RINGX_CHECK(options_.port >= 0 && options_.port <= 65535, "live trace server: port ",
              options_.port, " is out of range (0 to 65535; 0 picks a free one)");
  RINGX_CHECK(options_.token.empty() || isTokenText(options_.token),
              "live trace server: RINGX_TRACE_TOKEN must be 1 to ", kMaxTokenBytes,
              " printable characters without spaces, and not \"-\"");
  RINGX_CHECK(options_.clientQueueBytes >= 4096,
              "live trace server: clientQueueBytes must be at least 4096, not ",
              options_.clientQueueBytes);
  RINGX_CHECK(options_.maxClients >= 1, "live trace server: maxClients must be at least 1");
  RINGX_CHECK(options_.handshakeTimeoutMs > 0 && options_.closeDrainMs >= 0,
              "live trace server: handshakeTimeoutMs must be positive and closeDrainMs not "
              "negative");
  bindAndListen();
  wakeFd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wakeFd_ == -1) {
    const int err = errno;
    ::close(listenFd_);
    listenFd_ = -1;
    RINGX_THROW(IoError, "live trace server: eventfd: ", std::strerror(err));
  }
  thread_ = std::thread([this] { run(); });
}

void LiveServer::Impl::bindAndListen() {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(options_.port);
  const int rc = ::getaddrinfo(options_.host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) {
    RINGX_THROW(InvalidArgument, "live trace server: cannot resolve host '", options_.host,
                "': ", ::gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(found, ::freeaddrinfo);

  // Refuse before binding anything: a host that resolves to any non-loopback
  // address would let other machines read the trace.
  if (options_.token.empty()) {
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      if (!isLoopback(a->ai_addr)) {
        RINGX_THROW(InvalidArgument, "live trace server: listening on ", options_.host, ":",
                    options_.port,
                    " would let other machines read this job's trace; set RINGX_TRACE_TOKEN "
                    "to a secret that clients must present, or listen on 127.0.0.1");
      }
    }
  }

  int lastErr = 0;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd == -1) {
      lastErr = errno;
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 64) == 0) {
      sockaddr_storage bound{};
      socklen_t len = sizeof(bound);
      if (::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) == 0) {
        port_ = bound.ss_family == AF_INET6
                    ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                    : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
        listenFd_ = fd;
        return;
      }
    }
    lastErr = errno;
    ::close(fd);
  }
  RINGX_THROW(IoError, "live trace server: cannot listen on ", options_.host, ":", options_.port,
              ": ", std::strerror(lastErr),
              lastErr == EADDRINUSE ? " (another process uses the port; pick another one in "
                                      "RINGX_TRACE_LISTEN, or port 0)"
                                    : "");
}

void LiveServer::Impl::wake() {
  const uint64_t one = 1;
  // EAGAIN means the counter is already huge: the thread is woken anyway.
  [[maybe_unused]] ssize_t n = ::write(wakeFd_, &one, sizeof(one));
}

void LiveServer::Impl::stop() {
  std::lock_guard<std::mutex> stopLock(stopMutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  if (thread_.joinable()) {
    wake();
    thread_.join();
  }
  if (listenFd_ >= 0) ::close(listenFd_);
  if (wakeFd_ >= 0) ::close(wakeFd_);
  listenFd_ = wakeFd_ = -1;
}

void LiveServer::Impl::begin(const std::string& preamble) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || begun_) return;  // the Sink contract calls begin() once
    begun_ = true;
    // Strings defined by later batches are appended, so the preamble stays a
    // complete start for clients that connect later.
    preamble_ = preamble;
    for (auto& q : streams_) q->pending += preamble;
  }
  wake();
}

void LiveServer::Impl::write(const Batch& batch) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    preamble_ += batch.strings;
    appendBacklogLocked(batch.records);
    // Filtered once per batch, and only when some client asked for a summary.
    std::string summary;
    bool summarized = false;
    for (auto& q : streams_) {
      if (q->summary && !summarized) {
        summary = summaryRecords(batch.records);
        summarized = true;
      }
      enqueueLocked(*q, batch.strings, q->summary ? summary : batch.records);
    }
  }
  wake();
}

void LiveServer::Impl::enqueueLocked(StreamQueue& q, std::string_view strings,
                                     std::string_view records) {
  q.pending += strings;
  resumeIfDrainedLocked(q);
  const size_t limit = options_.clientQueueBytes;
  if (q.shed == 0 && q.queued() + records.size() <= limit) {
    q.pending += records;
    return;
  }
  forEachFramedRecord(records, [&](RecordType type, std::string_view record) {
    if (type != RecordType::kEvent) {
      q.pending += record;
    } else if (q.shed == 0 && q.queued() + record.size() <= limit) {
      q.pending += record;
    } else {
      ++q.shed;
      ++stats_.eventsDropped;
    }
  });
}

// A shedding client resumes once its queue is half empty, not at the first free
// byte: that way it gets runs of events rather than one here and one there, and
// the Dropped record is never squeezed out.
void LiveServer::Impl::resumeIfDrainedLocked(StreamQueue& q) {
  if (q.shed == 0 || q.queued() > options_.clientQueueBytes / 2) return;
  Encoder enc;
  enc.dropped(Dropped{steadyNowNs(), q.shed, 0});
  q.pending += enc.bytes();
  q.shed = 0;
}

void LiveServer::Impl::appendBacklogLocked(const std::string& records) {
  if (!records.empty()) {
    backlog_.push_back(records);
    backlogBytes_ += records.size();
  }
  // Trim whole records from the front. The newest clock sync trimmed is kept
  // for late clients: without one they could not align this rank's clock.
  while (backlogBytes_ > options_.backlogBytes && !backlog_.empty()) {
    const std::string& front = backlog_.front();
    forEachFramedRecord(std::string_view(front).substr(backlogFront_),
                        [&](RecordType type, std::string_view record) {
                          if (backlogBytes_ <= options_.backlogBytes) return;
                          if (type == RecordType::kClockSync) lostClockSync_.assign(record);
                          backlogFront_ += record.size();
                          backlogBytes_ -= record.size();
                        });
    if (backlogFront_ == front.size()) {
      backlog_.pop_front();
      backlogFront_ = 0;
    }
  }
}

void LiveServer::Impl::setDirectory(std::vector<DirectoryEntry> entries, bool replace) {
  for (const DirectoryEntry& e : entries) {
    const bool hostOk =
        !e.host.empty() && e.host.size() < 256 &&
        std::all_of(e.host.begin(), e.host.end(), [](char c) { return c > ' ' && c < 127; });
    RINGX_CHECK(hostOk, "live trace directory: rank ", e.rank, "'s host '", e.host,
                "' must be a host name or address without spaces");
    RINGX_CHECK(e.rank >= 0 && e.port > 0 && e.port <= 65535, "live trace directory: rank ", e.rank,
                " port ", e.port, " is not a valid endpoint");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (replace) directory_.clear();
  for (DirectoryEntry& e : entries) directory_[e.rank] = std::move(e);
  directorySet_ = true;
}

// [SECTION] The server thread --------------------------------------------------------------

void LiveServer::Impl::run() {
  try {
    loop();
  } catch (const std::exception& e) {
    // The job must go on without its live view; say why it went away.
    std::cerr << "ringx: the live trace server stopped: " << e.what() << std::endl;
  }
  for (auto& c : connections_) {
    if (!c->closed) closeConnection(*c);
  }
  connections_.clear();
  std::lock_guard<std::mutex> lock(mutex_);
  stopping_ = true;  // write() stops queueing for clients that are gone
  streams_.clear();
}

void LiveServer::Impl::loop() {
  bool draining = false;
  Clock::time_point drainUntil;
  std::vector<pollfd> fds;
  for (;;) {
    bool stopping;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping = stopping_;
      refillLocked();
    }
    if (stopping && !draining) {
      // Stop taking requests; give streaming clients a moment to take their queues.
      draining = true;
      drainUntil = Clock::now() + std::chrono::milliseconds(options_.closeDrainMs);
      for (auto& c : connections_) {
        if (c->phase != Connection::Phase::kStreaming) closeConnection(*c);
      }
    }
    if (draining) {
      const bool sentAll = std::none_of(connections_.begin(), connections_.end(),
                                        [](const auto& c) { return !c->closed && c->hasOutput(); });
      if (sentAll || Clock::now() >= drainUntil) return;
    }

    // Poll: the wake fd, the listening socket, every connection.
    const Clock::time_point now = Clock::now();
    int timeoutMs = -1;
    auto until = [&](Clock::time_point when) {
      const int ms = millisUntil(when);
      timeoutMs = timeoutMs < 0 ? ms : std::min(timeoutMs, ms);
    };
    fds.clear();
    fds.push_back({wakeFd_, POLLIN, 0});
    const bool accepting = !draining && now >= acceptPausedUntil_;
    if (!draining && !accepting) until(acceptPausedUntil_);
    fds.push_back({accepting ? listenFd_ : -1, POLLIN, 0});
    for (auto& c : connections_) {
      short events = POLLIN;
      if (c->hasOutput()) events |= POLLOUT;
      fds.push_back({c->fd, events, 0});
      if (c->phase == Connection::Phase::kRequest || c->phase == Connection::Phase::kLingering) {
        until(c->deadline);
      }
    }
    if (draining) until(drainUntil);
    if (::poll(fds.data(), fds.size(), timeoutMs) == -1) {
      if (errno == EINTR) continue;
      RINGX_THROW(IoError, "poll: ", std::strerror(errno));
    }

    if (fds[0].revents != 0) {
      uint64_t count;
      [[maybe_unused]] ssize_t n = ::read(wakeFd_, &count, sizeof(count));
    }
    // Connections accepted below are not in `fds`; only the first ones are.
    const size_t polled = connections_.size();
    if (fds[1].revents != 0) acceptAll();
    const Clock::time_point after = Clock::now();
    for (size_t i = 0; i < polled; ++i) {
      Connection& c = *connections_[i];
      const short revents = fds[i + 2].revents;
      if (revents & (POLLERR | POLLNVAL)) {
        closeConnection(c);
        continue;
      }
      if (revents & (POLLIN | POLLHUP)) {
        if (c.phase == Connection::Phase::kRequest) {
          readRequest(c);
        } else {
          discardInput(c);
        }
      }
      if (!c.closed && (revents & POLLOUT)) sendSome(c);
      if (c.closed) continue;
      if (c.phase == Connection::Phase::kRequest && after >= c.deadline) {
        reject(c, strCat("no request line within ", options_.handshakeTimeoutMs, " ms"));
      } else if (c.phase == Connection::Phase::kLingering && after >= c.deadline) {
        closeConnection(c);
      }
    }
    connections_.erase(std::remove_if(connections_.begin(), connections_.end(),
                                      [](const auto& c) { return c->closed; }),
                       connections_.end());
  }
}

// Hands each streaming connection what write() queued, once it sent what it had.
void LiveServer::Impl::refillLocked() {
  for (auto& c : connections_) {
    if (c->closed || !c->queue) continue;
    StreamQueue& q = *c->queue;
    if (!c->hasOutput()) {
      c->out.clear();
      c->outOffset = 0;
    }
    q.unsent = c->out.size() - c->outOffset;
    resumeIfDrainedLocked(q);
    if (q.unsent == 0 && !q.pending.empty()) {
      c->out.swap(q.pending);  // the emptied buffer keeps its capacity for write()
      q.unsent = c->out.size();
    }
  }
}

void LiveServer::Impl::acceptAll() {
  for (;;) {
    const int fd = ::accept4(listenFd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd == -1) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        acceptPausedUntil_ = Clock::now() + std::chrono::milliseconds(kAcceptPauseMs);
      }
      return;  // EAGAIN, a connection that went away (ECONNABORTED), or the above
    }
    if (static_cast<int>(connections_.size()) >= options_.maxClients) {
      // Turned away at once, best effort, so a flood of connections costs nothing.
      const std::string reply =
          strCat("ERR too many clients (", options_.maxClients, " connected); try again later\n");
      [[maybe_unused]] ssize_t n = ::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);
      ::close(fd);
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.requestsRejected;
      continue;
    }
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    c->deadline = Clock::now() + std::chrono::milliseconds(options_.handshakeTimeoutMs);
    connections_.push_back(std::move(c));
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.connections;
  }
}

void LiveServer::Impl::readRequest(Connection& c) {
  char buf[kLiveMaxLineBytes];
  const ssize_t n = ::recv(c.fd, buf, kLiveMaxLineBytes - c.in.size(), 0);
  if (n == 0 || (n == -1 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    closeConnection(c);  // gone before asking anything
    return;
  }
  if (n < 0) return;
  c.in.append(buf, static_cast<size_t>(n));
  const size_t newline = c.in.find('\n');
  if (newline != std::string::npos) {
    std::string_view line(c.in.data(), newline);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    handleRequest(c, line);
  } else if (c.in.size() >= kLiveMaxLineBytes) {
    reject(c, strCat("request line longer than ", kLiveMaxLineBytes, " bytes"));
  }
}

void LiveServer::Impl::handleRequest(Connection& c, std::string_view line) {
  const LiveRequest request = parseLiveRequest(line, options_.token);
  if (!request.error.empty()) {
    reject(c, request.error);
    return;
  }
  if (request.kind == LiveRequestKind::kDirectory) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!directorySet_) {
      ++stats_.requestsRejected;
      c.out = "ERR directory not ready\n";
    } else {
      std::ostringstream reply;
      reply << "OK " << directory_.size() << "\n";
      for (const auto& [rank, e] : directory_)
        reply << rank << " " << e.host << " " << e.port << "\n";
      c.out = reply.str();
    }
    c.outOffset = 0;
    c.phase = Connection::Phase::kReplying;
    return;
  }

  // Registering and snapshotting under one lock: every batch reaches this client
  // exactly once, either in the snapshot or through its queue.
  auto q = std::make_shared<StreamQueue>();
  q->summary = request.kind == LiveRequestKind::kSummary;
  std::lock_guard<std::mutex> lock(mutex_);
  c.out = "OK\n";
  if (begun_) {
    c.out += preamble_;
    c.out += lostClockSync_;
    for (size_t i = 0; i < backlog_.size(); ++i) {
      const std::string_view part =
          std::string_view(backlog_[i]).substr(i == 0 ? backlogFront_ : 0);
      if (q->summary) {
        c.out += summaryRecords(part);
      } else {
        c.out += part;
      }
    }
  }
  c.outOffset = 0;
  q->unsent = c.out.size();
  c.queue = q;
  c.phase = Connection::Phase::kStreaming;
  ++(q->summary ? stats_.summariesServed : stats_.streamsServed);
  streams_.push_back(std::move(q));
  ++stats_.streamClients;
}

void LiveServer::Impl::reject(Connection& c, const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.requestsRejected;
  }
  c.out = strCat("ERR ", message, "\n");
  c.outOffset = 0;
  c.phase = Connection::Phase::kReplying;
}

void LiveServer::Impl::sendSome(Connection& c) {
  while (c.hasOutput()) {
    const ssize_t n =
        ::send(c.fd, c.out.data() + c.outOffset, c.out.size() - c.outOffset, MSG_NOSIGNAL);
    if (n > 0) {
      c.outOffset += static_cast<size_t>(n);
      continue;
    }
    if (n == -1 && errno == EINTR) continue;
    if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    closeConnection(c);  // EPIPE, ECONNRESET: the client went away
    return;
  }
  if (c.phase == Connection::Phase::kReplying) {
    // Half-close and wait for the client's EOF: closing with its bytes unread
    // would reset the connection and could destroy our reply before it reads it.
    ::shutdown(c.fd, SHUT_WR);
    c.phase = Connection::Phase::kLingering;
    c.deadline = Clock::now() + std::chrono::milliseconds(kLingerMs);
  }
}

// Past the request line a client has nothing to say: read and drop whatever it
// sends, and notice when it goes away.
void LiveServer::Impl::discardInput(Connection& c) {
  char buf[4096];
  for (int i = 0; i < 16; ++i) {
    const ssize_t n = ::recv(c.fd, buf, sizeof(buf), 0);
    if (n > 0) continue;
    if (n == -1 && errno == EINTR) continue;
    if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    closeConnection(c);
    return;
  }
}

void LiveServer::Impl::closeConnection(Connection& c) {
  if (c.closed) return;
  ::close(c.fd);
  c.fd = -1;
  c.closed = true;
  std::lock_guard<std::mutex> lock(mutex_);
  --stats_.connections;
  if (c.queue) {
    streams_.erase(std::remove(streams_.begin(), streams_.end(), c.queue), streams_.end());
    c.queue.reset();
    --stats_.streamClients;
  }
}

// [SECTION] LiveServer -------------------------------------------------------------------

LiveServer::LiveServer(Options options) : impl_(std::make_unique<Impl>(std::move(options))) {
  impl_->start();
}

LiveServer::~LiveServer() { close(); }

int LiveServer::port() const { return impl_->port(); }
const std::string& LiveServer::host() const { return impl_->options().host; }

void LiveServer::setDirectory(std::vector<DirectoryEntry> entries) {
  impl_->setDirectory(std::move(entries), /*replace=*/true);
}

void LiveServer::addDirectoryEntry(DirectoryEntry entry) {
  impl_->setDirectory({std::move(entry)}, /*replace=*/false);
}

void LiveServer::begin(const std::string& preamble) { impl_->begin(preamble); }
void LiveServer::write(const Batch& batch) { impl_->write(batch); }
void LiveServer::close() { impl_->stop(); }
LiveServer::Stats LiveServer::stats() const { return impl_->stats(); }

}  // namespace ringx::trace
