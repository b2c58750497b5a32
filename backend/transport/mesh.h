// Makes one rank's collective pairs of one group: per edge, the first transport kind in the
// registry's order that can join it (registry.h). A job spanning hosts therefore uses shared
// memory and TCP at once, and the algorithms cannot tell the difference.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/transport/registry.h"

namespace ringx::transport {

// Thread-safe: the connector's listener and the collective thread make pairs at the same time.
class PairMaker {
 public:
  PairMaker(int rank, std::string token, std::string channel, MeshOptions options);
  ~PairMaker();
  PairMaker(const PairMaker&) = delete;
  PairMaker& operator=(const PairMaker&) = delete;

  // Takes ownership of `fd` (also on error). Both ends call this at the same time.
  std::unique_ptr<Pair> makePair(int peer, int fd, Deadline deadline);
  // Tells the kinds how many of the group's ranks share this host (TransportKind::setLocalRanks):
  // the group's size until the group knows its host layout, then the ranks on this host. Until
  // it is first called, the kinds assume a host of their own.
  void setLocalRanks(int localRanks);

 private:
  const int rank_;
  const MeshOptions options_;
  const uint64_t hostHash_;
  const std::vector<std::unique_ptr<TransportKind>> kinds_;
};

}  // namespace ringx::transport
