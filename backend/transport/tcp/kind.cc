// The TCP kind: joins any edge, over the edge's own socket.
#include <utility>

#include "backend/transport/registry.h"
#include "backend/transport/tcp/pair.h"

namespace ringx::transport {
namespace {

class TcpKind final : public TransportKind {
 public:
  explicit TcpKind(size_t sendBatchBytes) : sendBatchBytes_(sendBatchBytes) {}
  const char* name() const override { return "tcp"; }
  bool canConnect(const Introduction&, const Introduction&) const override { return true; }
  std::unique_ptr<Pair> connect(Edge& edge) override {
    return std::make_unique<tcp::TcpPair>(edge.peer, std::exchange(edge.fd, -1), sendBatchBytes_);
  }

 private:
  const size_t sendBatchBytes_;
};

}  // namespace

std::unique_ptr<TransportKind> makeTcpKind(const MeshOptions& options) {
  return std::make_unique<TcpKind>(options.tcpSendBatchBytes);
}

std::unique_ptr<Pair> pointToPointPair(int peer, int fd, const MeshOptions& options) {
  return std::make_unique<tcp::TcpPair>(peer, fd, options.tcpSendBatchBytes);
}

}  // namespace ringx::transport
