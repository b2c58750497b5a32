// Flight recorder dumps into the store (see flight_ingest.h).
#include "trace/model/flight_ingest.h"

#include <algorithm>
#include <vector>

#include "trace/format/schema.h"

namespace ringx::model {

FlightArgKeys::FlightArgKeys(StringPool& strings)
    : seq(strings.intern(trace::arg::kSeq)),
      group(strings.intern(trace::arg::kGroup)),
      groupRank(strings.intern(trace::arg::kGroupRank)),
      groupSize(strings.intern(trace::arg::kGroupSize)),
      bytes(strings.intern(trace::arg::kBytes)),
      dtype(strings.intern(trace::arg::kDtype)),
      state(strings.intern(kFlightStateArg)) {}

void drawOnWallClock(RankData& rank) {
  if (!rank.hasWallClock) {
    rank.hasWallClock = true;
    rank.wallToAlignedNs = 0;
  }
}

void ingestFlightDumps(TraceStore& store, const trace::FlightDumpSet& set) {
  StringPool& strings = store.strings();
  const FlightArgKeys keys(strings);
  const uint32_t kReduceOp = strings.intern(trace::arg::kReduceOp),
                 kPremulFactor = strings.intern(trace::arg::kPremulFactor),
                 kRoot = strings.intern(trace::arg::kRoot),
                 kAlgorithm = strings.intern(trace::arg::kAlgorithm),
                 kError = strings.intern(trace::arg::kError);
  const uint8_t category = store.category(trace::categoryName(trace::Category::kCollective));
  std::vector<ArgValue> args;
  for (const trace::FlightDump& d : set.dumps) {
    RankData& rank = store.rank(d.rank);
    if (rank.source.empty()) {
      rank.source = d.source;
      rank.host = d.host;
      rank.pid = d.pid;
    }
    drawOnWallClock(rank);
    auto aligned = [&](int64_t steady) { return d.wallNsOf(steady) + rank.wallToAlignedNs; };
    for (const trace::FlightGroup& g : d.groups) {
      const uint32_t track = store.track(rank, trace::track::kCommPrefix + g.name);
      const uint32_t groupName = strings.intern(g.name);
      for (const trace::FlightEntry& e : g.entries) {
        if (e.seq < 0) continue;
        args.clear();
        args.push_back(ArgValue::ofInt(keys.seq, e.seq));
        args.push_back(ArgValue::ofString(keys.group, groupName));
        args.push_back(ArgValue::ofInt(keys.groupRank, g.rank));
        args.push_back(ArgValue::ofInt(keys.groupSize, g.size));
        if (e.bytes > 0) args.push_back(ArgValue::ofInt(keys.bytes, static_cast<int64_t>(e.bytes)));
        if (!e.dtype.empty())
          args.push_back(ArgValue::ofString(keys.dtype, strings.intern(e.dtype)));
        if (!e.reduceOp.empty())
          args.push_back(ArgValue::ofString(kReduceOp, strings.intern(e.reduceOp)));
        if (e.premultiplies()) args.push_back(ArgValue::ofDouble(kPremulFactor, e.premulFactor));
        if (e.root >= 0) args.push_back(ArgValue::ofInt(kRoot, e.root));
        if (!e.algorithm.empty())
          args.push_back(ArgValue::ofString(kAlgorithm, strings.intern(e.algorithm)));
        if (e.state != trace::FlightState::kFinished)
          args.push_back(
              ArgValue::ofString(keys.state, strings.intern(trace::flightStateName(e.state))));
        const bool failed = e.state == trace::FlightState::kFailed;
        if (failed)
          args.push_back(
              ArgValue::ofString(kError, strings.intern(e.error.empty() ? "failed" : e.error)));
        Span s;
        // A call that never started spans its time in the queue.
        const int64_t begin = e.startNs > 0 ? e.startNs : (e.issueNs > 0 ? e.issueNs : d.steadyNs);
        const int64_t end = e.endNs > 0 ? e.endNs : d.steadyNs;
        s.begin = aligned(begin);
        s.end = aligned(std::max(begin, end));
        s.name = strings.intern(e.op);
        s.firstArg = store.addArgs(rank, args.data(), args.size());
        s.argCount = static_cast<uint16_t>(args.size());
        s.category = category;
        s.flags = failed ? kSpanFailed : 0;
        store.addSpan(rank, track, s);
      }
    }
  }
  for (const std::string& w : set.warnings) store.addWarning(w);
}

}  // namespace ringx::model
