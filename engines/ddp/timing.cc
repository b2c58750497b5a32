#include "engines/ddp/timing.h"

#include <algorithm>
#include <mutex>

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

void phase(uint32_t name, int64_t beginNs, int64_t endNs, int64_t step) {
  if (beginNs <= 0 || endNs < beginNs) return;
  const Names& n = names();
  trace::Arg args[] = {intArg(n.step, step)};
  Recorder::instance().span(Category::kDdp, n.ddpTrack, name, beginNs, endNs, args, 1);
}

}  // namespace

void recordIteration(const IterationTiming& it) {
  if (!Recorder::enabled()) return;
  const Names& n = names();
  phase(n.optimizer, it.previousFinalizeEndNs, it.forwardBeginNs, it.iteration - 1);
  phase(n.forward, it.forwardBeginNs, it.forwardEndNs, it.iteration);
  phase(n.backward, it.backwardBeginNs ? it.backwardBeginNs : it.forwardEndNs, it.finalizeEndNs,
        it.iteration);
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

void recordBucketBytes(int64_t bytes) {
  if (!Recorder::enabled()) return;
  const Names& n = names();
  Recorder::instance().counter(Category::kMemory, n.memoryTrack, n.bucketBytes, trace::nowNs(),
                               static_cast<double>(bytes));
}

}  // namespace ringx::ddp
