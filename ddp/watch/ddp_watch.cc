#include "ddp/watch/ddp_watch.h"

#include <algorithm>

#include "trace/record/recorder.h"

namespace ringx::observe {

void DdpWatch::setLayout(DdpLayout layout) {
  std::lock_guard<std::mutex> lock(mutex_);
  layout_ = std::move(layout);
  bucketOf_.assign(layout_.params.size(), 0);
  for (size_t b = 0; b < layout_.buckets.size(); ++b) {
    for (size_t p : layout_.buckets[b]) {
      if (p < bucketOf_.size()) bucketOf_[p] = b;
    }
  }
  byIdentity_.clear();
  for (size_t p = 0; p < layout_.params.size(); ++p) byIdentity_.push_back({layout_.params[p], p});
  std::sort(byIdentity_.begin(), byIdentity_.end());
  int64_t held = 0;
  for (int64_t bytes : layout_.bucketBytes) held += bytes;
  layout_.plan.step = std::max<int64_t>(0, iteration_);
  layout_.plan.buckets = layout_.buckets.size();
  layout_.plan.engine = "torch.ddp";
  ddp::recordBucketPlan(layout_.plan);
  ddp::recordBucketBytes(held);
  // A rebuild happens inside a forward, which goes on; a layout anywhere else starts afresh.
  if (phase_ != Phase::kForward) phase_ = Phase::kIdle;
}

void DdpWatch::recordRebuild(int64_t beginNs, int64_t endNs) {
  std::lock_guard<std::mutex> lock(mutex_);
  ddp::recordBucketRebuild(beginNs, endNs, std::max<int64_t>(0, iteration_),
                           layout_.buckets.size());
}

void DdpWatch::forwardBegin(int64_t ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  // A forward whose backward never came (evaluation with grad on) is dropped here.
  phase_ = Phase::kForward;
  current_ = ddp::IterationTiming{};
  current_.forwardBeginNs = ns;
}

void DdpWatch::forwardEnd(int64_t ns, bool syncsGradients) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (phase_ != Phase::kForward) return;
  current_.forwardEndNs = ns;
  if (!syncsGradients || layout_.buckets.empty()) {
    phase_ = Phase::kIdle;
    return;
  }
  current_.iteration = ++iteration_;
  phase_ = Phase::kArmed;
}

bool DdpWatch::armed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return phase_ == Phase::kArmed;
}

void DdpWatch::resetBuckets() {
  buckets_.assign(layout_.buckets.size(), Bucket{});
  for (size_t b = 0; b < buckets_.size(); ++b) buckets_[b].pending = layout_.buckets[b].size();
  seen_.assign(layout_.params.size(), false);
  nextBucket_ = 0;
  // Empty buckets (none in torch's layouts) would hold the mirror back forever.
  while (nextBucket_ < buckets_.size() && buckets_[nextBucket_].pending == 0) ++nextBucket_;
}

bool DdpWatch::backwardNode(int64_t ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (phase_ != Phase::kArmed) return false;
  phase_ = Phase::kBackward;
  current_.backwardBeginNs = ns;
  resetBuckets();
  return true;
}

void DdpWatch::gradReady(const void* param, int64_t ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (phase_ != Phase::kBackward) return;
  auto at = std::lower_bound(byIdentity_.begin(), byIdentity_.end(),
                             std::pair<const void*, size_t>{param, 0});
  if (at == byIdentity_.end() || at->first != param) return;
  const size_t p = at->second;
  if (seen_[p]) return;
  seen_[p] = true;
  const size_t b = bucketOf_[p];
  Bucket& bucket = buckets_[b];
  if (bucket.firstGradNs == 0) bucket.firstGradNs = ns;
  if (bucket.pending > 0 && --bucket.pending == 0) bucket.readyNs = ns;
  if (ddp::gradSampled(current_.iteration)) current_.grads.push_back({p, b, ns});
  // The Reducer's hook for this parameter runs next and launches what is now ready, in order.
  while (nextBucket_ < buckets_.size() && buckets_[nextBucket_].pending == 0) {
    buckets_[nextBucket_++].mirrorLaunchNs = ns;
  }
}

uint64_t DdpWatch::tokenFor(size_t bucket) const {
  return (static_cast<uint64_t>(current_.iteration + 1) << 24) | (bucket + 1);
}

size_t DdpWatch::bucketOf(uint64_t token) const {
  const size_t b = (token & ((1u << 24) - 1)) - 1;
  if (token >> 24 != static_cast<uint64_t>(current_.iteration + 1) || b >= buckets_.size()) {
    return buckets_.size();  // another iteration's (or none)
  }
  return b;
}

uint64_t DdpWatch::collectiveIssued(int64_t ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (phase_ != Phase::kBackward || buckets_.empty()) return 0;
  // The lowest launched bucket without a collective; else, with find_unused_parameters (the
  // mirror lags: it never sees the unused parameters the Reducer marks ready), the lowest without
  // one; else a hook's further collective, of the newest bucket launched.
  const auto firstWithout = [this](size_t from, size_t to) {
    for (size_t b = from; b < to; ++b) {
      if (buckets_[b].collectives == 0) return b;
    }
    return buckets_.size();
  };
  size_t target = firstWithout(0, nextBucket_);
  if (target == buckets_.size() && (layout_.findUnused || nextBucket_ == 0)) {
    target = firstWithout(nextBucket_, buckets_.size());
  }
  if (target == buckets_.size()) target = nextBucket_ > 0 ? nextBucket_ - 1 : buckets_.size() - 1;
  Bucket& bucket = buckets_[target];
  if (bucket.collectives++ == 0) bucket.issueNs = ns;
  return tokenFor(target);
}

void DdpWatch::collectiveFinished(uint64_t token, int64_t ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (phase_ != Phase::kBackward && phase_ != Phase::kFinalizing) return;
  const size_t b = bucketOf(token);
  if (b == buckets_.size()) return;
  buckets_[b].finishNs = std::max(buckets_[b].finishNs, ns);
}

void DdpWatch::attachWire(uint64_t token, WireReader reader) {
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t b = bucketOf(token);
  if (b == buckets_.size()) return;
  if (!buckets_[b].wire) buckets_[b].wire = std::move(reader);  // the bucket's first collective
}

void DdpWatch::computeEnded(int64_t ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (phase_ != Phase::kBackward) return;
  current_.backwardEndNs = ns;
  phase_ = Phase::kFinalizing;
  copies_.clear();
}

bool DdpWatch::copiesBack() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !layout_.plan.gradientAsBucketView;
}

void DdpWatch::copiedBack(int64_t beginNs, int64_t endNs) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (phase_ == Phase::kFinalizing) copies_.push_back({beginNs, endNs});
}

void DdpWatch::finalized(int64_t ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (phase_ != Phase::kFinalizing) return;
  ddp::IterationTiming& it = current_;
  it.finalizeEndNs = ns;
  it.previousFinalizeEndNs = lastFinalizeEndNs_;
  int64_t lastDone = it.backwardEndNs;
  size_t copy = 0;  // the next parameter's copy back: buckets are copied in order
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const Bucket& bucket = buckets_[b];
    ddp::BucketTiming t;
    t.index = b;
    t.bytes = b < layout_.bucketBytes.size() ? layout_.bucketBytes[b] : 0;
    t.params = layout_.buckets[b].size();
    t.firstGradNs = bucket.firstGradNs;
    t.readyNs = bucket.readyNs ? bucket.readyNs : bucket.mirrorLaunchNs;
    // The Work's scope begins at the issue over ringx (and NCCL), but where gloo's worker starts
    // running it: there the Reducer's launch is the mirror's (it launches as buckets get ready).
    t.launchNs = bucket.wire || bucket.mirrorLaunchNs == 0 ? bucket.issueNs : bucket.mirrorLaunchNs;
    if (t.launchNs == 0) t.launchNs = it.backwardEndNs;  // never seen launching: at the latest
    // Finished no later than the Reducer's finalize, which waited for it.
    t.doneNs = bucket.finishNs ? bucket.finishNs : ns;
    const WireTimes wire = bucket.wire ? bucket.wire() : WireTimes{};
    t.wireStartNs = wire.startNs ? wire.startNs : std::max(t.launchNs, bucket.issueNs);
    t.wireEndNs = wire.endNs ? wire.endNs : t.doneNs;
    t.seq = wire.seq;
    t.exposedNs = std::max<int64_t>(0, t.doneNs - it.backwardEndNs);
    const size_t copies = std::min(layout_.buckets[b].size(), copies_.size() - copy);
    if (copies > 0) {
      t.copyBackBeginNs = copies_[copy].first;
      t.copyBackEndNs = copies_[copy + copies - 1].second;
      copy += copies;
    }
    lastDone = std::max(lastDone, t.doneNs);
    it.buckets.push_back(t);
  }
  it.exposedNs = lastDone - it.backwardEndNs;
  ddp::recordIteration(it, layout_.facts);
  last_ = it;
  ++recorded_;
  lastFinalizeEndNs_ = ns;
  buckets_.clear();
  copies_.clear();
  phase_ = Phase::kIdle;
}

ddp::IterationTiming DdpWatch::lastIteration() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_;
}

int64_t DdpWatch::iterations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return recorded_;
}

}  // namespace ringx::observe
