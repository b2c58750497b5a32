// One replay program for every engine: a training step as each rank's operations (compute,
// issue a collective, wait for one), run over recorded durations on every rank at once.
//
// An engine's replay (ddp_replay.h, fsdp_replay.h) writes its schedule as a Program: the same
// operations on every rank, in the engine's order, for each step to replay; the durations are
// per rank and per step (ProgramTimes), the recorded steps one after the other, so that the
// ranks' step-to-step jitter meets at the collectives as it did (medians would hide a wait for
// whichever rank was late that step). A rank runs until it waits for a collective whose end is
// not yet known; a collective runs on its lane (a process group: one at a time, in issue
// order) from when every rank has issued it and the lane's previous collective is done, for
// its `ns` (recorded or modelled by the engine's replay).
//
// Shared cores: where the job's threads outnumber the host's cores, compute and the ring's
// threads run at the share of a core that the threads runnable beside them leave
// (core_shares.h): every rank's compute, and every rank's communication thread while the ring
// runs a collective. The recorded durations hold the recording's sharing; the engine's replay
// says what each lost to it (ProgramTimes::lost, ProgramCollective::lostNs, from the
// recording's own timelines), the rest is its work, and the program runs that work at the
// shares of its own schedule, found by running it again over the previous run's schedule
// until the step settles.
//
// Where the shares cannot be had (a trace recorded without its cores, the typical step, another
// world size, whose cores' throughput one world's recording cannot show), a contention constant
// stands in: compute that runs beside a collective in flight is slower by it per ns of
// overlap; the program takes the recorded overlap's share out and adds back its own, over the
// previous run's overlaps (with a constant below 1 the runs settle). The constant is fitted from
// the recording (fitContention): within one stretch of compute across steps, the extra time per ns
// of overlap, weighed against what the cores give (cost_model.h's coresContention) by how well
// the recording pins it down; where the recording has no compute beside part of a collective,
// from the cores alone.
//
// A shared link (ProgramTimes::sharedLink: the job's hosts joined by a network): collectives on
// different lanes that run at once share the hosts' links, each of k in flight going at 1/k of
// its pace alone (two TCP flows on one link split it; on 1 Gbit/s hosts a ringx.fsdp gather
// beside a reduce-scatter took the second from 4.2 to 6.8 ns a byte). A collective's `ns` is
// then its time alone on the link (the engine takes the recording's sharing out of it,
// linkSharedNs); the program adds what its own schedule's overlaps cost, over the previous run's
// schedule until the step settles, as for the cores.
//
// Streams (a GPU job's profiler trace, profiler_program.h): an op runs on a queue, the rank's
// host thread (0) or one of its device streams (1, 2, ...), each running its ops one at a time
// in program order. A stream's op begins no earlier than the host op that launched it began
// plus the rank's launch latency, and no earlier than the ends of the ops it waits for (another
// stream's event, waited on; a host synchronisation is a host op waiting for a stream's op). A
// collective's kernel is an issue then a wait on its stream: it arrives when its stream reaches
// it and ends when the last member has arrived plus its wire time. Such programs hold a program
// per rank (the ranks' kernels differ), and a collective may have only some ranks as members.
//
// The step time is the recording's definition: per step, the slowest rank's begin to its next
// begin (after the last step, the end of its every queue), the median over the steps after the
// first (which every rank begins at 0, or where the recording began it: ProgramTimes::startNs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "analysis/replay/cost_model.h"
#include "analysis/replay/step.h"

namespace ringx::replay {

// Steps an engine's replay runs without recorded ones (the typical step, again): the first
// starts every rank at 0; by the last, a rank that is faster than the others has been held back
// by the ring as often as it would be in a long run.
constexpr size_t kTypicalSteps = 4;

struct ProgramCollective {
  PathSegment::Kind kind = PathSegment::Kind::kAllreduce;
  int64_t bytes = 0;
  size_t lane = 0;
  int64_t owner = -1;  // the DDP bucket or FSDP unit it belongs to
  size_t step = 0;
  int64_t ns = 0;  // its duration: the engine's replay sets it before running
  // With the host's cores shared (ProgramTimes::lost): what `ns` lost to sharing them where it
  // was measured; the rest is the ring threads' work, run at the shares of the replay's own
  // schedule.
  double lostNs = 0;
  bool prefetched = false;  // a gather issued ahead of need
  // The ranks (indices into ProgramTimes::ranks) that take part; empty: every rank.
  std::vector<size_t> members;
};

constexpr size_t kNoOp = static_cast<size_t>(-1);

struct ProgramOp {
  enum class Type { kCompute, kIssue, kWait, kStepBegin };
  Type type = Type::kCompute;
  PathSegment::Kind kind = PathSegment::Kind::kForward;
  size_t slot = 0;        // compute: the duration's index in ProgramTimes
  size_t collective = 0;  // issue, wait
  size_t step = 0;        // compute: whose durations
  int64_t owner = -1;     // compute: the bucket or unit it serves (a copy back), else -1
  // Streams (see above): where it runs (0: the host thread), the host op that launched it
  // (kNoOp: none) and the ops, on the rank's other queues, whose ends it waits for: its
  // program's deps[firstDep, firstDep + depCount).
  uint32_t queue = 0;
  size_t launchedBy = kNoOp;
  uint32_t firstDep = 0, depCount = 0;
};

// One rank's own ops, and the ops they wait for (ProgramOp::firstDep indexes deps).
struct RankProgram {
  std::vector<ProgramOp> ops;
  std::vector<size_t> deps;
};

class Program {
 public:
  std::vector<ProgramOp> ops;  // every rank's, unless perRank is set
  std::vector<size_t> deps;
  std::vector<ProgramCollective> collectives;
  size_t steps = 0;
  // A program per rank (in ProgramTimes::ranks' order), where the ranks ran different ops: each
  // holds `steps` step begins, on its host queue.
  std::vector<RankProgram> perRank;

  const std::vector<ProgramOp>& opsOf(size_t rank) const {
    return perRank.empty() ? ops : perRank[rank].ops;
  }
  const std::vector<size_t>& depsOf(size_t rank) const {
    return perRank.empty() ? deps : perRank[rank].deps;
  }

  void beginStep();  // the next step starts here (its index: steps - 1)
  void compute(PathSegment::Kind kind, size_t slot, int64_t owner = -1);
  size_t issue(PathSegment::Kind kind, int64_t bytes, size_t lane, int64_t owner,
               bool prefetched = false);
  void wait(size_t collective);
};

// Durations per rank, step and slot; the recorded overlap of each with the rank's collectives
// in flight (the same shape, or empty where none was recorded: no contention taken out).
struct ProgramTimes {
  std::vector<int32_t> ranks;  // the rank ids, in the order of the tables
  std::vector<std::vector<std::vector<int64_t>>> durations;  // [rank][step][slot]
  std::vector<std::vector<std::vector<int64_t>>> overlaps;   // [rank][step][slot]
  double contention = 0;  // ns of compute added per ns of overlap, in [0, 1)
  // The host's cores (core_shares.h): with `lost` (the shape of durations: each duration's ns
  // lost to sharing the cores as recorded), each compute's work is its duration less that,
  // and it runs at the shares of the replay's own schedule; `world`: the ranks the program
  // stands for (0: its own), every rank standing for world / ranks of them.
  HostCores host;
  int64_t world = 0;
  std::vector<std::vector<std::vector<double>>> lost;  // [rank][step][slot]
  // Every duration (and overlap) times this: the hosts' cores shared by more or fewer ranks
  // than recorded (cost_model.h's hostShareRatio).
  double computeScale = 1;
  // Streams: where each rank's first step began (from the earliest rank's; empty: all at 0),
  // and each rank's latency from a launch's begin to the earliest its kernel can start.
  std::vector<int64_t> startNs;
  std::vector<int64_t> launchNs;
  // The collectives' lanes share one link (see above): each collective's ns is its time alone.
  bool sharedLink = false;
};

struct ProgramRun {
  int64_t stepNs = 0;
  // The spread of the replayed steps (each recorded step replayed with its own durations):
  // the 25th and 75th percentiles of the steps' times (step.h's stepTimesNs), as stepNs is
  // their median.
  int64_t stepLowNs = 0, stepHighNs = 0;
  size_t typical = 0;  // the replayed step at the median
  int32_t slowestRank = 0;
  // The critical path of the slowest rank's typical step, in time order from its start: walked
  // back from its end, through compute on a rank and through the collectives it waited for,
  // each to whatever made it start (the lane's previous collective, or its last issuer's work
  // before the issue); a collective's rank is the one that issued it last. It tiles the step.
  std::vector<PathSegment> criticalPath;
  int64_t exposedCommNs = 0;  // the slowest rank's waits in that step
  // Per collective, from the slowest rank's start of the typical step: when the last rank
  // issued it, when it ran.
  std::vector<int64_t> issuedNs, startNs, endNs;
  int64_t originNs = 0;  // that step's begin on the slowest rank, in the program's time
};

// Throws std::logic_error if the program deadlocks (a wait before its issue: a bug), and
// std::invalid_argument if the times do not fit the program.
ProgramRun runProgram(const Program& program, const ProgramTimes& times);

// The contention constant: the slope of a stretch of compute on its overlap with collectives in
// flight, within each stretch (keyed by the caller: rank, direction, index) across steps,
// pooled: compute that ran beside more communication took longer by this much per ns of it.
// Samples covered for 90% or more of their duration are left out (their overlap follows their
// own duration). Clamped to [0, 0.95]: the replay, which stretches compute by it, settles only
// below 1. None when no stretch was partly covered in two steps or more: nothing to fit
// (cost_model.h's coresContention prices it from the cores instead).
// With the slope, its standard error (infinite when the samples leave no residual freedom).
using ContentionSamples =
    std::map<std::tuple<size_t, int, size_t>, std::vector<std::pair<int64_t, int64_t>>>;
struct ContentionFit {
  double value = 0;
  double standardError = 0;
};
std::optional<ContentionFit> fitContention(const ContentionSamples& samples);
// How far a job's contention may lie from what its cores give (coresContention), as a standard
// deviation: the weight the cores' value keeps beside a fit.
constexpr double kCoresContentionSpread = 0.25;
// The contention a model replays with, and whether the recording fitted it: the samples' fit
// and the cores' value (coresContention for `worldSize` ranks on `host`) weighted by their
// inverse variances; the cores' alone when nothing could be fitted.
std::pair<double, bool> modelContention(const ContentionSamples& samples, const HostCores& host,
                                        int64_t worldSize);

// A larger world than the recorded ranks (another world size): the replay runs every rank of
// it, an added rank r taking recorded rank r % recorded's durations, its steps after the first
// turned by r / recorded, so that each has its own step-to-step jitter and a collective waits
// for the latest of the world's ranks, as at that size (FSDP2 on 4 hosts of its own cores:
// a blocking collective's median arrival skew was 2.9 ms, at 2 hosts 0.3 ms). Up to
// kMostReplayedRanks; beyond, the ranks replayed stand for the rest.
constexpr size_t kMostReplayedRanks = 64;
size_t replayedRanks(size_t recorded, int64_t worldSize);
struct RecordedSource {
  size_t rank = 0, step = 0;
};
// Where replayed rank `rank`'s step `step` of `steps` takes its durations from.
RecordedSource recordedSourceOf(size_t rank, size_t step, size_t recorded, size_t steps);

// A collective as a link carried it: its lane and when it ran there.
struct LaneSpan {
  size_t lane = 0;
  int64_t begin = 0, end = 0;
};
// The shared link's rule (see above), for recordings and replays alike: per span, the ns of it
// lost to the other lanes' collectives in flight beside it: over each stretch where k lanes run
// one, (k - 1) / k of the stretch (it went at 1/k of its pace). Spans of one lane never share.
std::vector<double> linkSharedNs(const std::vector<LaneSpan>& spans);

// Intervals as (begin, end): sorted and merged into disjoint ones; the time of [begin, end)
// they cover.
std::vector<std::pair<int64_t, int64_t>> mergeIntervals(
    std::vector<std::pair<int64_t, int64_t>> intervals);
int64_t coveredNs(const std::vector<std::pair<int64_t, int64_t>>& merged, int64_t begin,
                  int64_t end);

}  // namespace ringx::replay
