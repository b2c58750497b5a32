// The device ring's host side: set-up through the store, one collective at a time, and the
// watch that turns a dead or stuck peer into an error on every rank.
//
// DeviceRing drives an Instance, which owns what is specific to where the data lives:
//   HostInstance (host_ring.h)       host memory shared between processes, CPU threads as the
//                                    kernels: the protocol's instance that CI runs;
//   CUDA IPC (backend/device/cuda/ipc_ring.h)  device memory shared through CUDA IPC handles,
//                                    a kernel with a thread block per channel.
// Everything else (who waits for what, flags, slots, the error) is here and in protocol.h,
// the same for both.
//
// Set-up: each rank makes its region, and posts through the store its pid, its geometry and
// the bytes that let a peer map the region; each maps every peer's. The pids are how the watch
// tells a dead peer from a slow one: the ring's ranks share one host.
//
// A collective is start() (launch the kernels, return at once: on the GPU they are ordered on a
// stream, behind the ring's earlier collectives) then finish() (watch until they return), which
// may run on another thread, in the order of the starts; up to kJobSlots collectives may be
// outstanding. While watching, a peer that died, or a deadline that passed, makes the host ask
// the kernels to stop, blaming that peer; the kernels' aborted word spreads the blame round the
// ring, and finish() throws a PeerError that names the collective and the blamed rank. The ring
// is then broken: every later collective fails at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/device/ring/protocol.h"
#include "backend/store/store.h"
#include "base/deadline.h"

namespace ringx::device_ring {

class Instance {
 public:
  virtual ~Instance() = default;
  // "cpu-shm" or "cuda-ipc": what ringx.transports() and errors call it.
  virtual const char* name() const = 0;
  // Makes this rank's zero-filled region of `bytes`, writes `header` at its start, and returns
  // what a peer needs to map it.
  virtual std::vector<uint8_t> createRegion(size_t bytes, const RegionHeader& header) = 0;
  // Maps a peer's region from the bytes its createRegion returned.
  virtual char* openRegion(int peer, const std::vector<uint8_t>& handle, size_t bytes) = 0;
  virtual char* localRegion() = 0;
  // The control words as the host reads them, and as the kernels address them.
  virtual HostControl* hostControl() = 0;
  virtual HostControl* kernelControl() = 0;
  // Queues the job's kernels, one per channel, behind the jobs launched before; returns at once.
  virtual void launch(const RingJob& job) = 0;
  // Whether the kernels of the job with this sequence number have all returned (does not
  // wait for them, but may call the device's driver, which can wait for the device: finish()
  // asks only once the status words have not settled by the deadline, to tell a kernel that
  // died from one that runs on).
  virtual bool finished(uint64_t sequence) = 0;
  // Where a reading of the kernels' clock (ChannelStatus's beginClock/endClock) falls on the
  // host's steady clock (steadyNs, base/deadline.h: trace::nowNs's), in ns.
  virtual int64_t hostNs(uint64_t clock) = 0;
  // Waits until every launched job's kernels have returned (after a stop, they return soon).
  virtual void join() = 0;
  // Lets go of every peer's region (no kernel of this rank reads them any more). CUDA IPC
  // needs it before the peers free theirs: an exporter's free before an importer's close is
  // undefined. Shared host memory needs nothing.
  virtual void closePeerRegions() {}
};

// Whether process `pid` of this host still runs (a zombie does not).
bool processRuns(int64_t pid);

// When the device ran a collective, on the host's steady clock (0, 0: not known).
struct DeviceSpan {
  int64_t beginNs = 0, endNs = 0;
};

class DeviceRing {
 public:
  // Collective: every rank of the ring calls it with the same `keyPrefix` (unique per ring)
  // and geometry. Throws when a peer does not show up before `deadline`.
  DeviceRing(Store& store, const std::string& keyPrefix, int rank, int size,
             std::unique_ptr<Instance> instance, const Geometry& geometry, Deadline deadline);
  ~DeviceRing();
  DeviceRing(const DeviceRing&) = delete;
  DeviceRing& operator=(const DeviceRing&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const Geometry& geometry() const { return geometry_; }

  // The collectives, in place or not, each run to its end (start + finish). `count` as in
  // RingJob: allreduce the buffer's elements, reduce-scatter the output's, all-gather the
  // input's. Reduce-scatter's input and all-gather's output hold size() * count elements.
  // Allreduce of at most geometry().oneShotBytes goes one-shot.
  void allreduce(const void* input, void* output, uint64_t count, DataType dtype, ReduceOp op,
                 Deadline deadline);
  void reduceScatter(const void* input, void* output, uint64_t count, DataType dtype, ReduceOp op,
                     Deadline deadline);
  void allgather(const void* input, void* output, uint64_t count, DataType dtype,
                 Deadline deadline);

  // How allreduce runs `count` elements of `dtype`: one-shot up to geometry().oneShotBytes,
  // else the ring.
  RingOp allreduceKind(uint64_t count, DataType dtype) const {
    return count * elementSize(dtype) <= geometry_.oneShotBytes ? RingOp::kOneShotAllreduce
                                                                : RingOp::kAllreduce;
  }

  // The two halves, for callers whose kernels are ordered on a stream: start() launches
  // (through the instance) and returns the collective's sequence number; finish() watches
  // until every channel finished, through the status words alone (no driver call), and
  // returns when the device ran it, or throws its error. Starts come from one thread, finishes
  // (in the same order) from one thread, maybe another. `what` names it in errors. start()
  // waits while kJobSlots collectives are outstanding.
  uint64_t start(RingOp op, const void* input, void* output, uint64_t count, DataType dtype,
                 ReduceOp reduceOp, const std::string& what);
  DeviceSpan finish(uint64_t sequence, Deadline deadline);

  // Leaves the ring for good, collectively: returns once every rank that still runs has
  // finished its collectives and let go of the others' regions, so that freeing this rank's
  // (the destructor, or the process's exit) pulls no memory from under a peer still reading
  // its last slots. A peer that died or does not come before `deadline` is not waited for. A
  // broken ring, or one with collectives outstanding at the deadline, does not leave in step:
  // its destructor stops the kernels. Later collectives are refused.
  void leave(Store& store, Deadline deadline);

 private:
  // Posts this rank's `phase` through the store and waits for every peer's (or its death, or
  // the deadline).
  void meetPeers(Store& store, const std::string& phase, Deadline deadline);

  [[noreturn]] void failWith(uint64_t sequence, int blamed, const std::string& detail);
  std::string describe(int blamed) const;

  const int rank_, size_;
  const std::string keyPrefix_;
  const Geometry geometry_;
  std::unique_ptr<Instance> instance_;
  std::vector<char*> regions_;
  std::vector<int64_t> pids_;
  uint64_t ringCount_[kMaxChannels] = {};
  uint64_t oneShotCount_ = 0;
  uint64_t sequence_ = 0;              // collectives started
  std::atomic<uint64_t> finished_{0};  // collectives finished (watched to their end)
  std::string what_[kJobSlots];        // what each outstanding collective is
  std::mutex mutex_;
  std::string broken_;  // the error that broke the ring; empty while healthy
};

}  // namespace ringx::device_ring
