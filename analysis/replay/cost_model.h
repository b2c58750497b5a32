// How long a collective takes, as the ring algorithm spends it: a fixed cost per ring step (the
// latency of one hop and the per-message work around it) plus the bytes each rank sends over its
// link, at that link's rate. This is the alpha-beta model that NCCL's tuner and the replay
// simulators (dPRO, Lumos) use; its two constants are fitted from the collectives a trace
// recorded, so a what-if on the same wire needs no benchmark.
//
// Ring steps and bytes sent per rank follow the algorithm: allreduce = reduce-scatter +
// all-gather, 2(n-1) steps sending 2(n-1)/n of the buffer; all_gather and reduce_scatter n-1
// steps and (n-1)/n; anything else (broadcast's pipeline) n-1 steps and the whole buffer. The
// byte share is analysis/figures.h's bus bandwidth factor, the one definition of it.
//
// No torch and no trace model here: the DDP engine links this (bucket_cap_mb="auto").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ringx::replay {

// A wire: per ring step, and per byte one rank sends on it. Both >= 0.
struct LinkCost {
  double stepNs = 0;
  double nsPerByte = 0;
  // "12.0 us/step, 3.10 GB/s"
  std::string describe() const;
};

// What a collective does on a ring of `ranks`.
struct RingShape {
  int64_t steps = 0;
  double bytesSent = 0;  // by each rank
};
RingShape ringShape(std::string_view op, int64_t bytes, int64_t ranks);

// The modelled duration of `op` moving `bytes` (as nccl-tests counts them) on `ranks` ranks; 0
// for one rank or fewer.
int64_t collectiveNs(const LinkCost& link, std::string_view op, int64_t bytes, int64_t ranks);

// One collective that was recorded: its duration, ideally without waiting for a late peer
// (the fit's caller takes the last arrival's time).
struct CostSample {
  std::string op;
  int64_t bytes = 0;
  int64_t ranks = 0;
  int64_t durationNs = 0;
};

// The LinkCost that best predicts the samples, in relative error (a 64 KiB collective counts as
// much as a 64 MiB one): weighted least squares of duration on (steps, bytesSent), with both
// constants kept >= 0. Samples of one shape only cannot separate the two: the step cost is then
// 0 and every nanosecond is put on the bytes. `ok` is false when no sample has a duration.
struct LinkFit {
  LinkCost link;
  bool ok = false;
  bool separated = false;  // two or more shapes: both constants were fitted
  size_t samples = 0;
  double medianErrorShare = 0;  // the fit's median |predicted - recorded| / recorded
};
LinkFit fitLinkCost(const std::vector<CostSample>& samples);

// The cores of the job's hosts, which their ranks share (recorded as each rank starts tracing:
// the "host" instant, ringx.trace.start). A first cut of the host as a shared resource:
// data-parallel ranks compute and communicate in lockstep, so each rank's threads get
// cores / (ranks on the host x threads per rank) of a core when that is below one, and a world
// of another size changes that share for compute and collectives alike where it puts more or
// fewer ranks on a host (hostsAt).
struct HostCores {
  double cores = 0;            // per host, a CPU quota's fraction included; 0: not recorded
                               // (nothing is scaled)
  int64_t threadsPerRank = 1;  // torch's compute threads per rank
  int64_t hosts = 1;
};
// The hosts a world of `worldSize` runs on, from a recording of `recordedWorld` ranks on
// `host.hosts` of them: a job on one host stays there (its ranks share it); a job across hosts
// grows or shrinks by hosts like the recorded ones, each with as many ranks (a cluster grows
// by machines, not by crowding them).
HostCores hostsAt(const HostCores& host, int64_t recordedWorld, int64_t worldSize);
// How many times slower a rank's work runs at `worldSize` (on hostsAt's hosts) than at
// `recordedWorld`; 1 when the cores are unknown.
double hostShareRatio(const HostCores& host, int64_t recordedWorld, int64_t worldSize);
// Compute's slowdown beside a collective in flight on its rank, from the cores alone: the
// contention constant (program.h) where the recording cannot fit it (no compute ran beside part
// of a collective: one bucket, launched as backward ends). While its collective runs, a rank's
// communication thread is runnable beside its compute threads, so a compute thread's share of a
// core falls from cores / (ranks on the host x threads) to cores / (ranks on the host x
// (threads + 1)), each capped at one core; compute beside the collective gets after / before
// of its speed, 1 - after / before ns more per ns of overlap. 0 where the cores are unknown or
// enough for every thread.
double coresContention(const HostCores& host, int64_t worldSize);

// The cost of one op from a calibration (ringx.trace.calibrate: the op timed alone at a ladder
// of sizes), both constants measured where a trace's few bucket or unit sizes leave the
// per-collective cost to noise: the per-step cost from the ladder's smallest size (where the
// latency is most of it), the per-byte cost from the step from its smallest to its largest
// (where the bytes are), as alpha-beta models are measured. Not a least-squares fit of the
// whole ladder in relative error: its middle sizes, which a token bucket's burst or a
// protocol's switch sends faster than either end, had pulled the per-byte cost to a fifth of
// the link's on hosts joined by 1 Gbit/s (an all-gather of 256 KB in 78 us: the bucket's
// 500 KB went at the veth's speed). `ok` only when the ladder has two sizes or more of `op`.
LinkFit calibratedLink(const std::vector<CostSample>& calibration, std::string_view op);

}  // namespace ringx::replay
