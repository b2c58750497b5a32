#include "fsdp/timing.h"

#include <mutex>
#include <unordered_map>

#include "trace/format/schema.h"
#include "trace/record/recorder.h"

namespace ringx::fsdp {
namespace {

using trace::Category;
using trace::intArg;
using trace::Recorder;

// Interned once: the ids are process-wide and survive stop()/start().
struct Names {
  uint32_t fsdpTrack, memoryTrack, allGather, step, bytes, phase, forward, backward, prefetched,
      issue, wireStart, wireEnd, exposed, launch, sharded, unsharded, grads, peak, config, strategy,
      backwardPrefetch, forwardPrefetch, limiter, gatherLane, groupSize, engine, blocking;
  Names() {
    Recorder& r = Recorder::instance();
    fsdpTrack = r.intern(trace::track::kFsdp);
    memoryTrack = r.intern(trace::track::kMemory);
    allGather = r.intern("all_gather");
    step = r.intern(trace::arg::kStep);
    bytes = r.intern(trace::arg::kBytes);
    phase = r.intern(trace::arg::kPhase);
    forward = r.intern("forward");
    backward = r.intern("backward");
    prefetched = r.intern(trace::arg::kPrefetched);
    issue = r.intern(trace::arg::kIssueNs);
    wireStart = r.intern(trace::arg::kWireStartNs);
    wireEnd = r.intern(trace::arg::kWireEndNs);
    exposed = r.intern(trace::arg::kExposedNs);
    launch = r.intern(trace::arg::kLaunchNs);
    sharded = r.intern(trace::counters::kFsdpShardedBytes);
    unsharded = r.intern(trace::counters::kFsdpUnshardedBytes);
    grads = r.intern(trace::counters::kFsdpGradBytes);
    peak = r.intern(trace::counters::kFsdpPeakBytes);
    config = r.intern("fsdp_config");
    strategy = r.intern(trace::arg::kShardingStrategy);
    backwardPrefetch = r.intern(trace::arg::kBackwardPrefetch);
    forwardPrefetch = r.intern(trace::arg::kForwardPrefetch);
    limiter = r.intern(trace::arg::kLimitAllGathers);
    gatherLane = r.intern(trace::arg::kGatherLane);
    groupSize = r.intern(trace::arg::kGroupSize);
    engine = r.intern(trace::arg::kEngine);
    blocking = r.intern(trace::arg::kBlocking);
  }
};

const Names& names() {
  static const Names n;
  return n;
}

uint32_t unitTrack(const std::string& unitName) {
  static std::mutex mutex;
  static std::unordered_map<std::string, uint32_t> ids;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = ids.find(unitName);
  if (it == ids.end()) {
    it = ids.emplace(unitName, Recorder::instance().intern(unitTrackName(unitName))).first;
  }
  return it->second;
}

uint32_t internName(const char* name) {
  static std::mutex mutex;
  static std::unordered_map<std::string, uint32_t> ids;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = ids.find(name);
  if (it == ids.end()) it = ids.emplace(name, Recorder::instance().intern(name)).first;
  return it->second;
}

}  // namespace

std::string unitTrackName(const std::string& unitName) {
  return std::string(trace::track::kFsdpUnitPrefix) +
         (unitName.empty() ? trace::track::kFsdpRootUnit : unitName);
}

void recordGather(const std::string& unitName, const GatherTiming& g) {
  if (!Recorder::enabled() || g.issueNs <= 0) return;
  const Names& n = names();
  const int64_t end = std::max(g.issueNs, g.readyNs);
  const int64_t exposed = g.waitBeginNs > 0 ? std::max<int64_t>(0, g.readyNs - g.waitBeginNs) : 0;
  trace::Arg args[] = {
      intArg(n.step, g.step),
      intArg(n.bytes, g.bytes),
      trace::stringArg(n.phase, g.backward ? n.backward : n.forward),
      intArg(n.prefetched, g.prefetched ? 1 : 0),
      intArg(n.issue, g.issueNs),
      intArg(n.wireStart, g.wireStartNs ? g.wireStartNs : g.issueNs),
      intArg(n.wireEnd, g.wireEndNs ? g.wireEndNs : end),
      intArg(n.exposed, exposed),
  };
  Recorder::instance().span(Category::kFsdp, unitTrack(unitName), n.allGather, g.issueNs, end, args,
                            static_cast<uint32_t>(sizeof(args) / sizeof(args[0])));
}

void recordReduce(const std::string& unitName, const ReduceTiming& r) {
  if (!Recorder::enabled() || r.launchNs <= 0) return;
  const Names& n = names();
  const int64_t end = std::max(r.launchNs, r.doneNs);
  trace::Arg args[] = {
      intArg(n.step, r.step),
      intArg(n.bytes, r.bytes),
      intArg(n.launch, r.launchNs),
      intArg(n.wireStart, r.wireStartNs ? r.wireStartNs : r.launchNs),
      intArg(n.wireEnd, r.wireEndNs ? r.wireEndNs : end),
  };
  Recorder::instance().span(Category::kFsdp, unitTrack(unitName), internName(r.op), r.launchNs, end,
                            args, static_cast<uint32_t>(sizeof(args) / sizeof(args[0])));
}

void recordUnitSpan(const std::string& unitName, const char* name, int64_t beginNs, int64_t endNs,
                    int64_t step) {
  if (!Recorder::enabled() || beginNs <= 0 || endNs < beginNs) return;
  trace::Arg args[] = {intArg(names().step, step)};
  Recorder::instance().span(Category::kFsdp, unitTrack(unitName), internName(name), beginNs, endNs,
                            args, 1);
}

void recordPhase(const char* name, int64_t beginNs, int64_t endNs, int64_t step) {
  if (!Recorder::enabled() || beginNs <= 0 || endNs < beginNs) return;
  trace::Arg args[] = {intArg(names().step, step)};
  Recorder::instance().span(Category::kFsdp, names().fsdpTrack, internName(name), beginNs, endNs,
                            args, 1);
}

void recordMemory(const MemoryCounters& m) {
  if (!Recorder::enabled()) return;
  const Names& n = names();
  Recorder& r = Recorder::instance();
  const int64_t now = trace::nowNs();
  r.counter(Category::kMemory, n.memoryTrack, n.sharded, now, static_cast<double>(m.shardedBytes));
  r.counter(Category::kMemory, n.memoryTrack, n.unsharded, now,
            static_cast<double>(m.unshardedBytes));
  r.counter(Category::kMemory, n.memoryTrack, n.grads, now, static_cast<double>(m.gradBytes));
  r.counter(Category::kMemory, n.memoryTrack, n.peak, now, static_cast<double>(m.peakBytes));
}

void recordConfig(const ScheduleConfig& c, int64_t atNs, int64_t step) {
  if (!Recorder::enabled()) return;
  const Names& n = names();
  trace::Arg args[] = {
      intArg(n.step, step),
      trace::stringArg(n.strategy, internName(c.shardingStrategy)),
      trace::stringArg(n.backwardPrefetch, internName(c.backwardPrefetch)),
      intArg(n.forwardPrefetch, c.forwardPrefetch ? 1 : 0),
      intArg(n.limiter, c.limitAllGathers ? 1 : 0),
      intArg(n.gatherLane, c.gatherLane ? 1 : 0),
      intArg(n.groupSize, c.shardSize),
      trace::stringArg(n.engine, internName(c.engine)),
      intArg(n.blocking, c.blocking ? 1 : 0),
  };
  Recorder::instance().instant(Category::kFsdp, n.fsdpTrack, n.config, atNs, args,
                               static_cast<uint32_t>(sizeof(args) / sizeof(args[0])));
}

}  // namespace ringx::fsdp
