#include "backend/bootstrap/connector.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <map>

#include "backend/bootstrap/host_identity.h"
#include "base/error.h"

namespace ringx::bootstrap {
namespace {

// The listener's answer to a hello (4 bytes on the wire).
constexpr char kAccepted[4] = {'O', 'K', '!', '!'};
constexpr char kLost[4] = {'L', 'O', 'S', 'E'};  // both dialled: the lower rank's connection wins
constexpr char kGone[4] = {'G', 'O', 'N', 'E'};  // this rank gave up on the group

// How long the listener gives a dialler to send its hello and to set a pair up: it serves one
// connection at a time, so a stalled dialler must not hold up the others for long.
constexpr auto kHelloTimeout = std::chrono::seconds(10);
constexpr auto kSetUpTimeout = std::chrono::seconds(30);

const char* channelName(Connector::Channel channel) {
  return channel == Connector::kCollective ? "coll" : "p2p";
}

std::string addressKey(int rank) { return strCat("ringx/addr/", rank); }

std::chrono::milliseconds timeLeft(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(std::chrono::milliseconds(1), left);
}

}  // namespace

Connector::Connector(Store& store, int rank, int size, std::string token)
    : store_(store), rank_(rank), size_(size), token_(std::move(token)), addresses_(size) {
  for (auto& slots : slots_) slots.resize(size);
  listenFd_ = listenAnyPort(&port_);
  if (::pipe2(wakePipe_, O_CLOEXEC) != 0) {
    ::close(listenFd_);
    RINGX_THROW(IoError, "creating the connector's wake-up pipe: ", std::strerror(errno));
  }
}

void Connector::start() {
  for (int channel = 0; channel < kChannels; ++channel) RINGX_ENFORCE(make_[channel] != nullptr);
  // Serve before publishing: whoever reads our address may dial at once.
  listener_ = std::thread([this] { listen(); });
  store_.setString(addressKey(rank_), formatAddress(port_));
}

Connector::~Connector() {
  const char byte = 0;
  (void)!::write(wakePipe_[1], &byte, 1);
  if (listener_.joinable()) listener_.join();
  ::close(listenFd_);
  ::close(wakePipe_[0]);
  ::close(wakePipe_[1]);
}

void Connector::setChannel(Channel channel, MakePair make, AdoptPair adopt) {
  std::lock_guard<std::mutex> lock(mutex_);
  make_[channel] = std::move(make);
  adopt_[channel] = std::move(adopt);
}

void Connector::prefetchAddresses(const std::vector<int>& peers, Deadline deadline) {
  for (int peer : peers) addressOf(peer, deadline);
}

const PeerAddress& Connector::addressOf(int peer, Deadline deadline) {
  std::lock_guard<std::mutex> lock(addressMutex_);
  if (!addresses_[peer]) {
    addresses_[peer] = std::make_unique<PeerAddress>(
        parseAddress(store_.getString(addressKey(peer), timeLeft(deadline))));
  }
  return *addresses_[peer];
}

HostLayout Connector::hostLayout(Deadline deadline, const HostLayout* fake) {
  const std::string layoutKey = "ringx/host_layout";
  if (rank_ == 0) {
    HostLayout layout;
    if (fake) {
      RINGX_CHECK(fake->size() == size_, "ringx: a fake host layout of ", fake->size(),
                  " ranks for a group of ", size_);
      layout = *fake;
    } else {
      std::map<std::string, int> label;
      std::vector<int> labels(size_);
      for (int peer = 0; peer < size_; ++peer) {
        const std::string& host = peer == 0 ? hostIdentity() : addressOf(peer, deadline).host;
        labels[peer] = label.emplace(host, static_cast<int>(label.size())).first->second;
      }
      layout = HostLayout(labels);
    }
    store_.setString(layoutKey, layout.encode());
  }
  return HostLayout::decode(store_.getString(layoutKey, timeLeft(deadline)), size_);
}

Connector::DialResult Connector::dial(Channel channel, int peer, Deadline deadline, int* fdOut) {
  const PeerAddress& address = addressOf(peer, deadline);
  const int fd = dialPeer(address, peer, deadline, /*refusedIsFinal=*/true);
  const Hello hello = makeHello(rank_, channelName(channel), token_);
  char reply[4] = {0, 0, 0, 0};
  const bool answered =
      writeFull(fd, &hello, sizeof(hello)) && readFull(fd, reply, sizeof(reply), deadline);
  if (answered && std::memcmp(reply, kAccepted, 4) == 0) {
    *fdOut = fd;
    return DialResult::kAccepted;
  }
  ::close(fd);
  if (answered && std::memcmp(reply, kLost, 4) == 0) return DialResult::kLost;
  if (answered && std::memcmp(reply, kGone, 4) == 0) {
    RINGX_THROW_PEER(peer, "rank ", peer,
                     " has given up on the group and takes no new connections (its own error "
                     "says why)");
  }
  if (Clock::now() >= deadline) {
    RINGX_THROW(TimeoutError, "rank ", peer, " did not answer a connection from rank ", rank_,
                " before the timeout (is it stopped or overloaded?)");
  }
  RINGX_THROW_PEER(peer, "rank ", peer, " did not accept the connection from rank ", rank_,
                   " (different group token? are two jobs sharing one store?)");
}

void Connector::deliver(Channel channel, int peer, std::unique_ptr<Connection> pair,
                        std::unique_lock<std::mutex>& lock) {
  Slot& slot = slots_[channel][peer];
  if (adopt_[channel]) {
    slot.state = State::kAccepting;  // others keep waiting until the adopter has it
    lock.unlock();
    adopt_[channel](peer, std::move(pair));
    lock.lock();
    slot.state = State::kTaken;
  } else {
    slot.pair = std::move(pair);
    slot.state = State::kReady;
    if (closed_) slot.pair->shutdown();
  }
  changed_.notify_all();
}

std::unique_ptr<Connection> Connector::connect(Channel channel, int peer, Deadline deadline) {
  RINGX_ENFORCE(peer >= 0 && peer < size_ && peer != rank_);
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    Slot& slot = slots_[channel][peer];
    switch (slot.state) {
      case State::kReady:
        slot.state = State::kTaken;
        return std::move(slot.pair);
      case State::kTaken:
        RINGX_ENFORCE(adopt_[channel] != nullptr);
        return nullptr;
      case State::kNone: {
        if (closed_) {
          RINGX_THROW(Error, "ringx: rank ", rank_, " cannot connect to rank ", peer,
                      ": its group was aborted");
        }
        slot.state = State::kDialing;
        slot.error.clear();
        lock.unlock();
        std::unique_ptr<Connection> pair;
        DialResult result;
        try {
          int fd = -1;
          result = dial(channel, peer, deadline, &fd);
          if (result == DialResult::kAccepted) pair = make_[channel](peer, fd, deadline);
        } catch (...) {
          lock.lock();
          // The peer's own connection may have arrived meanwhile (and the peer, done with us,
          // left before answering our dial): then that one serves, and the error does not count.
          if (slot.state != State::kDialing) continue;
          slot.state = State::kNone;
          changed_.notify_all();
          throw;
        }
        lock.lock();
        if (pair) {
          deliver(channel, peer, std::move(pair), lock);
        } else if (slot.state == State::kDialing) {
          slot.state = State::kAwaiting;  // the peer's own connection is on its way
        }
        continue;
      }
      case State::kDialing:
      case State::kAwaiting:
      case State::kAccepting:
        if (changed_.wait_until(lock, deadline) == std::cv_status::timeout &&
            Clock::now() >= deadline) {
          RINGX_THROW(TimeoutError, "rank ", peer, " did not complete its connection to rank ",
                      rank_, " (", channelName(channel), ") before the timeout",
                      slot.error.empty() ? "" : strCat(": ", slot.error));
        }
        continue;
    }
  }
}

void Connector::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
  for (auto& slots : slots_) {
    for (Slot& slot : slots) {
      if (slot.pair) slot.pair->shutdown();
    }
  }
}

std::vector<int> Connector::connectedPeers(Channel channel) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<int> peers;
  for (int peer = 0; peer < size_; ++peer) {
    const State state = slots_[channel][peer].state;
    if (state == State::kReady || state == State::kTaken) peers.push_back(peer);
  }
  return peers;
}

void Connector::listen() {
  for (;;) {
    pollfd fds[2] = {{listenFd_, POLLIN, 0}, {wakePipe_[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;  // stopping
    const int fd = ::accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) serveOne(fd);
  }
}

void Connector::serveOne(int fd) {
  Hello theirs{};
  const Hello mine = makeHello(rank_, "", token_);
  if (!readFull(fd, &theirs, sizeof(theirs), Clock::now() + kHelloTimeout)) {
    ::close(fd);
    return;
  }
  int channel = -1;
  for (int c = 0; c < kChannels; ++c) {
    if (std::strncmp(theirs.channel, channelName(static_cast<Channel>(c)), kChannelBytes) == 0)
      channel = c;
  }
  const int peer = theirs.rank;
  if (!sameGroup(theirs, mine) || channel < 0 || peer < 0 || peer >= size_ || peer == rank_) {
    std::cerr << "ringx: rank " << rank_ << " rejected a connection that did not carry this "
              << "group's token (a stranger, or a rank of another job)\n";
    ::close(fd);
    return;
  }
  const Channel ch = static_cast<Channel>(channel);
  std::unique_lock<std::mutex> lock(mutex_);
  Slot& slot = slots_[ch][peer];
  // Take the peer's connection unless we have one, or are dialling and win (lower rank).
  const bool accept = !closed_ && (slot.state == State::kNone || slot.state == State::kAwaiting ||
                                   (slot.state == State::kDialing && peer < rank_));
  if (!accept) {
    const char* reply = closed_ ? kGone : kLost;
    lock.unlock();
    (void)writeFull(fd, reply, 4);
    ::close(fd);
    return;
  }
  slot.state = State::kAccepting;
  MakePair make = make_[ch];
  lock.unlock();
  std::unique_ptr<Connection> pair;
  std::string error;
  try {
    if (!writeFull(fd, kAccepted, 4)) {
      ::close(fd);
      RINGX_THROW_PEER(peer, "rank ", peer, " dropped its connection before it was set up");
    }
    pair = make(peer, fd, Clock::now() + kSetUpTimeout);
  } catch (const std::exception& e) {
    error = e.what();
  }
  lock.lock();
  if (!pair) {
    slot.state = State::kNone;
    slot.error = error;
    changed_.notify_all();
    return;
  }
  deliver(ch, peer, std::move(pair), lock);
}

}  // namespace ringx::bootstrap
