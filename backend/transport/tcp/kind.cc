// The TCP kind: joins any edge, over the edge's own socket.
#include <utility>

#include "backend/transport/registry.h"
#include "backend/transport/tcp/pair.h"

namespace ringx::transport {
namespace {

class TcpKind final : public TransportKind {
 public:
  const char* name() const override { return "tcp"; }
  bool canConnect(const Introduction&, const Introduction&) const override { return true; }
  std::unique_ptr<Pair> connect(Edge& edge) override {
    return std::make_unique<tcp::TcpPair>(edge.peer, std::exchange(edge.fd, -1));
  }
};

}  // namespace

std::unique_ptr<TransportKind> makeTcpKind() { return std::make_unique<TcpKind>(); }

std::unique_ptr<Pair> pointToPointPair(int peer, int fd) {
  return std::make_unique<tcp::TcpPair>(peer, fd);
}

}  // namespace ringx::transport
