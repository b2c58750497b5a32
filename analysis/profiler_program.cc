// A profiler trace as a replay program (see profiler_program.h for the rules and why).
#include "analysis/profiler_program.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

#include "analysis/store_reading.h"
#include "base/text.h"
#include "trace/format/schema.h"
#include "trace/model/chrome_ingest.h"

namespace ringx::analysis {
using namespace store_reading;

namespace {

using replay::kNoOp;
using replay::ProgramOp;
using Kind = replay::PathSegment::Kind;

// A GPU's stream (not its counters).
bool isStreamTrack(std::string_view name) {
  return model::isDeviceTrack(name) && name.find("stream") != std::string_view::npos;
}

enum class Call { kOther, kLaunch, kStreamWait, kSync, kDeviceSync };

// What a runtime call does to the program; a launch is known by its correlation to a device op
// whatever its name (cudaLaunchKernel, cudaLaunchKernelExC, cuLaunchKernel, cudaMemcpyAsync,
// cudaMemsetAsync, hipLaunchKernel, ...).
Call callOf(std::string_view name) {
  if (name == "cudaStreamWaitEvent" || name == "hipStreamWaitEvent") return Call::kStreamWait;
  if (name == "cudaStreamSynchronize" || name == "cudaEventSynchronize" ||
      name == "hipStreamSynchronize" || name == "hipEventSynchronize") {
    return Call::kSync;
  }
  if (name == "cudaDeviceSynchronize" || name == "hipDeviceSynchronize") return Call::kDeviceSync;
  return Call::kOther;
}

Kind collectiveKind(std::string_view op) {
  if (op == "allreduce") return Kind::kAllreduce;
  if (op == "allgather") return Kind::kAllGather;
  if (op == "reduce_scatter") return Kind::kReduceScatter;
  return Kind::kCollective;
}

struct DeviceOp {
  const Span* span = nullptr;
  uint32_t queue = 0;
  bool collective = false;
  int64_t correlation = -1;
};

struct HostEvent {
  int64_t begin = 0, end = 0;
  Call call = Call::kOther;
  const DeviceOp* op = nullptr;  // a launch's
  bool blockingCopy = false;
};

// A copy the call waited for: cudaMemcpy (not Async) returns when its copy has, and so does
// cudaMemcpyAsync to or from pageable host memory (item(), .cpu(), .to("cuda") of a plain
// tensor), which the trace shows by the call returning after its copy ended: a launch and a
// synchronisation on it.
bool isBlockingCopy(std::string_view name, const HostEvent& call, const Span& copy) {
  if (name == "cudaMemcpy" || name == "hipMemcpy") return true;
  const bool copies = name.find("Memcpy") != std::string_view::npos;
  return copies && copy.begin >= call.begin && call.end >= copy.end;
}

// One rank as read from the store, before its program is built.
struct RankRead {
  const RankData* data = nullptr;
  std::unordered_map<int64_t, DeviceOp> byCorrelation;
  std::vector<HostEvent> host;                           // sorted by begin
  std::map<int64_t, std::pair<int64_t, int64_t>> steps;  // N -> (begin, end)
  uint32_t queues = 0;
  bool anyStreamWait = false;
};

// The (group, seq) a collective span is matched by across ranks.
using CollectiveKey = std::pair<std::string, int64_t>;

}  // namespace

bool holdsProfilerTrace(const model::TraceStore& store) {
  bool profiler = false;
  for (const RankData& r : store.ranks()) {
    if (r.clockKnown) return false;  // a ringx rank stream
    for (const Track& t : r.tracks) profiler = profiler || isStreamTrack(store.str(t.name));
  }
  const int runtime = store.findCategory("cuda_runtime");
  return profiler || runtime >= 0;
}

ProfilerProgram profilerProgramOf(const model::TraceStore& store) {
  const int kernelCat = store.findCategory("kernel"), copyCat = store.findCategory("gpu_memcpy"),
            fillCat = store.findCategory("gpu_memset"),
            collectiveCat = store.findCategory(trace::categoryName(trace::Category::kCollective)),
            runtimeCat = store.findCategory("cuda_runtime"),
            driverCat = store.findCategory("cuda_driver");
  const StringPool& pool = store.strings();
  const uint32_t correlationKey = pool.find("correlation"), opKey = pool.find(targ::kOp),
                 seqKey = pool.find(targ::kSeq), groupKey = pool.find(targ::kGroup),
                 bytesKey = pool.find(targ::kBytes), sizeKey = pool.find(targ::kGroupSize);
  auto isDeviceOp = [&](int c) {
    return c >= 0 && (c == kernelCat || c == copyCat || c == fillCat || c == collectiveCat);
  };

  // ---- read each rank ----
  std::vector<RankRead> ranks;
  for (const RankData& data : store.ranks()) {
    RankRead rr;
    rr.data = &data;
    for (const Track& t : data.tracks) {
      if (!isStreamTrack(store.str(t.name))) continue;
      const uint32_t queue = ++rr.queues;
      forAllSpans(t, [&](uint32_t, uint32_t, const Span& s) {
        if (!isDeviceOp(s.category)) return;
        const int64_t c = ArgRange(data, s).integer(correlationKey, -1);
        if (c >= 0) rr.byCorrelation[c] = {&s, queue, s.category == collectiveCat, c};
      });
    }
    if (rr.byCorrelation.empty()) continue;
    for (const Track& t : data.tracks) {
      if (isStreamTrack(store.str(t.name))) continue;
      forAllSpans(t, [&](uint32_t, uint32_t, const Span& s) {
        const std::string_view name = store.str(s.name);
        if (const std::optional<int64_t> n = model::profilerStepNumber(name)) {
          rr.steps.try_emplace(*n, s.begin, s.end);
          return;
        }
        if (s.category != runtimeCat && s.category != driverCat) return;
        HostEvent e{s.begin, s.end, callOf(name), nullptr, false};
        const int64_t c = ArgRange(data, s).integer(correlationKey, -1);
        if (auto op = rr.byCorrelation.find(c); c >= 0 && op != rr.byCorrelation.end()) {
          e.call = Call::kLaunch;
          e.op = &op->second;
          e.blockingCopy = isBlockingCopy(name, e, *op->second.span);
        }
        rr.anyStreamWait = rr.anyStreamWait || e.call == Call::kStreamWait;
        if (e.call != Call::kOther || e.end > e.begin) rr.host.push_back(e);
      });
    }
    std::stable_sort(rr.host.begin(), rr.host.end(),
                     [](const HostEvent& a, const HostEvent& b) { return a.begin < b.begin; });
    if (!rr.host.empty()) ranks.push_back(std::move(rr));
  }
  if (ranks.empty()) {
    throw std::runtime_error(
        "no rank of this trace launched a device kernel that the trace holds the launch of: a "
        "torch.profiler trace of a GPU job (CUDA activities on) is needed; a CPU job's profiler "
        "trace cannot be replayed yet");
  }

  // ---- the steps every rank recorded ----
  ProfilerProgram out;
  std::vector<int64_t> numbers;
  bool anySteps = false;
  for (const RankRead& rr : ranks) anySteps = anySteps || !rr.steps.empty();
  if (anySteps) {
    numbers = stepsEveryRankHas(ranks);
    if (numbers.empty()) {
      throw std::runtime_error(
          "the ranks' profiler traces share no ProfilerStep#N: give files of the same steps "
          "(one profiler schedule on every rank)");
    }
  }
  out.stepNumbers = numbers;
  const size_t steps = anySteps ? numbers.size() : 1;
  auto window = [&](const RankRead& rr, size_t k) -> std::pair<int64_t, int64_t> {
    if (anySteps) return rr.steps.at(numbers[k]);
    return {rr.host.front().begin, rr.host.back().end};
  };

  // ---- the collectives, matched across ranks by (group, seq) ----
  std::map<CollectiveKey, std::vector<std::pair<size_t, const Span*>>> matched;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankRead& rr = ranks[r];
    const int64_t from = window(rr, 0).first, to = window(rr, steps - 1).second;
    for (const HostEvent& e : rr.host) {
      if (e.call != Call::kLaunch || !e.op->collective || e.begin < from || e.begin > to) continue;
      const ArgRange args(*rr.data, *e.op->span);
      const uint32_t group = args.string(groupKey);
      const int64_t seq = args.integer(seqKey, -1);
      if (seq < 0) continue;  // unmatched: a kernel like any other
      matched[{std::string(store.str(group)), seq}].push_back({r, e.op->span});
    }
  }
  int64_t firstBegin = window(ranks.front(), 0).first;
  for (const RankRead& rr : ranks) firstBegin = std::min(firstBegin, window(rr, 0).first);
  std::map<CollectiveKey, size_t> indexOf;
  std::map<std::string, size_t> laneOf;
  for (const auto& [key, parts] : matched) {
    const size_t c = out.program.collectives.size();
    indexOf[key] = c;
    replay::ProgramCollective pc;
    const auto [lane, added] = laneOf.try_emplace(key.first, laneOf.size());
    pc.lane = lane->second;
    // Its wire time: the last arriver's own duration (it waited for nobody).
    const Span* last = parts.front().second;
    for (const auto& [r, s] : parts) {
      pc.members.push_back(r);
      if (s->begin > last->begin) last = s;
    }
    std::sort(pc.members.begin(), pc.members.end());
    pc.members.erase(std::unique(pc.members.begin(), pc.members.end()), pc.members.end());
    pc.ns = last->duration();
    out.recordedStartNs.push_back(last->begin - firstBegin);
    const RankData& owner = *ranks[parts.front().first].data;
    const ArgRange args(owner, *parts.front().second);
    const std::string op(store.str(args.string(opKey)));
    pc.kind = collectiveKind(op);
    pc.bytes = std::max<int64_t>(0, args.integer(bytesKey, 0));
    out.collectiveOps.push_back(op);
    out.collectiveBytes.push_back(args.integer(bytesKey, -1));
    out.collectiveGroupSize.push_back(
        args.integer(sizeKey, static_cast<int64_t>(pc.members.size())));
    out.program.collectives.push_back(pc);
  }
  out.collectives = out.program.collectives.size();
  if (out.collectives == 0) out.notes.push_back("no collective matched across ranks");

  // ---- each rank's program ----
  replay::ProgramTimes& times = out.times;
  out.recordedStepsNs.assign(steps, 0);
  std::vector<std::vector<int64_t>> rankPeriods;  // [rank][step]
  replay::ContentionSamples samples;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankRead& rr = ranks[r];
    replay::RankProgram prog;
    std::unordered_map<int64_t, size_t>& opOf = out.opOf.emplace_back();
    std::vector<std::vector<int64_t>> durations(steps), overlaps(steps);
    times.ranks.push_back(rr.data->rank);
    times.startNs.push_back(window(rr, 0).first - firstBegin);
    // The rank's collectives as recorded: what its kernels ran beside.
    std::vector<std::pair<int64_t, int64_t>> commSpans;
    for (const auto& [c, op] : rr.byCorrelation) {
      if (op.collective) commSpans.emplace_back(op.span->begin, op.span->end);
    }
    const auto comm = replay::mergeIntervals(std::move(commSpans));

    size_t step = 0;
    auto add = [&](ProgramOp op, int64_t ns, const std::vector<size_t>& deps, int64_t overlap) {
      op.step = step;
      if (op.type == ProgramOp::Type::kCompute) {
        op.slot = durations[step].size();
        durations[step].push_back(std::max<int64_t>(0, ns));
        overlaps[step].push_back(overlap);
      }
      op.firstDep = static_cast<uint32_t>(prog.deps.size());
      op.depCount = static_cast<uint32_t>(deps.size());
      prog.deps.insert(prog.deps.end(), deps.begin(), deps.end());
      prog.ops.push_back(op);
      return prog.ops.size() - 1;
    };
    auto host = [&](int64_t ns, const std::vector<size_t>& deps = {}) {
      ProgramOp op;
      op.kind = Kind::kHost;
      return add(op, ns, deps, 0);
    };
    int64_t pending = 0;  // host work not yet an op
    auto flush = [&]() {
      if (pending > 0) host(pending);
      pending = 0;
    };
    auto stepBegin = [&]() {
      ProgramOp op;
      op.type = ProgramOp::Type::kStepBegin;
      add(op, 0, {}, 0);
    };

    const int64_t from = window(rr, 0).first, to = window(rr, steps - 1).second;
    std::vector<size_t> lastOn(rr.queues + 1, kNoOp);  // per queue: its last op
    std::vector<int64_t> lastEnd(rr.queues + 1, -1);   // and that op's recorded end
    std::deque<size_t> unwaited;                       // collectives' wait ops, in order
    std::vector<size_t> waitFor;                       // the next compute launch's waits
    uint32_t current = 0;                              // the current stream
    int64_t latency = -1;
    int64_t deviceEnd = 0;  // of the ops launched in the steps
    stepBegin();
    // Work launched before the first step and still running when it began: each stream's
    // backlog, as an op at its head. That is every op the trace holds no later launch of: one
    // launched before the first step, or before the profiler began (a device running behind the
    // host, or a collective of the step before), which the stream runs ahead of anything the
    // steps launch.
    std::vector<int64_t> backlog(rr.queues + 1, from);
    std::unordered_map<int64_t, bool> launchedInSteps;
    for (const HostEvent& e : rr.host) {
      if (e.call == Call::kLaunch && e.begin >= from) launchedInSteps[e.op->correlation] = true;
    }
    for (const auto& [c, op] : rr.byCorrelation) {
      if (launchedInSteps.count(c) == 0 && op.span->end > from) {
        backlog[op.queue] = std::max(backlog[op.queue], op.span->end);
      }
    }
    for (uint32_t q = 1; q <= rr.queues; ++q) {
      if (backlog[q] <= from) continue;
      ProgramOp op;
      op.kind = Kind::kKernel;
      op.queue = q;
      lastOn[q] = add(op, backlog[q] - from, {}, 0);
      lastEnd[q] = backlog[q];
    }

    int64_t cursor = from;  // the host's time accounted for
    // The host's work up to the next step's begin, then that step.
    auto nextStep = [&]() {
      const int64_t next = window(rr, step + 1).first;
      pending += std::max<int64_t>(0, next - cursor);
      cursor = std::max(cursor, next);
      flush();
      ++step;
      stepBegin();
    };
    for (size_t i = 0; i < rr.host.size(); ++i) {
      const HostEvent& e = rr.host[i];
      if (e.begin < from) continue;
      if (e.begin > to) break;
      // The next steps' begins that lie before it.
      while (step + 1 < steps && e.begin >= window(rr, step + 1).first) nextStep();
      pending += std::max<int64_t>(0, e.begin - cursor);
      const int64_t own = std::max<int64_t>(0, e.end - std::max(e.begin, cursor));
      cursor = std::max(cursor, e.end);
      if (e.call == Call::kOther) {
        pending += own;
        continue;
      }
      if (e.call == Call::kStreamWait) {
        pending += own;
        // Whether the next launch is a collective's (then this wait is its own, before it).
        bool beforeCollective = false;
        for (size_t j = i + 1; j < rr.host.size(); ++j) {
          if (rr.host[j].call != Call::kLaunch) continue;
          beforeCollective = rr.host[j].op->collective;
          break;
        }
        if (!beforeCollective && !unwaited.empty()) {
          waitFor.push_back(unwaited.front());
          unwaited.pop_front();
          ++out.streamWaits;
        }
        continue;
      }
      flush();
      if (e.call == Call::kSync || e.call == Call::kDeviceSync) {
        // The device op it waited for: every stream's last (the device), or the stream's whose
        // last op ended last before the call returned.
        std::vector<size_t> deps;
        int64_t awaited = -1;
        size_t best = 0;
        for (uint32_t q = 1; q <= rr.queues; ++q) {
          if (lastOn[q] == kNoOp) continue;
          if (e.call == Call::kDeviceSync) {
            deps.push_back(lastOn[q]);
            awaited = std::max(awaited, lastEnd[q]);
          } else if (lastEnd[q] <= e.end + 2000 && lastEnd[q] > awaited) {
            awaited = lastEnd[q];
            best = q;
          }
        }
        if (e.call == Call::kSync && best > 0) deps.push_back(lastOn[best]);
        // What the call spent after the op's end is its own.
        host(std::min(own, std::max<int64_t>(0, e.end - std::max(e.begin, awaited))), deps);
        ++out.hostSyncs;
        continue;
      }
      // A launch: its call, then its op on the stream.
      const DeviceOp& d = *e.op;
      const int64_t call =
          e.blockingCopy ? std::min(own, std::max<int64_t>(0, d.span->begin - e.begin)) : own;
      const size_t launch = host(call);
      const int64_t gap = d.span->begin - e.begin;
      if (gap >= 0 && (latency < 0 || gap < latency)) latency = gap;
      deviceEnd = std::max(deviceEnd, d.span->end);
      ++out.kernels;
      ProgramOp op;
      op.queue = d.queue;
      op.launchedBy = launch;
      size_t done = kNoOp;
      auto collective = indexOf.end();
      if (d.collective) {
        const ArgRange args(*rr.data, *d.span);
        collective =
            indexOf.find({std::string(store.str(args.string(groupKey))), args.integer(seqKey, -1)});
      }
      if (collective != indexOf.end()) {
        // It follows the current stream's last op (c10d's event on it, waited by NCCL's).
        std::vector<size_t> deps;
        if (current != 0 && current != d.queue && lastOn[current] != kNoOp) {
          deps.push_back(lastOn[current]);
        }
        op.type = ProgramOp::Type::kIssue;
        op.collective = collective->second;
        op.kind = out.program.collectives[collective->second].kind;
        opOf[d.correlation] = add(op, 0, deps, 0);
        op.type = ProgramOp::Type::kWait;
        op.launchedBy = kNoOp;
        done = add(op, 0, {}, 0);
        unwaited.push_back(done);
      } else {
        if (!rr.anyStreamWait) {
          // No stream waits recorded: the synchronous rule.
          waitFor.insert(waitFor.end(), unwaited.begin(), unwaited.end());
          out.streamWaits += unwaited.size();
          unwaited.clear();
        }
        op.kind = Kind::kKernel;
        const int64_t overlap = replay::coveredNs(comm, d.span->begin, d.span->end);
        done = add(op, d.span->duration(), waitFor, d.collective ? 0 : overlap);
        opOf[d.correlation] = done;
        waitFor.clear();
        if (!d.collective) {
          current = d.queue;
          samples[{r, 0, static_cast<size_t>(d.span->name)}].emplace_back(d.span->duration(),
                                                                          overlap);
        }
      }
      lastOn[d.queue] = done;
      lastEnd[d.queue] = d.span->end;
      if (e.blockingCopy) {
        host(std::min(own - call, std::max<int64_t>(0, e.end - d.span->end)), {done});
        ++out.hostSyncs;
      }
    }
    // Steps the host recorded no call in, and the last step's tail.
    while (step + 1 < steps) nextStep();
    pending += std::max<int64_t>(0, to - cursor);
    flush();
    times.launchNs.push_back(std::max<int64_t>(0, latency));
    times.durations.push_back(std::move(durations));
    times.overlaps.push_back(std::move(overlaps));
    out.program.perRank.push_back(std::move(prog));
    // The recorded periods: a step's begin to the next's; the last, to its end or its device
    // work's, whichever is later.
    std::vector<int64_t>& periods = rankPeriods.emplace_back();
    for (size_t k = 0; k < steps; ++k) {
      const int64_t begin = window(rr, k).first;
      const int64_t end = k + 1 < steps ? window(rr, k + 1).first : std::max(to, deviceEnd);
      periods.push_back(end - begin);
    }
  }
  out.recordedStepsNs = replay::stepTimesNs(rankPeriods);
  out.syncRule = !ranks.front().anyStreamWait;
  out.program.steps = steps;
  std::vector<int64_t> counted(out.recordedStepsNs.begin() + (steps > 1 ? 1 : 0),
                               out.recordedStepsNs.end());
  out.recordedStepNs = replay::medianNs(counted);
  // The slowdown beside collectives, where the trace shows one clearly (twice its standard
  // error): kernels of one name vary with their shapes too, which a fit must not take for it.
  if (const auto fit = replay::fitContention(samples);
      fit && std::isfinite(fit->standardError) && fit->value > 2 * fit->standardError) {
    times.contention = fit->value;
  }
  size_t launched = 0;
  for (const RankRead& rr : ranks) launched += rr.byCorrelation.size();
  out.leftOut = launched - out.kernels;
  return out;
}

}  // namespace ringx::analysis
