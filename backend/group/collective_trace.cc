#include "backend/group/collective_trace.h"

#include "base/error.h"
#include "trace/record/recorder.h"

namespace ringx {

using trace::Recorder;

CollectiveTracer::CollectiveTracer(const std::string& groupName, int groupRank, int groupSize)
    : track_(Recorder::instance().intern(std::string(trace::track::kCommPrefix) + groupName)),
      deviceTrack_(Recorder::instance().intern(trace::track::kCudaComm)),
      group_(Recorder::instance().intern(groupName)),
      groupRank_(groupRank),
      groupSize_(groupSize) {}

uint32_t CollectiveTracer::idOf(const char* text) {
  for (const auto& [address, id] : staticIds_) {
    if (address == text) return id;
  }
  const uint32_t id = Recorder::instance().intern(text);
  staticIds_.emplace_back(text, id);
  return id;
}

uint32_t CollectiveTracer::peersId(const std::vector<int>& peers) {
  if (lastPeersId_ == 0 || peers != lastPeers_) {
    std::string text;
    for (int p : peers) {
      if (!text.empty()) text += ',';
      text += std::to_string(p);
    }
    lastPeers_ = peers;
    lastPeersId_ = Recorder::instance().intern(text);
  }
  return lastPeersId_;
}

void CollectiveTracer::record(const CollectiveOutcome& outcome, const CallNote& note,
                              int64_t startNs, int64_t endNs, const char* error) {
  Recorder& r = Recorder::instance();
  if (!Recorder::enabled()) return;
  // Keys are interned once per process, values through the caches above.
  static const uint32_t kBytes = r.intern(trace::arg::kBytes), kSeq = r.intern(trace::arg::kSeq),
                        kGroup = r.intern(trace::arg::kGroup),
                        kGroupRank = r.intern(trace::arg::kGroupRank),
                        kGroupSize = r.intern(trace::arg::kGroupSize),
                        kDtype = r.intern(trace::arg::kDtype),
                        kReduceOp = r.intern(trace::arg::kReduceOp),
                        kPremulFactor = r.intern(trace::arg::kPremulFactor),
                        kRoot = r.intern(trace::arg::kRoot),
                        kAlgorithm = r.intern(trace::arg::kAlgorithm),
                        kTransport = r.intern(trace::arg::kTransport),
                        kPeers = r.intern(trace::arg::kPeers),
                        kEnqueue = r.intern(trace::arg::kEnqueueNs),
                        kError = r.intern(trace::arg::kError),
                        kGpuBegin = r.intern(trace::arg::kGpuBeginNs),
                        kGpuEnd = r.intern(trace::arg::kGpuEndNs);
  trace::Arg args[Recorder::kMaxArgs + 2];  // the recorder keeps the first kMaxArgs
  uint32_t n = 0;
  args[n++] = trace::intArg(kBytes, static_cast<int64_t>(note.bytes));
  args[n++] = trace::intArg(kSeq, static_cast<int64_t>(outcome.seq));
  args[n++] = trace::stringArg(kGroup, group_);
  args[n++] = trace::intArg(kGroupRank, groupRank_);
  args[n++] = trace::intArg(kGroupSize, groupSize_);
  args[n++] = trace::stringArg(kDtype, idOf(dataTypeName(outcome.dtype)));
  if (outcome.reduces) {
    args[n++] = trace::stringArg(kReduceOp, idOf(reduceOpName(outcome.reduceOp)));
    if (outcome.reduceOp.scale == AskedReduce::Scale::kPremultiply)
      args[n++] = trace::doubleArg(kPremulFactor, outcome.reduceOp.factor);
  }
  if (outcome.root >= 0) args[n++] = trace::intArg(kRoot, outcome.root);
  args[n++] = trace::stringArg(kAlgorithm, idOf(outcome.algorithm));
  if (outcome.transport != nullptr)
    args[n++] = trace::stringArg(kTransport, idOf(outcome.transport));
  args[n++] = trace::stringArg(kPeers, peersId(outcome.peers));
  if (note.enqueueNs > 0) args[n++] = trace::intArg(kEnqueue, note.enqueueNs);
  if (error != nullptr) args[n++] = trace::stringArg(kError, r.intern(error));
  const bool onDevice = outcome.deviceEndNs > 0;
  if (onDevice) {
    args[n++] = trace::intArg(kGpuBegin, outcome.deviceBeginNs);
    args[n++] = trace::intArg(kGpuEnd, outcome.deviceEndNs);
  }
  r.span(trace::Category::kCollective, track_, idOf(outcome.op), startNs, endNs, args, n);
  if (onDevice) {
    trace::Arg device[] = {trace::intArg(kSeq, static_cast<int64_t>(outcome.seq)),
                           trace::stringArg(kGroup, group_),
                           trace::intArg(kBytes, static_cast<int64_t>(note.bytes))};
    r.span(trace::Category::kDevice, deviceTrack_, idOf(outcome.op), outcome.deviceBeginNs,
           outcome.deviceEndNs, device, 3);
  }
}

}  // namespace ringx
