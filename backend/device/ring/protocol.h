// The device ring's protocol: ring allreduce, reduce-scatter and all-gather, and a one-shot
// allreduce for small buffers, among the ranks of one host, each rank's kernel reading its
// neighbour's staging slots directly (layout.h) with no host round trip per step.
//
// The ring. Rank r's kernel publishes messages into its own slots; rank r+1 reads them. The
// buffer is cut into one chunk per rank (sizes differ by at most one element), each chunk into
// one slice per channel, and each slice into segments of one slot. A channel works round by
// round: round j moves segment j of every chunk's slice through all the ring's steps. In a
// round, rank r first publishes segment j of chunk (r - shift) (message u = 0); then, for each
// message v of its previous rank (chunk r - v - 1 - shift), it combines that message with its
// own input (during the first reduceSteps) or takes it as is, writes it to its output when it is
// final, and publishes it as its own message v + 1 unless it was the last. Every chunk is thus
// reduced in one order along the ring and then copied verbatim: all ranks get the same bits.
//
//   allreduce       2(n-1) steps, n-1 reducing; rank r finishes chunk r+1 and passes it on
//   reduce-scatter  n-1 steps, all reducing, shift 1: rank r's last message received is chunk r
//   all-gather      n-1 steps, none reducing: each rank's chunk goes round once
//
// Flow control. Message x of a channel sits in slot x % depth. A rank writes message x only
// after its next rank has consumed message x - depth (the next rank's `acked`), and reads
// message x of its previous rank only after that rank published it (`ready`). Publishing x
// waits on the previous rank's x - 1 and on the next rank's x + 1 - depth: with depth >= 2 both
// come earlier in the sequence, so the ring cannot deadlock, and up to depth - 1 messages
// stream ahead of the reader (the pipelining).
//
// One-shot (small buffers, one round of messages instead of 2(n-1)): every rank copies its
// input into its one-shot area, then reduces all n areas in rank order into its output. The
// area alternates between two halves; a rank reuses a half only after every rank finished
// reading it (`oneDone`).
//
// Failure. Every wait also watches the host's stop word (for the rank it waits for) and the
// awaited peer's `aborted` word.
// A channel that gives up marks its region aborted, naming the rank to blame (the dead or stuck
// peer the host found, or the one the aborted peer blamed), so the error reaches every rank of
// the ring with the same name in it.
//
// This file is compiled for the CPU instance (threads as kernels, host_ring.h) and for the CUDA
// instance (a thread block per channel, backend/device/cuda/ipc_ring.cu): the plan, the order
// and the flags are one code. An Exec supplies what differs:
//   bool leader()                     the thread that waits and publishes (GPU: thread 0)
//   int agree(int v)                  the leader's v, for every thread of the channel
//   uint64_t load(const uint64_t*)    acquire load of a word another process writes
//   void store(uint64_t*, uint64_t)   release store by the leader alone (status words)
//   void publish(uint64_t*, uint64_t) release store of a counter, by the leader once every
//                                     thread of the channel has written what it announces
//   void pause()                      back-off while spinning
//   uint64_t clock()                  the device's clock in ns (for the trace's device span)
//   void combine(d1, d2, a, b, count) x = a and b combined (or whichever is not null), written
//                                     to d1 and d2 (either may be null); a is always a slot
#pragma once

#include <cstdint>

#include "backend/device/ring/layout.h"
#include "base/types.h"

namespace ringx::device_ring {

enum class RingOp : uint8_t { kAllreduce, kReduceScatter, kAllgather, kOneShotAllreduce };

// One collective as the kernels see it: plain data, copied to the GPU as a kernel argument.
struct RingJob {
  RingOp op;
  DataType dtype;
  ReduceOp reduceOp;
  uint32_t elementSize;
  int32_t ranks;
  int32_t rank;
  Geometry geometry;
  // Allreduce: elements of the buffer. Reduce-scatter: of the output (each rank's share).
  // All-gather: of the input (each rank's share).
  uint64_t count;
  const char* input;
  char* output;              // may be `input` for allreduce
  char* regions[kMaxRanks];  // every rank's region as this process addresses it
  // Counters before this collective, the same on every rank.
  uint64_t ringBase[kMaxChannels];
  uint64_t oneShotBase;
  uint64_t sequence;     // this rank's collectives on the ring so far, this one included
  HostControl* control;  // this rank's, as the kernel addresses it
};

RINGX_HD ChannelStatus& statusOf(const RingJob& job, int ch) {
  return job.control->job[job.sequence % kJobSlots].channel[ch];
}

RINGX_HD int ringMod(int64_t a, int n) { return static_cast<int>(((a % n) + n) % n); }

struct Span {
  uint64_t begin, count;  // elements
};

// The elements that the ring cuts into chunks: allreduce's buffer, or n shares.
RINGX_HD uint64_t ringElements(const RingJob& job) {
  return job.op == RingOp::kAllreduce ? job.count : job.count * static_cast<uint64_t>(job.ranks);
}
// Chunk c of `total` elements over n ranks (sizes differ by at most one).
RINGX_HD Span chunkOf(uint64_t total, int n, int c) {
  const uint64_t base = total / n, extra = total % n, uc = static_cast<uint64_t>(c);
  return {uc * base + (uc < extra ? uc : extra), base + (uc < extra ? 1 : 0)};
}
// The part [begin, end) of `length` elements that channel `ch` of C handles.
RINGX_HD Span sliceOf(uint64_t length, int ch, int C) {
  const uint64_t b = length * ch / C, e = length * (ch + 1) / C;
  return {b, e - b};
}
RINGX_HD uint64_t segmentElements(const RingJob& job) {
  return job.geometry.slotBytes / job.elementSize;
}

struct RingShape {
  int steps, reduceSteps, shift;
};
RINGX_HD RingShape ringShape(const RingJob& job) {
  const int n = job.ranks;
  switch (job.op) {
    case RingOp::kAllreduce:
      return {2 * (n - 1), n - 1, 0};
    case RingOp::kReduceScatter:
      return {n - 1, n - 1, 1};
    default:
      return {n - 1, 0, 0};
  }
}

// Rounds channel `ch` runs: enough segments for its longest slice of a chunk.
RINGX_HD uint64_t ringRounds(const RingJob& job, int ch) {
  const uint64_t total = ringElements(job), seg = segmentElements(job);
  uint64_t longest = 0;
  for (int c = 0; c < job.ranks; ++c) {
    const uint64_t len =
        sliceOf(chunkOf(total, job.ranks, c).count, ch, job.geometry.channels).count;
    if (len > longest) longest = len;
  }
  return (longest + seg - 1) / seg;
}
// Ring messages channel `ch` publishes (and consumes) in this collective.
RINGX_HD uint64_t ringMessages(const RingJob& job, int ch) {
  return job.op == RingOp::kOneShotAllreduce ? 0 : ringRounds(job, ch) * ringShape(job).steps;
}

// Where element `e` of chunk c's data is in the input and the output: the chunked side holds
// every chunk, the other side (a reduce-scatter's output, an all-gather's input) only rank's.
RINGX_HD const char* inputAt(const RingJob& job, int c, uint64_t e) {
  const bool chunked = job.op != RingOp::kAllgather;
  const uint64_t at = (chunked ? chunkOf(ringElements(job), job.ranks, c).begin : 0) + e;
  return job.input + at * job.elementSize;
}
RINGX_HD char* outputAt(const RingJob& job, int c, uint64_t e) {
  const bool chunked = job.op != RingOp::kReduceScatter;
  const uint64_t at = (chunked ? chunkOf(ringElements(job), job.ranks, c).begin : 0) + e;
  return job.output + at * job.elementSize;
}

// Waits until *counter >= target, where `counter` is in `peer`'s region. False when the ring
// is giving up (the host said stop, or the peer aborted); then this rank's region is marked
// aborted and the channel's status names the rank to blame.
template <class Exec>
RINGX_HD bool awaitCounter(Exec& ex, const RingJob& job, int ch, int peer, const uint64_t* counter,
                           uint64_t target) {
  int ok = 1;
  if (ex.leader()) {
    ChannelStatus& status = statusOf(job, ch);
    bool noted = false;
    while (ex.load(counter) < target) {
      if (!noted) {
        ex.store(&status.waitingOn, static_cast<uint64_t>(peer));
        ex.store(&status.waitingFor, target);
        noted = true;
      }
      // The host's stop names the rank it blames: it ends waits for that rank (or, naming
      // this rank, every wait); a wait for another rank goes on until that rank aborts too.
      uint64_t blame = ex.load(&job.control->stop.value), cause = kCauseHost;
      if (blame != 0 && blame - 1 != static_cast<uint64_t>(peer) &&
          blame - 1 != static_cast<uint64_t>(job.rank)) {
        blame = 0;
      }
      if (blame == 0) {
        blame = ex.load(&header(job.regions[peer])->aborted.value);
        cause = kCausePeerAborted;
      }
      if (blame != 0) {
        ex.store(&status.failedPeer, blame - 1);
        ex.store(&status.cause, cause);
        ex.store(&header(job.regions[job.rank])->aborted.value, blame);
        ex.store(&status.state, kFailed);
        ok = 0;
        break;
      }
      ex.pause();
    }
    if (ok && noted) ex.store(&status.waitingOn, kNotWaiting);
  }
  return ex.agree(ok) != 0;
}

template <class Exec>
RINGX_HD bool runRingChannel(Exec& ex, const RingJob& job, int ch) {
  const int n = job.ranks, r = job.rank;
  const int next = ringMod(r + 1, n), prev = ringMod(r - 1, n);
  const Geometry& g = job.geometry;
  char* mine = job.regions[r];
  char* before = job.regions[prev];
  const ChannelCounters* nextCounters = counters(job.regions[next], ch);
  const ChannelCounters* prevCounters = counters(before, ch);
  ChannelCounters* own = counters(mine, ch);
  const RingShape shape = ringShape(job);
  const uint64_t total = ringElements(job), seg = segmentElements(job);
  const uint64_t rounds = ringRounds(job, ch);
  // Segment j of chunk c's slice for this channel.
  auto segment = [&](int c, uint64_t j) {
    const Span s = sliceOf(chunkOf(total, n, c).count, ch, g.channels);
    const uint64_t b = j * seg < s.count ? j * seg : s.count;
    const uint64_t e = (j + 1) * seg < s.count ? (j + 1) * seg : s.count;
    return Span{s.begin + b, e - b};
  };
  // Message x's slot is free once the next rank consumed message x - depth.
  auto slotFree = [&](uint64_t x) {
    return x < g.depth ||
           awaitCounter(ex, job, ch, next, &nextCounters->acked.value, x - g.depth + 1);
  };

  for (uint64_t j = 0; j < rounds; ++j) {
    const uint64_t first = job.ringBase[ch] + j * shape.steps;
    {
      const int c = ringMod(r - shape.shift, n);
      const Span s = segment(c, j);
      if (!slotFree(first)) return false;
      // All-gather: this rank's own share is also its output's.
      ex.combine(slot(mine, g, ch, first),
                 job.op == RingOp::kAllgather ? outputAt(job, c, s.begin) : nullptr, nullptr,
                 inputAt(job, c, s.begin), s.count);
      ex.publish(&own->ready.value, first + 1);
    }
    for (int v = 0; v < shape.steps; ++v) {
      const uint64_t x = first + v;  // the previous rank's message consumed now
      const int c = ringMod(static_cast<int64_t>(r) - v - 1 - shape.shift, n);
      const Span s = segment(c, j);
      const bool reduces = v < shape.reduceSteps;
      const bool final = v >= shape.reduceSteps - 1;
      const bool forwards = v + 1 < shape.steps;
      if (!awaitCounter(ex, job, ch, prev, &prevCounters->ready.value, x + 1)) return false;
      if (forwards && !slotFree(x + 1)) return false;
      ex.combine(forwards ? slot(mine, g, ch, x + 1) : nullptr,
                 final ? outputAt(job, c, s.begin) : nullptr, slot(before, g, ch, x),
                 reduces ? inputAt(job, c, s.begin) : nullptr, s.count);
      ex.publish(&own->acked.value, x + 1);
      if (forwards) ex.publish(&own->ready.value, x + 2);
    }
  }
  return true;
}

template <class Exec>
RINGX_HD bool runOneShotChannel(Exec& ex, const RingJob& job, int ch) {
  const int n = job.ranks, r = job.rank;
  const Geometry& g = job.geometry;
  const uint64_t k = job.oneShotBase;
  const Span s = sliceOf(job.count, ch, g.channels);
  const uint64_t offset = s.begin * job.elementSize;
  // This half was last read in one-shot k - 2: every rank must have finished it.
  if (k >= 2) {
    for (int p = 0; p < n; ++p) {
      if (p != r &&
          !awaitCounter(ex, job, ch, p, &counters(job.regions[p], ch)->oneDone.value, k - 1)) {
        return false;
      }
    }
  }
  ex.combine(oneShotArea(job.regions[r], g, k, ch), nullptr, nullptr, job.input + offset, s.count);
  ex.publish(&counters(job.regions[r], ch)->oneReady.value, k + 1);
  for (int p = 0; p < n; ++p) {
    if (p != r &&
        !awaitCounter(ex, job, ch, p, &counters(job.regions[p], ch)->oneReady.value, k + 1)) {
      return false;
    }
  }
  // In rank order, so that every rank combines the same operands in the same order.
  char* out = job.output + offset;
  ex.combine(out, nullptr, oneShotArea(job.regions[0], g, k, ch),
             n > 1 ? oneShotArea(job.regions[1], g, k, ch) : nullptr, s.count);
  for (int p = 2; p < n; ++p) {
    ex.combine(out, nullptr, oneShotArea(job.regions[p], g, k, ch), out, s.count);
  }
  ex.publish(&counters(job.regions[r], ch)->oneDone.value, k + 1);
  return true;
}

// Runs channel `ch` of the job to its end; false when the ring gave up (the channel's status
// says why).
template <class Exec>
RINGX_HD bool runChannel(Exec& ex, const RingJob& job, int ch) {
  // A ring that failed stays failed: its counters no longer agree between ranks.
  int healthy = 1;
  if (ex.leader()) {
    ex.store(&statusOf(job, ch).beginClock, ex.clock());
    const uint64_t blame = ex.load(&header(job.regions[job.rank])->aborted.value);
    if (blame != 0) {
      ex.store(&statusOf(job, ch).failedPeer, blame - 1);
      ex.store(&statusOf(job, ch).cause, kCauseBroken);
      ex.store(&statusOf(job, ch).state, kFailed);
      healthy = 0;
    }
  }
  if (!ex.agree(healthy)) return false;
  bool ok = true;
  if (job.ranks == 1) {
    // Alone, every collective is a copy (the ring's first message would wait forever for a
    // next rank to free its slots).
    const Span s = sliceOf(job.count, ch, job.geometry.channels);
    const uint64_t at = s.begin * job.elementSize;
    if (job.output != job.input) {
      ex.combine(job.output + at, nullptr, nullptr, job.input + at, s.count);
    }
  } else {
    ok = job.op == RingOp::kOneShotAllreduce ? runOneShotChannel(ex, job, ch)
                                             : runRingChannel(ex, job, ch);
  }
  if (ok && ex.leader()) {
    ex.store(&statusOf(job, ch).endClock, ex.clock());
    ex.store(&statusOf(job, ch).state, kFinished);
  }
  return ok;
}

}  // namespace ringx::device_ring
