// A Context is one rank's set of Pairs to the other ranks of a group, plus the
// progress loop that drives them.
//
// Pairs are made on demand: the first time an algorithm asks for a peer, the
// Context calls its connect function (the group's Connector), so a rank only
// holds connections to the peers its algorithms talk to.
//
// waitUntil() is the only place where a rank blocks on the network: it advances
// every pair that has queued work (so sends keep flowing while we wait for a
// receive), and when nothing can move it sleeps in poll() until a socket is
// ready or the deadline passes. A passed deadline becomes a TimeoutError that
// names the peers still owing bytes.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "backend/bootstrap/host_layout.h"
#include "backend/transport/core_contention.h"
#include "backend/transport/pair.h"
#include "base/deadline.h"

namespace ringx::transport {

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
  // Makes the pair to `peer`, blocking until it is connected or `deadline` passes.
  using ConnectFunction = std::function<std::unique_ptr<Pair>(int peer, Deadline deadline)>;

  // `localRanks`: ranks of the group on this host, this one included (for the spin policy).
  // `hosts`: the host of every rank, for the algorithms (none given: all on one host).
  Context(int rank, int size, ConnectFunction connect, int localRanks,
          bootstrap::HostLayout hosts = {});
  ~Context();

  int rank() const { return rank_; }
  int size() const { return size_; }
  const bootstrap::HostLayout& hosts() const { return hosts_; }
  // The pair to `peer`, connected first if this is the first time it is needed.
  Pair& pair(int peer, Deadline deadline);
  // The pair to `peer` if connected, else null. Safe to call from any thread.
  const Pair* connectedPair(int peer) const;
  // How many peers this rank holds a pair to. Safe to call from any thread.
  int connectedCount() const { return connectedCount_.load(std::memory_order_acquire); }

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
  Pair& connected(int peer);

  const int rank_;
  const int size_;
  const bootstrap::HostLayout hosts_;
  ConnectFunction connect_;
  // pairs_[peer] owns the pair; published_[peer] lets other threads see it once it is made.
  std::vector<std::unique_ptr<Pair>> pairs_;
  std::unique_ptr<std::atomic<Pair*>[]> published_;
  std::atomic<int> connectedCount_{0};
  // The connected pairs, in the order they were made: what the progress loop walks.
  std::vector<Pair*> active_;
  // How long to poll shared memory before sleeping on the doorbell
  // (RINGX_SPIN_MICROS overrides; see the constructor).
  std::chrono::microseconds spin_{0};
  // The same while a PatientWaits lives on the waiting thread.
  std::chrono::microseconds patientSpin_{0};
  // More ranks on this host than cores to run them: give the core away between polls.
  bool oversubscribed_ = false;
  // Other threads want the cores (core_contention.h): poll only kContendedSpin, then sleep.
  CoreContention contention_;
  bool spinOverridden_ = false;  // RINGX_SPIN_MICROS set: the policy is the user's
};

}  // namespace ringx::transport
