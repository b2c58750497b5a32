// TCP set-up: listening, dialling and the hello that opens every connection.
//
// Each new connection opens with a hello that carries the group's token (random bytes that only
// members read from the Store), the channel name and the sender's rank; a connection with the
// wrong token is dropped, so nothing outside the group can join a ring. The group's connections
// are made on demand (connector.h) with the pieces below; connectSockets() is the
// all-at-once rendezvous for a fixed set of edges (the trace's clock tree, and tests): every rank
// listens, publishes how to reach it through the Store, connects to the listed peers above it
// and accepts the listed peers below it.
#pragma once

#include <string>
#include <vector>

#include "backend/store/store.h"
#include "base/deadline.h"

namespace ringx::bootstrap {

// Blocking helpers for set-up messages on a connected socket.
bool readFull(int fd, void* data, size_t n, Deadline deadline);
bool writeFull(int fd, const void* data, size_t n);

constexpr size_t kTokenBytes = 32;
constexpr size_t kChannelBytes = 16;

// The first bytes on every new connection.
struct Hello {
  char magic[4];
  int32_t rank;
  char channel[kChannelBytes];
  char token[kTokenBytes];
};
static_assert(sizeof(Hello) == 56, "hello layout is part of the wire format");

Hello makeHello(int rank, const std::string& channel, const std::string& token);
// Whether `theirs` is a hello of this group (magic and token; channel and rank are the caller's).
bool sameGroup(const Hello& theirs, const Hello& mine);

// How to reach a rank, as it publishes it: its host identity, its addresses and its port.
struct PeerAddress {
  std::string host;
  std::vector<std::string> addresses;
  int port = 0;
};
std::string formatAddress(int port);  // this host's record for a listener on `port`
PeerAddress parseAddress(const std::string& text);

// A listening socket on an ephemeral port (returned in *port); the caller owns the fd.
int listenAnyPort(int* port);

// Connects to `peer` (rank `peerRank`), retrying until the deadline (the peer may not listen
// yet), and returns the fd. With `refusedIsFinal`, a refused connection (nobody listens on that
// port any more: the peer's group is gone) throws PeerError at once instead of retrying.
int dialPeer(const PeerAddress& peer, int peerRank, Deadline deadline, bool refusedIsFinal);

// A connected, authenticated socket to one peer, and the peer's host identity.
struct Socket {
  int fd = -1;
  std::string host;
};

// Connects this rank to each rank in `peers` (every rank must list the same edges from both
// ends). Returns sockets[peer] for those peers, empty for the others; the caller owns the fds.
std::vector<Socket> connectSockets(Store& store, int rank, int size, const std::string& channel,
                                   const std::string& token, Deadline deadline,
                                   const std::vector<int>& peers);

}  // namespace ringx::bootstrap
