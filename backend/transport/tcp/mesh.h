// Rendezvous for the TCP transport: every rank listens, publishes how to reach
// it through the Store, and connects to every higher rank; lower ranks connect
// to it. Each new connection opens with a hello that carries the group's token
// (random bytes that only members read from the Store), the channel name and
// the sender's rank; a connection with the wrong token is dropped, so nothing
// outside the group can join a ring.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/store/store.h"
#include "backend/transport/context.h"

namespace ringx::transport::tcp {

// Blocking helpers for set-up messages on a connected socket.
bool readFull(int fd, void* data, size_t n, Deadline deadline);
bool writeFull(int fd, const void* data, size_t n);

// A connected, authenticated socket to one peer, and the peer's host identity.
struct Socket {
  int fd = -1;
  std::string host;
};

// Returns sockets[peer] for every peer (sockets[rank] is empty); the caller owns the fds.
std::vector<Socket> connectSockets(Store& store, int rank, int size, const std::string& channel,
                                   const std::string& token, Deadline deadline);

// TCP pairs over connectSockets(). Returns pairs[peer] for every peer (pairs[rank] is null).
// `channel` keeps several meshes of one group apart (collectives and point-to-point).
std::vector<std::unique_ptr<Pair>> connectMesh(Store& store, int rank, int size,
                                               const std::string& channel, const std::string& token,
                                               Deadline deadline);

}  // namespace ringx::transport::tcp
