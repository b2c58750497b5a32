// Clock alignment for traces: each rank measures how far its steady clock is
// from rank 0's and records the result in its trace (trace::ClockSync) so
// readers can put every rank on rank 0's time axis.
//
// Ranks form a binary tree (rank r's parent is (r-1)/2), so each rank holds at
// most three clock connections and rank 0 answers two ranks, not N-1. A rank
// measures its offset to its parent, and the parent answers in rank 0's time
// (its own clock plus its own offset to rank 0), so the child gets its offset to
// rank 0 directly; the parent's uncertainty travels along and adds up, about
// half a round trip per level of the tree.
//
// One measurement is a burst of ping-pongs: the rank sends its time t1, the
// parent answers with rank 0's time t2, the answer arrives at t3. If the two legs
// took equally long, rank 0's clock read t2 at local time (t1 + t3) / 2; the
// error of that assumption is at most half the round trip, so the burst keeps
// the sample with the shortest round trip and reports half of it (plus the
// parent's own uncertainty) as the uncertainty (the NTP/Cristian approach).
// Bursts repeat periodically, so a reader can follow drift between hosts.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "trace/format/schema.h"

namespace ringx {

// The clock tree's edges of `rank`: its parent (-1 for rank 0) and its children.
int clockTreeParent(int rank);
std::vector<int> clockTreeChildren(int rank, int size);

// One burst of `rounds` ping-pongs over `fd` (connected to the parent's ClockService).
// Throws IoError when the connection fails.
trace::ClockSync measureClockOffset(int fd, int rounds);

// Runs on every rank of a traced job, on one thread: measures a burst to the
// parent at once and then every `interval` (recording each result with
// trace::Recorder::clockSync()), and between bursts answers the children's pings.
class ClockService {
 public:
  // `parentFd`: connected to the parent's service (-1 on rank 0); `childFds`: to the
  // children's. Takes ownership of the fds.
  ClockService(int rank, int parentFd, std::vector<int> childFds,
               std::chrono::milliseconds interval, int rounds = 16);
  ~ClockService();
  ClockService(const ClockService&) = delete;
  ClockService& operator=(const ClockService&) = delete;

  // Blocks until the first measurement was recorded (non-zero ranks), so that
  // a trace always carries an offset even for a job that ends at once.
  void waitFirstMeasurement(std::chrono::milliseconds timeout);

 private:
  void run();
  // Answers the children's pings until `until` or until stopping; false when stopping.
  bool serveUntil(std::chrono::steady_clock::time_point until);

  const int rank_;
  int parentFd_;
  std::vector<int> childFds_;
  // This rank's offset to rank 0 and its uncertainty, as the children are told (only the
  // service's thread touches them).
  int64_t offsetNs_ = 0;
  int64_t uncertaintyNs_ = 0;
  const std::chrono::milliseconds interval_;
  const int rounds_;
  int wakePipe_[2] = {-1, -1};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool measured_ = false;
  std::thread thread_;
};

}  // namespace ringx
