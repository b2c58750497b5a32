// What the connector (connector.h) makes per peer and channel, as it sees it: something it owns
// until it hands it out, and can shut down when the group aborts. The transports' Pair is one;
// bootstrap sits below the transports and so knows it only as this.
#pragma once

namespace ringx::bootstrap {

class Connection {
 public:
  virtual ~Connection() = default;
  // Closes the connection so that the peer notices at once.
  virtual void shutdown() = 0;
};

}  // namespace ringx::bootstrap
