// A Context is one rank's set of Pairs to the other ranks of a group, plus the
// progress loop that drives them.
//
// waitUntil() is the only place where a rank blocks on the network: it advances
// every pair that has queued work (so sends keep flowing while we wait for a
// receive), and when nothing can move it sleeps in poll() until a socket is
// ready or the deadline passes. A passed deadline becomes a TimeoutError that
// names the peers still owing bytes.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "backend/transport/pair.h"

namespace ringx::transport {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// While one lives on a thread, that thread's waits on shared memory poll longer
// before they sleep: it is a caller blocked on its own collective, with nothing
// else to give the core to (see the Context constructor).
class PatientWaits {
 public:
  PatientWaits();
  ~PatientWaits();
  PatientWaits(const PatientWaits&) = delete;
  PatientWaits& operator=(const PatientWaits&) = delete;
};

class Context {
 public:
  // `pairs[peer]` for every peer != rank; pairs[rank] is null.
  Context(int rank, int size, std::vector<std::unique_ptr<Pair>> pairs);
  ~Context();

  int rank() const { return rank_; }
  int size() const { return size_; }
  Pair& pair(int peer);

  // Drives all pairs until `done()` returns true. Throws TimeoutError at
  // `deadline` and PeerError when a peer's connection breaks.
  void waitUntil(const std::function<bool()>& done, Deadline deadline);

  void waitRecv(int peer, uint64_t offset, Deadline deadline);
  void waitSend(int peer, uint64_t offset, Deadline deadline);
  // Waits until nothing is queued on any pair.
  void waitAll(Deadline deadline);

  // Breaks every connection so that peers blocked on us fail at once.
  void shutdown();

 private:
  bool progressAll();
  void sleepUntilReady(Deadline deadline);

  const int rank_;
  const int size_;
  std::vector<std::unique_ptr<Pair>> pairs_;
  // How long to poll shared memory before sleeping on the doorbell
  // (RINGX_SPIN_MICROS overrides; see the constructor).
  std::chrono::microseconds spin_{0};
  // The same while a PatientWaits lives on the waiting thread.
  std::chrono::microseconds patientSpin_{0};
  // More ranks on this host than cores to run them: give the core away between polls.
  bool oversubscribed_ = false;
};

}  // namespace ringx::transport
