#include "ddp/timing.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "trace/format/schema.h"
#include "trace/record/recorder.h"

namespace ringx::ddp {
namespace {

using trace::Category;
using trace::intArg;
using trace::Recorder;

// Interned once: the ids are process-wide and survive stop()/start().
struct Names {
  uint32_t ddpTrack, forward, backward, optimizer, rebuild, bucket, memoryTrack, bucketBytes;
  uint32_t step, bucketIndex, bytes, params, firstGrad, ready, launch, wireStart, wireEnd, copyBack,
      exposed, seq, buckets;
  uint32_t grad, plan, computeEnd, param, paramGroup, capBytes, firstBytes, view, groupSize, reason,
      engine;
  Names() {
    Recorder& r = Recorder::instance();
    ddpTrack = r.intern(trace::track::kDdp);
    forward = r.intern("forward");
    backward = r.intern("backward");
    optimizer = r.intern("optimizer");
    rebuild = r.intern("bucket_rebuild");
    bucket = r.intern("bucket");
    memoryTrack = r.intern(trace::track::kMemory);
    bucketBytes = r.intern(trace::counters::kDdpBucketBytes);
    step = r.intern(trace::arg::kStep);
    bucketIndex = r.intern(trace::arg::kBucket);
    bytes = r.intern(trace::arg::kBytes);
    params = r.intern(trace::arg::kParams);
    firstGrad = r.intern(trace::arg::kFirstGradNs);
    ready = r.intern(trace::arg::kReadyNs);
    launch = r.intern(trace::arg::kLaunchNs);
    wireStart = r.intern(trace::arg::kWireStartNs);
    wireEnd = r.intern(trace::arg::kWireEndNs);
    copyBack = r.intern(trace::arg::kCopyBackNs);
    exposed = r.intern(trace::arg::kExposedNs);
    seq = r.intern(trace::arg::kSeq);
    buckets = r.intern("buckets");
    grad = r.intern("grad");
    plan = r.intern("bucket_plan");
    computeEnd = r.intern(trace::arg::kComputeEndNs);
    param = r.intern(trace::arg::kParam);
    paramGroup = r.intern(trace::arg::kParamGroup);
    capBytes = r.intern(trace::arg::kBucketCapBytes);
    firstBytes = r.intern(trace::arg::kFirstBucketBytes);
    view = r.intern(trace::arg::kBucketView);
    groupSize = r.intern(trace::arg::kGroupSize);
    reason = r.intern(trace::arg::kReason);
    engine = r.intern(trace::arg::kEngine);
  }
};

const Names& names() {
  static const Names n;
  return n;
}

uint32_t bucketTrack(size_t index) {
  // Few buckets per model: a small cache of ids beats interning every iteration.
  static std::mutex mutex;
  static std::vector<uint32_t> ids;
  std::lock_guard<std::mutex> lock(mutex);
  while (ids.size() <= index) {
    ids.push_back(Recorder::instance().intern(std::string(trace::track::kDdpBucketPrefix) +
                                              std::to_string(ids.size())));
  }
  return ids[index];
}

// A phase span on "ddp" with its step, and `extra` when given (the backward's compute end).
void phase(uint32_t name, int64_t beginNs, int64_t endNs, int64_t step,
           const trace::Arg* extra = nullptr) {
  if (beginNs <= 0 || endNs < beginNs) return;
  const Names& n = names();
  trace::Arg args[] = {intArg(n.step, step), extra ? *extra : trace::Arg{}};
  Recorder::instance().span(Category::kDdp, n.ddpTrack, name, beginNs, endNs, args, extra ? 2 : 1);
}

// A string's id, interned once (bucketing groups, engine names: a handful per process).
uint32_t interned(const std::string& group) {
  static std::mutex mutex;
  static std::map<std::string, uint32_t> ids;
  std::lock_guard<std::mutex> lock(mutex);
  auto [at, fresh] = ids.emplace(group, 0);
  if (fresh) at->second = Recorder::instance().intern(group);
  return at->second;
}

}  // namespace

void recordIteration(const IterationTiming& it, const std::vector<ParamFacts>& params) {
  if (!Recorder::enabled()) return;
  const Names& n = names();
  phase(n.optimizer, it.previousFinalizeEndNs, it.forwardBeginNs, it.iteration - 1);
  phase(n.forward, it.forwardBeginNs, it.forwardEndNs, it.iteration);
  const trace::Arg computeEnd = intArg(n.computeEnd, it.backwardEndNs);
  phase(n.backward, it.backwardBeginNs ? it.backwardBeginNs : it.forwardEndNs, it.finalizeEndNs,
        it.iteration, &computeEnd);
  for (const GradReady& g : it.grads) {
    if (g.param >= params.size()) continue;
    trace::Arg args[] = {intArg(n.step, it.iteration),
                         intArg(n.param, static_cast<int64_t>(g.param)),
                         intArg(n.bytes, params[g.param].bytes),
                         trace::stringArg(n.paramGroup, interned(params[g.param].group))};
    Recorder::instance().instant(Category::kDdp, bucketTrack(g.bucket), n.grad, g.ns, args, 4);
  }
  for (const BucketTiming& b : it.buckets) {
    if (b.launchNs == 0) continue;
    trace::Arg args[] = {
        intArg(n.bucketIndex, static_cast<int64_t>(b.index)),
        intArg(n.step, it.iteration),
        intArg(n.bytes, b.bytes),
        intArg(n.params, static_cast<int64_t>(b.params)),
        intArg(n.firstGrad, b.firstGradNs),
        intArg(n.ready, b.readyNs),
        intArg(n.launch, b.launchNs),
        intArg(n.wireStart, b.wireStartNs),
        intArg(n.wireEnd, b.wireEndNs),
        intArg(n.copyBack, b.copyBackBeginNs),
        intArg(n.exposed, b.exposedNs),
        intArg(n.seq, b.seq),
    };
    const int64_t begin = b.firstGradNs ? b.firstGradNs : b.launchNs;
    const int64_t end = std::max(begin, b.copyBackEndNs ? b.copyBackEndNs : b.doneNs);
    Recorder::instance().span(Category::kDdp, bucketTrack(b.index), n.bucket, begin, end, args,
                              static_cast<uint32_t>(sizeof(args) / sizeof(args[0])));
  }
}

void recordBucketRebuild(int64_t beginNs, int64_t endNs, int64_t step, size_t bucketCount) {
  if (!Recorder::enabled()) return;
  const Names& n = names();
  trace::Arg args[] = {intArg(n.step, step), intArg(n.buckets, static_cast<int64_t>(bucketCount))};
  Recorder::instance().span(Category::kDdp, n.ddpTrack, n.rebuild, beginNs, endNs, args, 2);
}

void recordBucketPlan(const PlanRecord& p) {
  if (!Recorder::enabled()) return;
  const Names& n = names();
  std::vector<trace::Arg> args = {intArg(n.step, p.step),
                                  intArg(n.capBytes, p.bucketCapBytes),
                                  intArg(n.firstBytes, p.firstBucketBytes),
                                  intArg(n.view, p.gradientAsBucketView ? 1 : 0),
                                  intArg(n.groupSize, p.worldSize),
                                  intArg(n.buckets, static_cast<int64_t>(p.buckets)),
                                  trace::stringArg(n.engine, interned(p.engine))};
  if (!p.reason.empty())
    args.push_back(trace::stringArg(n.reason, Recorder::instance().intern(p.reason)));
  Recorder::instance().instant(Category::kDdp, n.ddpTrack, n.plan, trace::nowNs(), args.data(),
                               static_cast<uint32_t>(args.size()));
}

void recordBucketBytes(int64_t bytes) {
  if (!Recorder::enabled()) return;
  const Names& n = names();
  Recorder::instance().counter(Category::kMemory, n.memoryTrack, n.bucketBytes, trace::nowNs(),
                               static_cast<double>(bytes));
}

}  // namespace ringx::ddp
