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
// stream) then finish() (watch until they return). While watching, a peer that died, or a
// deadline that passed, makes the host ask the kernels to stop, blaming that peer; the kernels'
// aborted word spreads the blame round the ring, and finish() throws a PeerError that names the
// collective and the blamed rank. The ring is then broken: every later call throws at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
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
  // Starts the job's kernels, one per channel; returns at once.
  virtual void launch(const RingJob& job) = 0;
  // Whether the last launched job's kernels have all returned (does not block).
  virtual bool finished() = 0;
  // Waits until they have, after a stop: the kernels return soon once told to.
  virtual void join() = 0;
};

// Whether process `pid` of this host still runs (a zombie does not).
bool processRuns(int64_t pid);

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
  const char* instanceName() const { return instance_->name(); }

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

  // The two halves, for callers whose kernels are ordered on a stream: start() launches
  // (through the instance) and returns; finish() watches until the kernels returned and
  // throws the ring's error. One collective at a time. `what` names it in errors.
  void start(RingOp op, const void* input, void* output, uint64_t count, DataType dtype,
             ReduceOp reduceOp, const std::string& what);
  void finish(Deadline deadline);

  // Collectives run so far.
  uint64_t collectives() const { return sequence_; }

 private:
  [[noreturn]] void failWith(int blamed, const std::string& detail);
  std::string describe(int blamed) const;

  const int rank_, size_;
  const Geometry geometry_;
  std::unique_ptr<Instance> instance_;
  std::vector<char*> regions_;
  std::vector<int64_t> pids_;
  uint64_t ringCount_[kMaxChannels] = {};
  uint64_t oneShotCount_ = 0;
  uint64_t sequence_ = 0;
  bool running_ = false;
  std::string what_;
  std::string broken_;  // the error that broke the ring; empty while healthy
};

}  // namespace ringx::device_ring
