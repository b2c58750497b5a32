#include "backend/group/collective_trace.h"

#include "backend/common/error.h"
#include "backend/trace/recorder.h"

namespace ringx {

using trace::Recorder;

CollectiveTracer::CollectiveTracer(const std::string& groupName, int groupRank, int groupSize)
    : track_(Recorder::instance().intern(std::string(trace::track::kCommPrefix) + groupName)),
      group_(Recorder::instance().intern(groupName)),
      groupRank_(groupRank),
      groupSize_(groupSize) {}

void CollectiveTracer::record(const CollectiveOutcome& outcome, const CallNote& note,
                              int64_t startNs, int64_t endNs, const char* error) {
  Recorder& r = Recorder::instance();
  if (!Recorder::enabled()) return;
  // Keys are interned once per process; values that vary per call are interned
  // per call (a hash lookup, well under a microsecond).
  static const uint32_t kBytes = r.intern(trace::arg::kBytes), kSeq = r.intern(trace::arg::kSeq),
                        kGroup = r.intern(trace::arg::kGroup),
                        kGroupRank = r.intern(trace::arg::kGroupRank),
                        kGroupSize = r.intern(trace::arg::kGroupSize),
                        kDtype = r.intern(trace::arg::kDtype),
                        kReduceOp = r.intern(trace::arg::kReduceOp),
                        kRoot = r.intern(trace::arg::kRoot),
                        kAlgorithm = r.intern(trace::arg::kAlgorithm),
                        kTransport = r.intern(trace::arg::kTransport),
                        kPeers = r.intern(trace::arg::kPeers),
                        kEnqueue = r.intern(trace::arg::kEnqueueNs),
                        kError = r.intern(trace::arg::kError);
  trace::Arg args[Recorder::kMaxArgs];
  uint32_t n = 0;
  args[n++] = trace::intArg(kBytes, static_cast<int64_t>(note.bytes));
  args[n++] = trace::intArg(kSeq, static_cast<int64_t>(outcome.seq));
  args[n++] = trace::stringArg(kGroup, group_);
  args[n++] = trace::intArg(kGroupRank, groupRank_);
  args[n++] = trace::intArg(kGroupSize, groupSize_);
  args[n++] = trace::stringArg(kDtype, r.intern(dataTypeName(outcome.dtype)));
  if (outcome.reduces)
    args[n++] = trace::stringArg(kReduceOp, r.intern(reduceOpName(outcome.reduceOp)));
  if (outcome.root >= 0) args[n++] = trace::intArg(kRoot, outcome.root);
  args[n++] = trace::stringArg(kAlgorithm, r.intern(outcome.algorithm));
  if (!outcome.transport.empty()) {
    args[n++] = trace::stringArg(kTransport, r.intern(outcome.transport));
  }
  std::string peers;
  for (int p : outcome.peers) peers += strCat(peers.empty() ? "" : ",", p);
  args[n++] = trace::stringArg(kPeers, r.intern(peers));
  if (note.enqueueNs > 0) args[n++] = trace::intArg(kEnqueue, note.enqueueNs);
  if (error != nullptr) args[n++] = trace::stringArg(kError, r.intern(error));
  r.span(trace::Category::kCollective, track_, r.intern(outcome.op), startNs, endNs, args, n);
}

}  // namespace ringx
