// Connections on demand: a rank connects only to the peers its algorithms use.
//
// Every rank listens on one port for its group and publishes "host, addresses, port" once under
// its own Store key. Nobody reads every key: a rank reads a peer's key the first time it needs
// that peer (and, at start, those of the few peers the structured algorithms use: ranks at
// distance 1, 2, 4, ... around the ring), so the store carries O(N log N) reads in all instead
// of O(N^2).
//
// A pair to peer P on a channel (collective or point-to-point) is made by whichever of the two
// ranks needs it first: it dials P and sends a hello (group token, channel, rank). P's listener
// thread answers on P's behalf, so a rank whose own thread is busy (blocked in a collective
// with someone else, or idle between calls) is still reachable, and the dialler never waits for
// P's algorithms. The listener accepts unless P already has, or is making, a connection to the
// dialler on that channel; when both ends dial each other at the same moment, the connection
// dialled by the lower rank wins: the higher rank's listener takes it, the lower rank's listener
// answers the higher rank "lose", and the higher rank then waits for the winning connection to
// arrive. Exactly one connection per pair and channel results, without a deadlock, whatever
// the timing.
//
// Failure: a peer whose group is gone refuses the dial (nothing listens) or answers "gone" (it
// aborted): a PeerError naming it, at once. A peer that stopped answering costs at most the
// caller's deadline: a TimeoutError naming it. The store is read only for a peer's address, and
// never after a failure.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/bootstrap/connection.h"
#include "backend/bootstrap/host_layout.h"
#include "backend/bootstrap/sockets.h"
#include "backend/store/store.h"
#include "base/deadline.h"

namespace ringx::bootstrap {

class Connector {
 public:
  enum Channel : int { kCollective = 0, kPointToPoint = 1, kChannels = 2 };
  // Builds this rank's end of a pair over an authenticated socket (owns `fd`, also on error).
  using MakePair = std::function<std::unique_ptr<Connection>(int peer, int fd, Deadline deadline)>;
  // Receives every pair of a channel as soon as it is made, from whichever thread made it.
  using AdoptPair = std::function<void(int peer, std::unique_ptr<Connection> pair)>;

  // Opens this rank's listening socket; start() serves it.
  Connector(Store& store, int rank, int size, std::string token);
  // Stops the listener; pairs not taken yet are closed.
  ~Connector();
  Connector(const Connector&) = delete;
  Connector& operator=(const Connector&) = delete;

  // How pairs of `channel` are made, and (optionally) where they go. Call for every channel
  // before start().
  void setChannel(Channel channel, MakePair make, AdoptPair adopt = nullptr);
  // Starts answering dials and publishes this rank's address: from now on peers may connect.
  void start();

  // Reads the addresses of `peers` from the store now (blocking until each is published).
  void prefetchAddresses(const std::vector<int>& peers, Deadline deadline);

  // The host of every rank of the group. Collective: rank 0 builds the layout, from `fake`
  // when given (tests, benchmarks) or else by reading every rank's address once (keeping them),
  // and publishes it under one key (host_layout.h's compact text); every rank reads that key
  // once. O(N) store operations in all, where every rank reading every address would be O(N^2).
  // Only rank 0's `fake` counts, so that ranks cannot disagree on the layout.
  HostLayout hostLayout(Deadline deadline, const HostLayout* fake = nullptr);

  // Makes sure a pair to `peer` exists on `channel`, dialling it when this rank is the first to
  // need it, and waiting for the peer's connection when the peer was. Returns the pair, or null
  // for a channel with an AdoptPair (the pair went there). Throws PeerError or TimeoutError
  // naming the peer.
  std::unique_ptr<Connection> connect(Channel channel, int peer, Deadline deadline);

  // From now on, dials of this rank are answered "gone", and pairs made but not yet taken are
  // shut down, so that peers learn of the failure (Group::abort).
  void close();

  // Peers with a pair on `channel` (made, taken or adopted), ascending.
  std::vector<int> connectedPeers(Channel channel) const;

 private:
  enum class State : uint8_t {
    kNone,       // no connection, nobody making one
    kDialing,    // this rank is dialling the peer
    kAwaiting,   // the peer won a simultaneous dial: its connection is on its way
    kAccepting,  // the listener is setting up the peer's connection
    kReady,      // made, waiting for connect() to take it
    kTaken,      // handed out (or adopted)
  };
  struct Slot {
    State state = State::kNone;
    std::unique_ptr<Connection> pair;  // while kReady
    std::string error;                 // why the last attempt failed (for a waiting connect())
  };
  enum class DialResult { kAccepted, kLost };

  void listen();
  void serveOne(int fd);
  DialResult dial(Channel channel, int peer, Deadline deadline, int* fd);
  const PeerAddress& addressOf(int peer, Deadline deadline);
  // Hands a made pair out (kReady, or to the adopter); called with the lock held, may unlock.
  void deliver(Channel channel, int peer, std::unique_ptr<Connection> pair,
               std::unique_lock<std::mutex>& lock);

  Store& store_;
  const int rank_;
  const int size_;
  const std::string token_;
  int listenFd_ = -1;
  int port_ = 0;
  int wakePipe_[2] = {-1, -1};

  MakePair make_[kChannels];
  AdoptPair adopt_[kChannels];

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Slot> slots_[kChannels];
  bool closed_ = false;

  std::mutex addressMutex_;
  std::vector<std::unique_ptr<PeerAddress>> addresses_;

  std::thread listener_;
};

}  // namespace ringx::bootstrap
