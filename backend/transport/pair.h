// The transport interface: one Pair per peer, driven by a Context.
//
// A Pair is a full-duplex byte stream to one peer. Algorithms never block on a
// Pair directly: they post sends and receives (which complete in the order they
// were posted, like a stream) and then ask the Context to make progress until
// what they need has arrived. Because nothing blocks on one direction, a rank can
// push a segment to its right neighbour while pulling one from its left, which is
// what the ring algorithms need.
//
// Completion is tracked with cumulative byte counters: postSend/postRecv return
// the stream offset at which that operation is complete, so "has segment j
// arrived?" is one comparison and no per-operation objects are allocated.
//
// Implementations live in folders named after the transport (tcp/ and shm/ now,
// cuda/ later) and implement progress(), pollFd(), shutdown() and transportName(),
// plus doorbell() and checkAlive() where they cannot be polled.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "backend/bootstrap/connection.h"
#include "base/types.h"

namespace ringx::transport {

struct Doorbell;

// How a receive places incoming bytes with a streaming copy, or combines them with what is there.
// The algorithms hand their kernels to each such receive (the CPU's, algorithms/
// receive_kernels.h), so that no transport includes a kernel and a device transport can be
// handed device kernels.
class ReceiveKernels {
 public:
  virtual ~ReceiveKernels() = default;
  // memcpy that leaves the destination out of the cache; dst and src do not overlap.
  virtual void copyStreaming(void* dst, const void* src, size_t bytes) const = 0;
  // out[i] = op(a[i], b[i]); `out` may be `a` or `b`.
  virtual void reduce(ReduceOp op, DataType type, void* out, const void* a, const void* b,
                      size_t count) const = 0;
  // out[i] = op(a[i], b[i]) / divisor: AVG's last combine, divided while in the cache.
  virtual void reduceDivided(ReduceOp op, DataType type, void* out, const void* a, const void* b,
                             size_t count, double divisor) const = 0;
};

class Pair : public bootstrap::Connection {
 public:
  explicit Pair(int peer) : peer_(peer) {}
  virtual ~Pair() = default;
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;

  int peer() const { return peer_; }

  // Queue `bytes` from `data` for sending. The memory must stay valid and
  // unchanged until sendCompleted() reaches the returned offset.
  uint64_t postSend(const void* data, size_t bytes);
  // Queue a receive of exactly `bytes` into `data`. With `streaming` kernels, transports
  // that copy place the bytes with their streaming copy: for data that will not be read
  // again soon.
  uint64_t postRecv(void* data, size_t bytes, const ReceiveKernels* streaming = nullptr);
  // Queue a receive of `count` elements that are combined into `data`
  // (data[i] = op(data[i], incoming[i])) instead of overwriting it. Shared
  // memory reduces straight out of the peer's ring, saving a pass over memory.
  // With `accumulate`, data[i] = op(accumulate[i], incoming[i]) and data's old
  // contents are not read (so the caller's inputs need not be copied first).
  // With `divideBy` (not 0), each combined piece is then divided by it while it is still in
  // the cache: AVG's last combine, without a second pass over the result.
  uint64_t postRecvReduce(void* data, size_t count, const ReceiveKernels& kernels, DataType dtype,
                          ReduceOp op, const void* accumulate = nullptr, double divideBy = 0);

  // Bytes sent and received so far, cumulative over the pair's life: the offsets
  // postSend/postRecv's results are compared with, and the traffic counters that
  // ringx.traffic() reports. Only the thread that drives the pair writes them;
  // any thread may read them.
  uint64_t sendCompleted() const { return sendCompleted_.load(std::memory_order_relaxed); }
  uint64_t recvCompleted() const { return recvCompleted_.load(std::memory_order_relaxed); }
  bool hasPendingSend() const { return !sends_.empty(); }
  bool hasPendingRecv() const { return !recvs_.empty(); }
  bool hasPending() const { return hasPendingSend() || hasPendingRecv(); }
  // Human-readable pending state for timeout messages ("receive 0 of 4096 bytes").
  std::string describePending() const;

  // Moves as many queued bytes as possible without blocking. Returns whether any
  // byte moved. Throws PeerError when the peer closed or broke the connection.
  virtual bool progress() = 0;
  // A file descriptor to poll() while waiting for this pair, or -1 when the
  // transport cannot be polled (shared memory: the Context then sleeps on doorbell() instead).
  virtual int pollFd() const = 0;
  // Closes the connection so that the peer notices at once (used on abort).
  void shutdown() override = 0;
  // Transports that cannot be polled (shared memory) return the doorbell that
  // their peer rings after making progress for us; the Context sleeps on it.
  virtual Doorbell* doorbell() const { return nullptr; }
  // Throws PeerError when the peer is known to be gone. Called while waiting on
  // transports whose data path cannot notice a dead peer by itself.
  virtual void checkAlive() {}
  // "tcp", "shm", ...: shown in diagnostics and tests.
  virtual const char* transportName() const = 0;

 protected:
  struct Op {
    char* data;
    size_t size;
    size_t done;
    // A reducing receive: combine with op(dtype) instead of copying.
    bool reduce = false;
    DataType dtype = DataType::kUInt8;
    ReduceOp op = ReduceOp::kSum;
    size_t elementSize = 1;
    const char* accumulate = nullptr;
    double divideBy = 0;  // a reducing receive that completes an AVG: see postRecvReduce
    // Combines (reduce) or places with a streaming copy; null: a plain copy.
    const ReceiveKernels* kernels = nullptr;
  };
  // Delivers `n` bytes from `from` into the front receive (copy or reduce);
  // for a reducing receive `n` must be whole elements.
  void deliver(const char* from, size_t n);
  // Called by implementations when `n` bytes of the front op moved.
  void advanceSend(size_t n);
  void advanceRecv(size_t n);

  std::deque<Op> sends_;
  std::deque<Op> recvs_;

 private:
  const int peer_;
  uint64_t sendPosted_ = 0;
  uint64_t recvPosted_ = 0;
  // Atomic only so that other threads may read them; one writer, so a relaxed
  // load and store (no locked add) on the data path.
  std::atomic<uint64_t> sendCompleted_{0};
  std::atomic<uint64_t> recvCompleted_{0};
};

// What the connector hands back for a channel whose maker made Pairs (every channel of a group).
inline std::unique_ptr<Pair> asPair(std::unique_ptr<bootstrap::Connection> connection) {
  return std::unique_ptr<Pair>(static_cast<Pair*>(connection.release()));
}

}  // namespace ringx::transport
