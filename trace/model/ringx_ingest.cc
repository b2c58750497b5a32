// Converts decoded ringx records (schema.h) into the store's spans, instants and
// counter samples; string ids are re-interned into the store's pool.
#include "trace/model/ringx_ingest.h"

#include <vector>

namespace ringx::model {

size_t ingestRankTrace(TraceStore& store, const trace::RankTrace& rank,
                       const trace::ClockModel& clock, size_t fromEvent,
                       trace::CollectiveChains* chains) {
  std::vector<CollectiveSighting> sightings;
  const size_t next = ingestRankTraceInto(store, store.rank(rank.header.rank), rank, clock,
                                          fromEvent, chains ? &sightings : nullptr);
  for (const CollectiveSighting& s : sightings)
    chains->add(store.str(s.group), s.seq, s.groupSize, s.arrival);
  return next;
}

size_t ingestRankTraceInto(TraceStore& store, RankData& data, const trace::RankTrace& rank,
                           const trace::ClockModel& clock, size_t fromEvent,
                           std::vector<CollectiveSighting>* sightings) {
  data.rank = rank.header.rank;
  data.host = rank.header.host;
  data.pid = rank.header.pid;
  data.source = rank.source;
  data.truncated = rank.truncated;
  data.clockAligned = clock.aligned();
  data.clockUncertaintyNs = clock.maxUncertaintyNs();
  data.clockKnown = true;
  data.clockReference = clock.isReference();
  if (fromEvent == 0 && !rank.events.empty())
    data.clockOffsetNs = clock.offsetAt(rank.events.front().beginNs);
  data.dropped = rank.dropped;
  if (rank.header.startWallNs > 0) {
    data.hasWallClock = true;
    data.wallToAlignedNs = clock.align(rank.header.startSteadyNs) - rank.header.startWallNs;
  }

  // Stream string id -> store string id, filled lazily.
  std::vector<uint32_t> ids(rank.strings.size(), UINT32_MAX);
  auto id = [&](uint32_t streamId) {
    if (streamId >= ids.size()) return uint32_t{0};
    if (ids[streamId] == UINT32_MAX) ids[streamId] = store.strings().intern(rank.strings[streamId]);
    return ids[streamId];
  };
  uint8_t categories[trace::kCategoryCount + 1];
  for (int c = 1; c <= trace::kCategoryCount; ++c)
    categories[c] = store.category(trace::categoryName(static_cast<trace::Category>(c)));
  std::vector<int32_t> trackOf(rank.strings.size(), -1);
  const uint32_t errorKey = store.strings().intern(trace::arg::kError);
  const trace::CollectiveKeys collectiveKeys(rank);

  std::vector<ArgValue> args;
  std::string_view lastGroup;
  uint32_t lastGroupId = 0;
  for (size_t i = fromEvent; i < rank.events.size(); ++i) {
    const trace::Event& e = rank.events[i];
    if (e.kind == trace::EventKind::kCounter) {
      store.addCounter(data, rank.str(e.name), clock.align(e.beginNs), e.value);
      continue;
    }
    args.clear();
    bool failed = false;
    for (uint32_t a = e.firstArg; a < e.firstArg + e.argCount && a < rank.args.size(); ++a) {
      const trace::Arg& in = rank.args[a];
      const uint32_t key = id(in.key);
      failed |= key == errorKey;
      switch (in.type) {
        case trace::ArgType::kInt: {
          // Steady-clock times in args move onto the aligned clock with the event.
          const bool time = trace::arg::isSteadyTime(rank.str(in.key)) && in.intValue > 0;
          args.push_back(ArgValue::ofInt(key, time ? clock.align(in.intValue) : in.intValue));
          break;
        }
        case trace::ArgType::kDouble:
          args.push_back(ArgValue::ofDouble(key, in.doubleValue));
          break;
        case trace::ArgType::kString:
          args.push_back(ArgValue::ofString(key, id(in.stringId)));
          break;
      }
    }
    const uint32_t first = store.addArgs(data, args.data(), args.size());
    int32_t track = e.track < trackOf.size() ? trackOf[e.track] : -1;
    if (track < 0) {
      track = static_cast<int32_t>(store.track(data, rank.str(e.track)));
      if (e.track < trackOf.size()) trackOf[e.track] = track;
    }
    const int c = static_cast<int>(e.category);
    const uint8_t category = c >= 1 && c <= trace::kCategoryCount ? categories[c] : 0;
    if (e.kind == trace::EventKind::kSpan) {
      Span s;
      s.begin = clock.align(e.beginNs);
      s.end = clock.align(e.endNs);
      s.name = id(e.name);
      s.firstArg = first;
      s.argCount = static_cast<uint16_t>(args.size());
      s.category = category;
      s.flags = failed ? kSpanFailed : 0;
      store.addSpan(data, static_cast<uint32_t>(track), s);
      std::string_view group;
      int64_t seq, groupSize;
      if (sightings && collectiveKeys.read(e, &group, &seq, &groupSize)) {
        // One group at a time is the rule: intern (a lock) only when it changes.
        if (group != lastGroup) lastGroupId = store.strings().intern(lastGroup = group);
        sightings->push_back(
            CollectiveSighting{lastGroupId, seq, groupSize > 0 ? groupSize : rank.header.worldSize,
                               trace::CollectiveArrival{data.rank, id(e.track), s.name, s.begin}});
      }
    } else {
      Instant in;
      in.time = clock.align(e.beginNs);
      in.name = id(e.name);
      in.firstArg = first;
      in.argCount = static_cast<uint16_t>(args.size());
      in.category = category;
      store.addInstant(data, static_cast<uint32_t>(track), in);
    }
  }
  return rank.events.size();
}

void addCollectiveFlows(TraceStore& store, const std::vector<trace::CollectiveChain>& chains) {
  for (const trace::CollectiveChain& chain : chains) {
    // The first arrival names every arrow of the chain, as in the export.
    const uint32_t name = chain.arrivals.front().name;
    for (size_t i = 0; i + 1 < chain.arrivals.size(); ++i) {
      const trace::CollectiveArrival& a = chain.arrivals[i];
      const trace::CollectiveArrival& b = chain.arrivals[i + 1];
      store.addFlow(
          Flow{FlowEnd{a.rank, a.track, a.beginNs}, FlowEnd{b.rank, b.track, b.beginNs}, name});
    }
  }
}

void ingestTraceSet(TraceStore& store, const trace::TraceSet& set) {
  const auto clocks = trace::clockModels(set.ranks);
  trace::CollectiveChains chains;
  for (size_t i = 0; i < set.ranks.size(); ++i)
    ingestRankTrace(store, set.ranks[i], clocks[i], 0, &chains);
  addCollectiveFlows(store, chains.takeAll());
  for (const auto& w : set.warnings) store.addWarning(w);
  store.finalize();
}

}  // namespace ringx::model
