// torch Flight Recorder dumps into the store (see torch_flight_ingest.h).
#include "trace/model/torch_flight_ingest.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "base/text.h"
#include "trace/format/schema.h"
#include "trace/model/flight_ingest.h"

namespace ringx::model {
namespace {

// The latest time a dump records: when it was taken, it was at least this late.
int64_t latestRecordedNs(const trace::TorchFlightDump& d) {
  int64_t latest = 0;
  for (const trace::TorchFlightEntry& e : d.entries)
    latest = std::max({latest, e.createdNs, e.startedNs, e.completedNs});
  return latest;
}

std::string sizeText(const std::vector<int64_t>& dims) {
  std::string out;
  for (int64_t d : dims) out += strCat(out.empty() ? "" : "x", d);
  return out;
}

}  // namespace

void ingestTorchFlightDumps(TraceStore& store, trace::TorchFlightSet set) {
  StringPool& strings = store.strings();
  const FlightArgKeys keys(strings);
  const uint32_t kTorchState = strings.intern(kTorchStateArg),
                 kRetired = strings.intern(kTorchRetiredArg),
                 kInputSize = strings.intern(kTorchInputSizeArg);
  const uint8_t category = store.category(trace::categoryName(trace::Category::kCollective));
  const trace::TorchJobGroups job = trace::torchGroupMembers(set);
  size_t untimed = 0;
  std::vector<ArgValue> args;
  for (const trace::TorchFlightDump& d : set.dumps) {
    RankData& rank = store.rank(d.rank);  // a rank that issued nothing is there too, empty
    if (rank.source.empty()) rank.source = d.source;
    drawOnWallClock(rank);
    const int64_t latest = latestRecordedNs(d);
    for (const trace::TorchFlightEntry& e : d.entries) {
      const trace::TorchGroupMembers* group = e.group.empty() ? nullptr : job.find(e.group);
      const int64_t begin = e.startedNs > 0 ? e.startedNs : e.createdNs;
      if (!group || begin <= 0) {
        untimed += group != nullptr;
        continue;
      }
      const trace::FlightState state = e.flightState();
      const int64_t end = e.completedNs > 0                        ? e.completedNs
                          : state == trace::FlightState::kFinished ? begin
                                                                   : latest;
      const std::string label = group->label();
      args.clear();
      if (!e.p2p && e.seq >= 0) args.push_back(ArgValue::ofInt(keys.seq, e.seq));
      args.push_back(ArgValue::ofString(keys.group, strings.intern(label)));
      args.push_back(ArgValue::ofInt(keys.groupRank, group->groupRankOf(d.rank)));
      args.push_back(ArgValue::ofInt(keys.groupSize, static_cast<int64_t>(group->ranks.size())));
      if (const uint64_t bytes = e.bytes(); bytes > 0)
        args.push_back(ArgValue::ofInt(keys.bytes, static_cast<int64_t>(bytes)));
      if (!e.dtype.empty()) args.push_back(ArgValue::ofString(keys.dtype, strings.intern(e.dtype)));
      if (!e.inputSize.empty())
        args.push_back(ArgValue::ofString(kInputSize, strings.intern(sizeText(e.inputSize))));
      if (state != trace::FlightState::kFinished)
        args.push_back(
            ArgValue::ofString(keys.state, strings.intern(trace::flightStateName(state))));
      if (!e.state.empty())
        args.push_back(ArgValue::ofString(kTorchState, strings.intern(e.state)));
      args.push_back(ArgValue::ofInt(kRetired, e.retired ? 1 : 0));
      Span s;
      s.begin = begin + rank.wallToAlignedNs;
      s.end = std::max(begin, end) + rank.wallToAlignedNs;
      s.name = strings.intern(e.call());
      s.firstArg = store.addArgs(rank, args.data(), args.size());
      s.argCount = static_cast<uint16_t>(args.size());
      s.category = category;
      store.addSpan(rank, store.track(rank, trace::track::kCommPrefix + label), s);
    }
  }
  for (const std::string& w : set.warnings) store.addWarning(w);
  if (untimed > 0)
    store.addWarning(strCat(untimed, " torch Flight Recorder entries record no time: not drawn"));
  store.setTorchFlight(std::make_shared<const trace::TorchFlightSet>(std::move(set)));
}

}  // namespace ringx::model
