// The device ring's shared memory: what each rank's region holds and where, the one contract
// that the CPU instance (host memory shared between processes) and the CUDA instance (device
// memory shared through CUDA IPC handles) both lay out and both kernels read.
//
// A region belongs to one rank and only its owner writes it; peers only read it. It holds,
// per channel (an independent ring over its own slice of the buffer: a thread on the CPU, a
// thread block on the GPU), four counters, each on a cache line of its own so that a reader
// polling one does not disturb the owner's writes to another:
//   ready     ring messages this rank has published into its slots
//   acked     ring messages of the previous rank that this rank has consumed
//   oneReady  one-shot allreduces whose input this rank has published
//   oneDone   one-shot allreduces this rank has finished reading everyone's input for
// then the ring slots (channels x depth x slotBytes) and the one-shot area (two halves, used
// alternately, each holding a whole small buffer in one part per channel). Counters only grow,
// across collectives: every rank runs the same collectives, so every rank agrees on every counter's
// next value and nothing is ever reset. A header says which rank aborted and why, so that an error
// spreads round the ring naming the peer that caused it.
//
// Also here: HostControl, the few words the host and this rank's kernel share (pinned and
// mapped on the GPU): the host asks the kernel to give up, the kernel says what it waits for.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define RINGX_HD __host__ __device__ __forceinline__
#else
#define RINGX_HD inline
#endif

namespace ringx::device_ring {

constexpr int kMaxRanks = 16;     // one host's ranks
constexpr int kMaxChannels = 32;  // thread blocks of one GPU kernel; threads on the CPU
constexpr uint64_t kRegionMagic = 0x72696e67782d6472ull;  // "ringx-dr"
constexpr uint32_t kLayoutVersion = 1;
constexpr size_t kLine = 128;  // counters sit apart by this much (two x86 lines, a GPU sector)

// Sizes every rank's region uses; all ranks of a ring must agree (checked at set-up).
struct Geometry {
  uint32_t channels = 2;
  uint32_t depth = 4;                // ring slots per channel (>= 2: see protocol.h)
  uint64_t slotBytes = 256 << 10;    // one ring message (a segment), multiple of 16
  uint64_t oneShotBytes = 64 << 10;  // largest one-shot allreduce, multiple of 16
};

struct alignas(kLine) Counter {
  uint64_t value;
  char pad[kLine - sizeof(uint64_t)];
};

struct ChannelCounters {
  Counter ready, acked, oneReady, oneDone;
};

struct alignas(kLine) RegionHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t rank;
  Geometry geometry;
  // Set once by the owner when it gives up: 1 + the rank whose failure stopped it (itself
  // when the host asked it to stop for a reason of its own, as a deadline), 0 while healthy.
  Counter aborted;
};

// Where things are in a region.
RINGX_HD size_t countersOffset() { return sizeof(RegionHeader); }
RINGX_HD size_t slotsOffset(const Geometry& g) {
  return countersOffset() + sizeof(ChannelCounters) * g.channels;
}
RINGX_HD size_t oneShotOffset(const Geometry& g) {
  return slotsOffset(g) + static_cast<size_t>(g.channels) * g.depth * g.slotBytes;
}
// One channel's part of a one-shot half: its share of oneShotBytes, plus room for the one
// element by which an uneven split may exceed it, on 16-byte boundaries. Each channel keeps to
// its own part, since its flags order only its own reads and writes.
RINGX_HD size_t oneShotChannelBytes(const Geometry& g) {
  return (g.oneShotBytes / g.channels + 16 + 15) / 16 * 16;
}
RINGX_HD size_t regionBytes(const Geometry& g) {
  return oneShotOffset(g) + 2 * g.channels * oneShotChannelBytes(g);
}

RINGX_HD RegionHeader* header(char* region) { return reinterpret_cast<RegionHeader*>(region); }
RINGX_HD ChannelCounters* counters(char* region, int channel) {
  return reinterpret_cast<ChannelCounters*>(region + countersOffset()) + channel;
}
// The slot that ring message `message` of `channel` lives in.
RINGX_HD char* slot(char* region, const Geometry& g, int channel, uint64_t message) {
  return region + slotsOffset(g) +
         (static_cast<size_t>(channel) * g.depth + message % g.depth) * g.slotBytes;
}
// Channel `channel`'s part of the one-shot half that one-shot allreduce `index` uses.
RINGX_HD char* oneShotArea(char* region, const Geometry& g, uint64_t index, int channel) {
  return region + oneShotOffset(g) +
         ((index % 2) * g.channels + static_cast<size_t>(channel)) * oneShotChannelBytes(g);
}

// What the host and this rank's kernel share. Each collective of the ring has a status per
// channel in one of kJobSlots slots (its sequence number modulo kJobSlots), so that a kernel
// queued behind another on a stream writes its own: the host lets at most kJobSlots
// collectives be outstanding. `state`: running, finished or failed (the host watches a
// collective to its end by this word alone: asking the device's driver could wait for the
// device, device_stream.h); `beginClock`/`endClock`: when the channel started and finished on
// the device's clock (Exec::clock; Instance::hostNs maps it); `waitingOn`/`waitingFor`:
// the rank and counter value a channel waits for now (kNotWaiting between waits; a failed
// channel keeps the wait it gave up on): the host blames a dead or stuck peer only when a
// channel waits for it, so a peer that left after doing its part stops no one.
// Every field is a 64-bit word, written and read with the counters' atomic accessors.
constexpr int kJobSlots = 16;

struct alignas(64) ChannelStatus {
  uint64_t state;
  uint64_t waitingOn;
  uint64_t waitingFor;
  uint64_t failedPeer;  // the rank named in the error: the one that died, stalled or aborted
  uint64_t cause;
  uint64_t beginClock;
  uint64_t endClock;
};
enum : uint64_t { kRunning = 0, kFinished = 1, kFailed = 2 };
// waitingOn while the channel is not waiting for anyone.
constexpr uint64_t kNotWaiting = ~uint64_t{0};
enum : uint64_t {
  kCauseHost = 1,         // the host asked the kernels to stop (a dead peer, a deadline)
  kCausePeerAborted = 2,  // the awaited peer had given up
  kCauseBroken = 3,       // this rank's ring had failed before the collective began
};

struct JobStatus {
  ChannelStatus channel[kMaxChannels];
};

struct HostControl {
  Counter stop;  // 1 + the rank the host blames, when it wants the kernels to give up
  JobStatus job[kJobSlots];
};

}  // namespace ringx::device_ring
