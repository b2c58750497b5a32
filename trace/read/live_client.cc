// The live trace client: connect with a deadline, send the request line, read the
// status line, then either the directory or the event stream (trace/format/live_protocol.h).
#include "trace/read/live_client.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <sstream>
#include <utility>

#include "base/error.h"
#include "trace/format/live_protocol.h"

namespace ringx::trace {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxDirectoryBytes = 1u << 20;
// One poll() call reads at most this much, so a viewer's frame never stalls on a
// fast stream; the rest waits for the next call.
constexpr size_t kMaxReadPerPoll = 8u << 20;

std::string address(const std::string& host, int port) {
  return host.find(':') != std::string::npos ? strCat("[", host, "]:", port)
                                             : strCat(host, ":", port);
}

int millisUntil(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

// Waits for `events` on fd; throws TimeoutError once the deadline passes.
void waitFor(int fd, short events, Clock::time_point deadline, const std::string& what) {
  for (;;) {
    pollfd pfd{fd, events, 0};
    const int rc = ::poll(&pfd, 1, millisUntil(deadline));
    if (rc > 0) return;
    if (rc == 0) RINGX_THROW(TimeoutError, what);
    if (errno != EINTR) RINGX_THROW(IoError, "poll: ", std::strerror(errno));
  }
}

// Closes the fd unless released.
class FdGuard {
 public:
  explicit FdGuard(int fd) : fd_(fd) {}
  FdGuard(const FdGuard&) = delete;
  FdGuard& operator=(const FdGuard&) = delete;
  ~FdGuard() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

int connectTo(const std::string& host, int port, Clock::time_point deadline) {
  const std::string where = address(host, port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) {
    RINGX_THROW(IoError, "cannot resolve live trace server ", where, ": ", ::gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(found, ::freeaddrinfo);
  int lastErr = 0;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    FdGuard fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (fd.get() == -1) {
      lastErr = errno;
      continue;
    }
    if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) == -1) {
      if (errno != EINPROGRESS) {
        lastErr = errno;
        continue;
      }
      waitFor(fd.get(), POLLOUT, deadline,
              strCat("timed out connecting to live trace server ", where));
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        lastErr = err;
        continue;
      }
    }
    return fd.release();
  }
  RINGX_THROW(IoError, "cannot connect to live trace server ", where, ": ", std::strerror(lastErr),
              lastErr == ECONNREFUSED ? " (is the job running with RINGX_TRACE_LISTEN set?)" : "");
}

void sendAll(int fd, std::string_view data, Clock::time_point deadline, const std::string& where) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      waitFor(fd, POLLOUT, deadline, strCat("timed out sending to live trace server ", where));
    } else if (errno != EINTR) {
      RINGX_THROW(IoError, "cannot send to live trace server ", where, ": ", std::strerror(errno));
    }
  }
}

// Reads into *buffer until it holds a "\n" (or the server closes, returning
// false); bytes past the line stay in *buffer.
bool readUntilNewline(int fd, std::string* buffer, Clock::time_point deadline,
                      const std::string& where) {
  char chunk[4096];
  while (buffer->find('\n') == std::string::npos) {
    if (buffer->size() > kLiveMaxLineBytes) {
      RINGX_THROW(FormatError, where, " is not a ringx live trace server (its reply line is ",
                  "too long)");
    }
    waitFor(fd, POLLIN, deadline, strCat("timed out waiting for live trace server ", where));
    const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
    if (n > 0) {
      buffer->append(chunk, static_cast<size_t>(n));
    } else if (n == 0) {
      return false;
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      RINGX_THROW(IoError, "cannot read from live trace server ", where, ": ",
                  std::strerror(errno));
    }
  }
  return true;
}

std::string requestLine(const std::string& token, const char* request) {
  const bool tokenOk = token.size() <= 256 && std::all_of(token.begin(), token.end(), [](char c) {
                         return c > ' ' && c < 127;
                       });
  RINGX_CHECK(tokenOk, "RINGX_TRACE_TOKEN must be printable characters without spaces");
  return strCat(kLiveProtocolName, " ", kLiveProtocolVersion, " ",
                token.empty() ? std::string("-") : token, " ", request, "\n");
}

// Connects, sends the request and reads the status line. Returns the socket, the
// status line's text after "OK" and any bytes that followed it.
int handshake(const std::string& host, int port, const std::string& token, const char* request,
              Clock::time_point deadline, std::string* okRest, std::string* after) {
  const std::string where = address(host, port);
  const std::string line = requestLine(token, request);
  FdGuard fd(connectTo(host, port, deadline));
  sendAll(fd.get(), line, deadline, where);
  std::string buffer;
  if (!readUntilNewline(fd.get(), &buffer, deadline, where)) {
    RINGX_THROW(PeerError, "live trace server ", where, " closed the connection without ",
                "answering the ", request, " request");
  }
  const size_t newline = buffer.find('\n');
  *after = buffer.substr(newline + 1);
  *okRest = parseLiveStatus(std::string_view(buffer).substr(0, newline), where, request);
  return fd.release();
}

}  // namespace

std::vector<DirectoryEntry> fetchDirectory(const std::string& host, int port,
                                           const std::string& token,
                                           std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  const std::string where = address(host, port);
  std::string countText, body;
  FdGuard fd(handshake(host, port, token, "DIRECTORY", deadline, &countText, &body));
  // The server closes after the last line; read everything it sends.
  char chunk[4096];
  for (;;) {
    if (body.size() > kMaxDirectoryBytes) {
      RINGX_THROW(FormatError, where, " sent a directory larger than ", kMaxDirectoryBytes,
                  " bytes");
    }
    waitFor(fd.get(), POLLIN, deadline,
            strCat("timed out reading the directory from live trace server ", where));
    const ssize_t n = ::recv(fd.get(), chunk, sizeof(chunk), 0);
    if (n > 0) {
      body.append(chunk, static_cast<size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      RINGX_THROW(IoError, "cannot read the directory from live trace server ", where, ": ",
                  std::strerror(errno));
    }
  }

  return parseDirectory(countText, body, where);
}

LiveStream::LiveStream(const std::string& host, int port, const std::string& token,
                       std::chrono::milliseconds timeout, LiveStreamKind kind) {
  trace_.source = address(host, port);
  const char* request = liveRequestName(
      kind == LiveStreamKind::kSummary ? LiveRequestKind::kSummary : LiveRequestKind::kStream);
  std::string okRest, after;
  fd_ = handshake(host, port, token, request, Clock::now() + timeout, &okRest, &after);
  if (!okRest.empty()) {
    ::close(fd_);
    fd_ = -1;
    RINGX_THROW(FormatError, trace_.source, " answered the ", request, " request with 'OK ", okRest,
                "'");
  }
  if (!after.empty()) feed(after.data(), after.size());
}

LiveStream::~LiveStream() {
  if (fd_ >= 0) ::close(fd_);
}

void LiveStream::close() {
  if (fd_ >= 0) closeWith("closed by this client");
}

void LiveStream::closeWith(std::string reason) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  closeReason_ = std::move(reason);
}

void LiveStream::feed(const char* data, size_t bytes) {
  bytesReceived_ += bytes;
  try {
    decoder_.feed(data, bytes);
  } catch (const FormatError& e) {
    closeWith(e.what());
    throw;
  }
}

bool LiveStream::poll(int timeoutMs) {
  if (fd_ < 0) return false;
  pollfd pfd{fd_, POLLIN, 0};
  const int rc = ::poll(&pfd, 1, timeoutMs);
  if (rc == -1 && errno != EINTR) {
    RINGX_THROW(IoError, "poll on live stream ", trace_.source, ": ", std::strerror(errno));
  }
  if (rc <= 0) return true;
  char chunk[64 * 1024];
  size_t read = 0;
  while (read < kMaxReadPerPoll) {
    const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), MSG_DONTWAIT);
    if (n > 0) {
      read += static_cast<size_t>(n);
      feed(chunk, static_cast<size_t>(n));
    } else if (n == 0) {
      closeWith("the server closed the stream");
      return false;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      break;
    } else if (errno != EINTR) {
      closeWith(strCat("the connection failed: ", std::strerror(errno)));
      return false;
    }
  }
  return true;
}

}  // namespace ringx::trace
