#include "backend/bootstrap/sockets.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <sstream>
#include <thread>

#include "backend/bootstrap/host_identity.h"
#include "base/error.h"

namespace ringx::bootstrap {
namespace {

constexpr char kHelloMagic[4] = {'R', 'G', 'X', '1'};

// Closes the fd unless released.
class FdGuard {
 public:
  explicit FdGuard(int fd) : fd_(fd) {}
  FdGuard(FdGuard&& other) noexcept : fd_(other.release()) {}
  FdGuard& operator=(FdGuard&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = other.release();
    }
    return *this;
  }
  FdGuard(const FdGuard&) = delete;
  FdGuard& operator=(const FdGuard&) = delete;
  ~FdGuard() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

int millisUntil(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<long long>(0, left.count()));
}

// Waits for `events` on fd; false when the deadline passed.
bool pollOne(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd pfd{fd, events, 0};
    int rc = ::poll(&pfd, 1, millisUntil(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) RINGX_THROW(IoError, "poll failed: ", std::strerror(errno));
  }
}

std::string storeKey(const std::string& channel, int rank) {
  return strCat("ringx/tcp/", channel, "/", rank);
}

// One connect attempt with a short timeout; -1 on failure (*refused: the peer's host answered
// that nobody listens on that port).
int tryConnect(const std::string& ip, int port, Deadline deadline, bool* refused) {
  FdGuard fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  RINGX_SYSCHECK(fd.get(), "socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, ip.c_str(), &addr.sin_addr) != 1) return -1;
  int flags = ::fcntl(fd.get(), F_GETFL, 0);
  ::fcntl(fd.get(), F_SETFL, flags | O_NONBLOCK);
  int rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  if (rc == -1 && errno == ECONNREFUSED) *refused = true;
  if (rc == -1 && errno != EINPROGRESS) return -1;
  if (rc == -1) {
    auto attemptDeadline = std::min(deadline, Clock::now() + std::chrono::seconds(2));
    if (!pollOne(fd.get(), POLLOUT, attemptDeadline)) return -1;
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err == ECONNREFUSED) *refused = true;
    if (err != 0) return -1;
  }
  ::fcntl(fd.get(), F_SETFL, flags);
  return fd.release();
}

}  // namespace

Hello makeHello(int rank, const std::string& channel, const std::string& token) {
  RINGX_CHECK(channel.size() < kChannelBytes, "channel name too long: ", channel);
  Hello hello{};
  std::memcpy(hello.magic, kHelloMagic, sizeof(kHelloMagic));
  hello.rank = rank;
  std::memcpy(hello.channel, channel.data(), std::min(channel.size(), kChannelBytes - 1));
  std::memcpy(hello.token, token.data(), std::min(token.size(), kTokenBytes));
  return hello;
}

bool sameGroup(const Hello& theirs, const Hello& mine) {
  return std::memcmp(theirs.magic, kHelloMagic, sizeof(kHelloMagic)) == 0 &&
         std::memcmp(theirs.token, mine.token, kTokenBytes) == 0;
}

std::string formatAddress(int port) {
  std::string addresses;
  for (const auto& ip : advertisedAddresses())
    addresses += strCat(addresses.empty() ? "" : ",", ip);
  return strCat(hostIdentity(), "\n", addresses, "\n", port);
}

PeerAddress parseAddress(const std::string& text) {
  std::istringstream in(text);
  PeerAddress out;
  std::string list, port;
  std::getline(in, out.host);
  std::getline(in, list);
  std::getline(in, port);
  std::istringstream items(list);
  std::string item;
  while (std::getline(items, item, ',')) out.addresses.push_back(item);
  out.port = std::stoi(port);
  return out;
}

int listenAnyPort(int* port) {
  FdGuard fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  RINGX_SYSCHECK(fd.get(), "socket");
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  RINGX_SYSCHECK(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), "bind");
  // A large backlog: at a thousand ranks, many may dial one rank at the same moment.
  RINGX_SYSCHECK(::listen(fd.get(), 4096), "listen");
  socklen_t len = sizeof(addr);
  RINGX_SYSCHECK(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len), "getsockname");
  *port = ntohs(addr.sin_port);
  return fd.release();
}

int dialPeer(const PeerAddress& peer, int peerRank, Deadline deadline, bool refusedIsFinal) {
  // Same host: loopback always works and never leaves the machine.
  std::vector<std::string> candidates =
      peer.host == hostIdentity() ? std::vector<std::string>{"127.0.0.1"} : peer.addresses;
  for (;;) {
    bool refused = false;
    for (const auto& ip : candidates) {
      int fd = tryConnect(ip, peer.port, deadline, &refused);
      if (fd >= 0) return fd;
    }
    if (refused && refusedIsFinal) {
      RINGX_THROW_PEER(peerRank, "rank ", peerRank, " refused the connection (nothing listens on ",
                       "its port ", peer.port,
                       " any more: its process exited or its group was destroyed)");
    }
    if (Clock::now() >= deadline) {
      std::string tried;
      for (const auto& ip : candidates) tried += strCat(tried.empty() ? "" : ", ", ip);
      RINGX_THROW(TimeoutError, "could not connect to rank ", peerRank, " at ", tried, " port ",
                  peer.port,
                  " before the timeout; is a firewall in the way, or set "
                  "RINGX_SOCKET_ADDR to an address the other hosts can reach");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Reads exactly n bytes from a blocking-mode socket before the deadline.
bool readFull(int fd, void* data, size_t n, Deadline deadline) {
  char* out = static_cast<char*>(data);
  while (n > 0) {
    if (!pollOne(fd, POLLIN, deadline)) return false;
    ssize_t got = ::recv(fd, out, n, MSG_DONTWAIT);
    if (got == 0) return false;
    if (got < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return false;
    }
    out += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

bool writeFull(int fd, const void* data, size_t n) {
  const char* in = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t put = ::send(fd, in, n, MSG_NOSIGNAL);
    if (put < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    in += put;
    n -= static_cast<size_t>(put);
  }
  return true;
}

std::vector<Socket> connectSockets(Store& store, int rank, int size, const std::string& channel,
                                   const std::string& token, Deadline deadline,
                                   const std::vector<int>& peers) {
  const Hello mine = makeHello(rank, channel, token);
  std::vector<Socket> sockets(size);
  if (peers.empty()) return sockets;
  std::vector<char> listed(size, 0);
  for (int peer : peers) {
    RINGX_ENFORCE(peer >= 0 && peer < size && peer != rank);
    listed[peer] = 1;
  }
  // Sockets to and from the listed peers, closed by their guards if anything below throws.
  std::vector<FdGuard> accepted, connected;
  accepted.reserve(size);
  connected.reserve(size);
  for (int i = 0; i < size; ++i) {
    accepted.emplace_back(-1);
    connected.emplace_back(-1);
  }

  int port = 0;
  FdGuard listener(listenAnyPort(&port));
  store.setString(storeKey(channel, rank), formatAddress(port));
  std::vector<std::string> hosts(size);
  auto storeTimeout = [&] { return std::chrono::milliseconds(std::max(1, millisUntil(deadline))); };

  // 1. Connect to every listed higher rank and say hello (connect() completes from the
  //    peer's listen backlog, so nobody has to be accepting yet).
  for (int peer = rank + 1; peer < size; ++peer) {
    if (!listed[peer]) continue;
    PeerAddress address = parseAddress(store.getString(storeKey(channel, peer), storeTimeout()));
    hosts[peer] = address.host;
    int fd = dialPeer(address, peer, deadline, /*refusedIsFinal=*/false);
    if (!writeFull(fd, &mine, sizeof(mine))) {
      ::close(fd);
      RINGX_THROW(PeerError, "rank ", peer, " dropped the connection during the hello");
    }
    connected[peer] = FdGuard(fd);
  }

  // 2. Accept one connection from every listed lower rank; drop strangers.
  int expected = 0;
  for (int peer = 0; peer < rank; ++peer) expected += listed[peer];
  while (expected > 0) {
    if (!pollOne(listener.get(), POLLIN, deadline)) {
      std::string missing;
      for (int peer = 0; peer < rank; ++peer) {
        if (listed[peer] && accepted[peer].get() < 0)
          missing += strCat(missing.empty() ? "" : ", ", peer);
      }
      RINGX_THROW(TimeoutError, "timed out waiting for rank(s) ", missing, " to connect (channel '",
                  channel, "')");
    }
    FdGuard fd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (fd.get() < 0) continue;
    Hello theirs{};
    auto helloDeadline = std::min(deadline, Clock::now() + std::chrono::seconds(10));
    if (!readFull(fd.get(), &theirs, sizeof(theirs), helloDeadline)) continue;
    bool valid = sameGroup(theirs, mine) &&
                 std::memcmp(theirs.channel, mine.channel, kChannelBytes) == 0 &&
                 theirs.rank >= 0 && theirs.rank < rank && listed[theirs.rank] &&
                 accepted[theirs.rank].get() < 0;
    if (!valid) {
      std::cerr << "ringx: rank " << rank << " rejected a connection that did not carry this "
                << "group's token (a stranger, or a rank of another job)\n";
      continue;
    }
    const char ack[4] = {'O', 'K', '!', '!'};
    if (!writeFull(fd.get(), ack, sizeof(ack))) continue;
    accepted[theirs.rank] = FdGuard(fd.release());
    --expected;
  }

  // 3. Collect the acks of the higher ranks.
  for (int peer = rank + 1; peer < size; ++peer) {
    if (!listed[peer]) continue;
    char ack[4];
    if (!readFull(connected[peer].get(), ack, sizeof(ack), deadline) || ack[0] != 'O') {
      RINGX_THROW(PeerError, "rank ", peer, " did not accept the connection from rank ", rank,
                  " (different group token? are two jobs sharing one store?)");
    }
  }
  // Everyone published its identity before connecting, so the lower ranks' are there.
  for (int peer : peers) {
    if (peer < rank) {
      hosts[peer] = parseAddress(store.getString(storeKey(channel, peer), storeTimeout())).host;
    }
    sockets[peer].host = hosts[peer];
    sockets[peer].fd = peer < rank ? accepted[peer].release() : connected[peer].release();
  }
  return sockets;
}

}  // namespace ringx::bootstrap
