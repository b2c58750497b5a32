// Clock alignment for traces: each rank measures how far its steady clock is
// from rank 0's, over a TCP connection of the group, and records the result
// in its trace (trace::ClockSync) so readers can put every rank on rank 0's
// time axis.
//
// One measurement is a burst of ping-pongs: the rank sends its time t1, rank 0
// answers with its time t2, the answer arrives at t3. If the two legs took
// equally long, rank 0's clock read t2 at local time (t1 + t3) / 2; the error
// of that assumption is at most half the round trip, so the burst keeps the
// sample with the shortest round trip and reports half of it as the
// uncertainty (the NTP/Cristian approach). Bursts repeat periodically, so a
// reader can follow drift between hosts.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/trace/schema.h"

namespace ringx {

// One burst of `rounds` ping-pongs over `fd` (connected to rank 0's ClockService).
// Throws IoError when the connection fails.
trace::ClockSync measureClockOffset(int fd, int rounds);

// Runs on every rank of a traced job. On rank 0 it answers pings from every
// other rank; on the others it measures a burst at once and then every
// `interval`, recording each result with trace::Recorder::clockSync().
class ClockService {
 public:
  // `sockets[peer]`: a connected socket to each peer (or -1); rank 0 needs all
  // of them, other ranks only sockets[0]. Takes ownership of the fds.
  ClockService(int rank, std::vector<int> sockets, std::chrono::milliseconds interval,
               int rounds = 16);
  ~ClockService();
  ClockService(const ClockService&) = delete;
  ClockService& operator=(const ClockService&) = delete;

  // Blocks until the first measurement was recorded (non-zero ranks), so that
  // a trace always carries an offset even for a job that ends at once.
  void waitFirstMeasurement(std::chrono::milliseconds timeout);

 private:
  void serve();    // rank 0
  void measure();  // other ranks

  const int rank_;
  std::vector<int> sockets_;
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
