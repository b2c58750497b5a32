// TCP implementation of transport::Pair: one non-blocking, TCP_NODELAY socket.
#pragma once

#include <vector>

#include "backend/transport/pair.h"

namespace ringx::transport::tcp {

class TcpPair : public Pair {
 public:
  // Takes ownership of a connected socket; makes it non-blocking.
  TcpPair(int peer, int fd);
  ~TcpPair() override;

  bool progress() override;
  int pollFd() const override { return fd_; }
  void shutdown() override;
  const char* transportName() const override { return "tcp"; }

 private:
  bool progressSends();
  bool progressRecvs();

  int fd_;
  // Staging for reducing receives (see progressRecvs), allocated at the first one: most
  // connections never reduce (point-to-point, broadcast trees), and a job of a thousand ranks
  // holds a few dozen connections per rank.
  std::vector<char> scratch_;
  size_t scratchHeld_ = 0;
};

}  // namespace ringx::transport::tcp
