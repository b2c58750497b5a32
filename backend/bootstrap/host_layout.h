// Which host every rank of a group is on, so that algorithms can keep traffic within a host
// (shared memory) and send only one rank per host across hosts.
//
// Hosts are numbered 0, 1, ... in the order of their lowest rank, so the leaders (the lowest
// rank of each host) are ascending and host h's leader is leaders()[h]. Every rank of a group
// holds the same layout: rank 0 builds it once and publishes it under one store key
// (Connector::hostLayout), which is all the store traffic it costs.
//
// A layout can also be made up (fake hosts): tests and benchmarks that run many ranks on one
// machine use it to exercise the hierarchical algorithms. It steers the algorithms only; the
// transport of each pair is still chosen from the real host identity.
#pragma once

#include <string>
#include <vector>

namespace ringx::bootstrap {

class HostLayout {
 public:
  // No ranks (a Context given no layout treats that as one host).
  HostLayout() = default;
  // Rank r is on the host labelled labels[r]; labels are any integers, renumbered here.
  explicit HostLayout(const std::vector<int>& labels);
  // Every rank on one host.
  static HostLayout oneHost(int size);
  // Ranks in consecutive blocks of `ranksPerHost` (the last block may be smaller).
  static HostLayout blocks(int size, int ranksPerHost);

  int size() const { return static_cast<int>(hostOfRank_.size()); }
  int hosts() const { return static_cast<int>(leaders_.size()); }
  int hostOf(int rank) const { return hostOfRank_[rank]; }
  // The ranks on `host`, ascending (its leader first).
  std::vector<int> ranksOn(int host) const;
  int ranksOnHost(int host) const { return offsets_[host + 1] - offsets_[host]; }
  // The lowest rank of each host, ascending: leaders()[h] leads host h.
  const std::vector<int>& leaders() const { return leaders_; }
  int leaderOf(int rank) const { return leaders_[hostOfRank_[rank]]; }
  bool isLeader(int rank) const { return leaderOf(rank) == rank; }
  // Ranks on the fullest host.
  int largestHost() const { return largest_; }

  // Compact text for the store: runs of "host*count" for consecutive ranks on one host,
  // comma-separated ("0*8,1*8" for two hosts of 8), so that the usual layout (a host's ranks
  // numbered together) costs a few bytes per host rather than per rank.
  std::string encode() const;
  // The layout of `size` ranks from encode()'s text; throws Error when it does not fit.
  static HostLayout decode(const std::string& text, int size);

  bool operator==(const HostLayout& other) const { return hostOfRank_ == other.hostOfRank_; }

 private:
  std::vector<int> hostOfRank_;
  std::vector<int> leaders_;
  // byHost_[offsets_[h] .. offsets_[h+1]): host h's ranks, ascending.
  std::vector<int> byHost_;
  std::vector<int> offsets_{0};
  int largest_ = 0;
};

}  // namespace ringx::bootstrap
