// TCP implementation of transport::Pair: one non-blocking, TCP_NODELAY socket.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/store/store.h"
#include "backend/transport/context.h"
#include "backend/transport/pair.h"

namespace ringx::transport::tcp {

class TcpPair : public Pair {
 public:
  // Takes ownership of a connected socket; makes it non-blocking. One progress() sends at most
  // `sendBatchBytes` (0: until the socket is full) before it receives (pair.cc says why).
  TcpPair(int peer, int fd, size_t sendBatchBytes);
  ~TcpPair() override;

  bool progress() override;
  int pollFd() const override { return fd_; }
  void shutdown() override;
  const char* transportName() const override { return "tcp"; }

 private:
  bool progressSends();
  bool progressRecvs();

  int fd_;
  const size_t sendBatchBytes_;
  // Staging for reducing receives (see progressRecvs), allocated at the first one: most
  // connections never reduce (point-to-point, broadcast trees), and a job of a thousand ranks
  // holds a few dozen connections per rank.
  std::vector<char> scratch_;
  size_t scratchHeld_ = 0;
};

// TCP pairs to every other rank, all at once, with MeshOptions' defaults. Returns pairs[peer] for
// every peer (pairs[rank] is null).
std::vector<std::unique_ptr<Pair>> connectMesh(Store& store, int rank, int size,
                                               const std::string& channel, const std::string& token,
                                               Deadline deadline);

}  // namespace ringx::transport::tcp
