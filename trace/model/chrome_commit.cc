// The commit of Chrome JSON ingest (chrome_reader.h): once the whole file is read, which process
// is which rank is known; the pending events go into the store and the flows become arrows.
#include "trace/model/chrome_reader.h"

#include <algorithm>

#include "base/error.h"
#include "base/release.h"

namespace ringx::model::chrome_detail {

// Joins the ends of each flow, in time order, into arrows: start -> step ->
// ... -> finish, a new chain after each finish. Ends on threads that have no
// events (so no lane) and ends alone are counted in a warning.
void Reader::commitFlows(const std::vector<int32_t>& rankOf, const std::vector<RankData*>& dataOf,
                         const std::vector<int32_t>& trackOf, const std::vector<int64_t>& shift) {
  std::stable_sort(flowEnds_.begin(), flowEnds_.end(),
                   [](const PendingFlowEnd& a, const PendingFlowEnd& b) {
                     if (a.key != b.key) return a.key < b.key;
                     if (a.time != b.time) return a.time < b.time;
                     return a.role < b.role;
                   });
  uint64_t alone = 0, added = 0;
  auto endOf = [&](const PendingFlowEnd& p, FlowEnd* out) {
    const int32_t track = trackOf[p.thread];
    if (track < 0) return false;
    const uint32_t process = threads_[p.thread].process;
    *out = FlowEnd{rankOf[process], dataOf[process]->tracks[static_cast<size_t>(track)].name,
                   p.time + shift[process]};
    return true;
  };
  for (size_t i = 0; i < flowEnds_.size();) {
    size_t j = i;
    while (j < flowEnds_.size() && flowEnds_[j].key == flowEnds_[i].key) ++j;
    std::vector<bool> joined(j - i, false);
    for (size_t k = i; k + 1 < j; ++k) {
      if (flowEnds_[k].role == kFlowFinish || flowEnds_[k + 1].role == kFlowStart) continue;
      Flow flow;
      flow.name = flowEnds_[k].name;
      if (!endOf(flowEnds_[k], &flow.from) || !endOf(flowEnds_[k + 1], &flow.to)) continue;
      store_.addFlow(flow);
      joined[k - i] = joined[k + 1 - i] = true;
      ++added;
    }
    for (bool b : joined) alone += b ? 0 : 1;
    i = j;
  }
  if (alone > 0)
    store_.addWarning(strCat(alone, " flow events in '", source_,
                             "' have no other end on a thread with events; their arrows are "
                             "not drawn (",
                             added, " arrows are)"));
  releaseMemory(flowEnds_);
}

// Finishes an event whose args are args_[e.firstArg, end).
void Reader::addEvent(PendingEvent& e) {
  const size_t argCount = std::min<size_t>(args_.size() - e.firstArg, UINT16_MAX);
  args_.resize(e.firstArg + argCount);
  e.argCount = static_cast<uint16_t>(argCount);
  for (size_t i = 0; i < argCount; ++i)
    if (args_[e.firstArg + i].key == errorKey_) e.bits |= kPendingFailed;
  threads_[e.thread].used = true;
  events_.push_back(e);
}

// A lane's name: its thread's name, else its tid's. A GPU's lanes say which GPU
// (onGpu); an unnamed one is a stream, whose id Kineto makes the tid.
std::string Reader::trackName(const Thread& t) const {
  const int32_t device = processes_[t.process].device;
  std::string name = t.name;
  if (name.empty()) {
    const std::string* text = namedText(t.tid);
    name = text != nullptr ? *text : strCat(device >= 0 ? "stream " : "thread ", t.tid);
  }
  if (device < 0) return name;
  return onGpu(device, name);
}

void Reader::commit() {
  // "B"s and "b"s never closed (a trace cut off mid-span) end where the trace
  // ends, as chrome://tracing draws them.
  uint64_t unclosed = 0;
  auto endAtTraceEnd = [&](int64_t begin, uint32_t name, uint8_t category, uint32_t thread,
                           const ArgValue* args, size_t argCount) {
    PendingEvent e;
    e.begin = begin;
    e.end = std::max(begin, lastTime_);
    e.name = name;
    e.category = category;
    e.thread = thread;
    e.firstArg = static_cast<uint32_t>(args_.size());
    args_.insert(args_.end(), args, args + argCount);
    addEvent(e);
    ++unclosed;
  };
  for (uint32_t i = 0; i < threads_.size(); ++i) {
    Thread& t = threads_[i];
    for (const OpenSpan& open : t.open)
      endAtTraceEnd(open.begin, open.name, open.category, i, t.openArgs.data() + open.firstArg,
                    open.argCount);
    t.open.clear();
    t.openArgs.clear();
  }
  for (const auto& [key, open] : asyncOpen_)
    for (const OpenAsync& o : open)
      endAtTraceEnd(o.begin, o.name, o.category, o.thread, o.args.data(), o.args.size());
  asyncOpen_.clear();

  // Ranks: a ringx export names its processes "rank N (host)"; a Kineto file
  // says its rank in distributedInfo (every process in it is that rank: the
  // CPU threads and the GPU streams); anything else numbers its processes in
  // the order they appear, skipping ranks a named process already took.
  // Ranks an earlier file put in the store are taken too: two files without
  // rank information are two ranks, not one. Kineto's GPU and bookkeeping pids
  // take the rank of the process they belong to (findOwners), and a GPU with
  // no events and no owner takes none (-1).
  findOwners();
  std::vector<int32_t> rankOf(processes_.size(), -1);
  std::vector<bool> taken;
  for (const RankData& r : store_.ranks()) {
    if (static_cast<size_t>(r.rank) >= taken.size()) taken.resize(r.rank + 1);
    taken[r.rank] = true;
  }
  for (const Process& p : processes_)
    if (p.ringxRank >= 0) {
      if (static_cast<size_t>(p.ringxRank) >= taken.size()) taken.resize(p.ringxRank + 1);
      taken[p.ringxRank] = true;
    }
  int32_t next = 0;
  for (size_t i = 0; i < processes_.size(); ++i) {
    const Process& p = processes_[i];
    if (p.owner != i || (p.device >= 0 && !p.active)) continue;
    if (p.ringxRank >= 0) {
      rankOf[i] = p.ringxRank;
    } else if (distributedRank_) {
      rankOf[i] = distributedRankValue_;
    } else {
      while (static_cast<size_t>(next) < taken.size() && taken[next]) ++next;
      rankOf[i] = next++;
    }
  }
  for (size_t i = 0; i < processes_.size(); ++i) rankOf[i] = rankOf[processes_[i].owner];
  // A profiler file whose rank has a ringx stream already: its times (epoch
  // ns, baseTimeNanoseconds + ts) move onto the ringx rank's aligned clock
  // through that stream's (steady, wall) reference.
  std::vector<int64_t> shift(processes_.size(), 0);
  for (size_t i = 0; i < processes_.size(); ++i) {
    const RankData* ringx = rankOf[i] < 0 ? nullptr : store_.findRank(rankOf[i]);
    if (haveBaseTime_ && processes_[i].ringxRank < 0 && ringx != nullptr && ringx->hasWallClock)
      shift[i] = baseTimeNs_ + ringx->wallToAlignedNs;
  }
  // Every rank exists before any is used: creating one moves the others.
  for (int32_t rank : rankOf)
    if (rank >= 0) store_.rank(rank);
  std::vector<RankData*> dataOf(processes_.size(), nullptr);
  for (size_t i = 0; i < processes_.size(); ++i)
    if (rankOf[i] >= 0) dataOf[i] = &store_.rank(rankOf[i]);

  auto fact = [&](const Process& p, std::string_view key) -> const ArgValue* {
    const uint32_t id = store_.strings().find(key);
    if (id == 0) return nullptr;
    for (const ArgValue& a : p.facts)
      if (a.key == id) return &a;
    return nullptr;
  };
  auto intFact = [&](const Process& p, std::string_view key, int64_t fallback) {
    const ArgValue* a = fact(p, key);
    return a != nullptr && a->kind == ArgKind::kInt ? a->intValue : fallback;
  };
  std::vector<int64_t> timeShift(processes_.size(), 0);  // for ringx time args
  for (size_t i = 0; i < processes_.size(); ++i) {
    const Process& p = processes_[i];
    if (dataOf[i] == nullptr) continue;
    RankData& data = *dataOf[i];
    data.source = source_;
    if (distributedWorldSize_ > 0) data.worldSize = distributedWorldSize_;
    if (data.host.empty() && p.ringxRank < 0) data.host = kinetoHost_;
    if (p.ringxRank >= 0) {
      // The facts ringx ingest takes from the stream, as the exporter wrote them.
      const ArgValue* host = fact(p, "host");
      if (host != nullptr && host->kind == ArgKind::kString)
        data.host = std::string(store_.str(host->stringId));
      data.pid = intFact(p, "os_pid", p.pid);
      data.truncated = intFact(p, "truncated", 0) != 0;
      data.clockAligned = intFact(p, "clock_aligned", 1) != 0;
      data.clockUncertaintyNs = intFact(p, "clock_uncertainty_ns", 0);
      data.dropped = static_cast<uint64_t>(std::max<int64_t>(0, intFact(p, "dropped_events", 0)));
      // Time arguments (enqueue_ns, ...) hold the rank's own steady clock,
      // while the exporter aligned the events to rank 0's clock and moved them
      // to its origin: shift them the same way, with the offset it reports
      // (exact unless the clock drifted during the trace; then off by that).
      if (ringxExport_ && haveOrigin_) timeShift[i] = intFact(p, "clock_offset_ns", 0) - originNs_;
    } else if (data.pid == 0 && p.owner == i && p.device < 0) {
      data.pid = p.pid;  // the process's own, not a GPU's index
    }
  }

  // Track names (trackName), made unique within the rank when several threads
  // share one (two processes of a distributedInfo file may both have a
  // "thread 7"), so that they do not merge into one lane: the later one gets
  // its pid, or its tid when both are in one process.
  std::vector<int32_t> trackOf(threads_.size(), -1);
  std::map<std::pair<int32_t, std::string>, uint32_t> claimed;  // (rank, name) -> thread
  for (uint32_t i = 0; i < threads_.size(); ++i) {
    const Thread& t = threads_[i];
    if (!t.used) continue;
    const int32_t rank = rankOf[t.process];
    const int64_t pid = processes_[t.process].pid;
    std::string name = trackName(t);
    auto [it, fresh] = claimed.emplace(std::make_pair(rank, name), i);
    if (!fresh) {
      const bool sameProcess = threads_[it->second].process == t.process;
      name = sameProcess ? strCat(name, " (tid ", t.tid, ")") : strCat(name, " (pid ", pid, ")");
      if (!claimed.emplace(std::make_pair(rank, name), i).second) {
        name = strCat(trackName(t), " (pid ", pid, ", tid ", t.tid, ")");
        claimed.emplace(std::make_pair(rank, name), i);
      }
    }
    trackOf[i] = static_cast<int32_t>(store_.track(*dataOf[t.process], name));
  }

  commitFlows(rankOf, dataOf, trackOf, shift);
  ncclCollectives(rankOf);

  // Room for what each track and rank gets, so that a million events are not
  // copied again and again while their vectors grow.
  std::vector<size_t> perTrack(threads_.size(), 0);
  std::vector<size_t> argsOf(processes_.size(), 0);
  for (const PendingEvent& e : events_) {
    ++perTrack[e.thread];
    argsOf[threads_[e.thread].process] += e.argCount;
  }
  for (uint32_t i = 0; i < threads_.size(); ++i) {
    if (perTrack[i] == 0) continue;
    Track& track = dataOf[threads_[i].process]->tracks[static_cast<size_t>(trackOf[i])];
    track.pendingSpans.reserve(track.pendingSpans.size() + perTrack[i]);
  }
  // Packed args take about 3 bytes each (ArgList).
  for (size_t i = 0; i < processes_.size(); ++i)
    if (argsOf[i] > 0) dataOf[i]->argBytes.reserve(dataOf[i]->argBytes.size() + 3 * argsOf[i]);

  for (PendingEvent& e : events_) {
    const uint32_t process = threads_[e.thread].process;
    RankData& data = *dataOf[process];
    e.begin += shift[process];
    e.end += shift[process];
    uint32_t first = e.firstArg;
    if (timeShift[process] != 0) {
      for (uint32_t a = e.firstArg; a < e.firstArg + e.argCount; ++a) {
        ArgValue& arg = args_[a];
        if (arg.kind != ArgKind::kInt || arg.intValue <= 0) continue;
        for (uint32_t k : timeKeys_)
          if (arg.key == k) arg.intValue += timeShift[process];
      }
    }
    first = store_.addArgs(data, &args_[e.firstArg], e.argCount);
    const uint32_t track = static_cast<uint32_t>(trackOf[e.thread]);
    if (e.bits & kPendingInstant) {
      Instant in;
      in.time = e.begin;
      in.name = e.name;
      in.firstArg = first;
      in.argCount = e.argCount;
      in.category = e.category;
      store_.addInstant(data, track, in);
    } else {
      Span s;
      s.begin = e.begin;
      s.end = e.end;
      s.name = e.name;
      s.firstArg = first;
      s.argCount = e.argCount;
      s.category = e.category;
      s.flags = (e.bits & kPendingFailed) ? kSpanFailed : 0;
      store_.addSpan(data, track, s);
    }
  }
  releaseMemory(events_);
  releaseMemory(args_);
  for (const PendingCounter& c : counters_) {
    // A GPU's counters join its owner's rank under the GPU's name, as its lanes do.
    const int32_t device = processes_[c.process].device;
    const std::string_view series = store_.str(c.series);
    const int64_t time = c.time + shift[c.process];
    if (device < 0) {
      store_.addCounter(*dataOf[c.process], series, time, c.value);
    } else {
      store_.addCounter(*dataOf[c.process], onGpu(device, series), time, c.value);
    }
  }
  releaseMemory(counters_);

  uint64_t skipped = 0;
  std::string reasons;
  for (int r = 0; r < kSkipReasons; ++r) {
    if (skipped_[r] == 0) continue;
    skipped += skipped_[r];
    reasons += strCat(reasons.empty() ? "" : ", ", skipped_[r], " ", kSkipText[r]);
  }
  if (skipped > 0)
    store_.addWarning(strCat(skipped, " events in '", source_, "' were skipped: ", reasons));
  if (unclosed > 0)
    store_.addWarning(strCat(unclosed, " \"B\" or \"b\" events in '", source_,
                             "' have no matching end; they are shown ending where the trace "
                             "ends"));
  if (!unknownPh_.empty()) {
    uint64_t count = 0;
    std::string kinds;
    for (const auto& [ph, n] : unknownPh_) {
      count += n;
      kinds += strCat(kinds.empty() ? "" : ", ", "\"", ph, "\" x", n);
    }
    store_.addWarning(strCat(count, " events in '", source_,
                             "' are of kinds the viewer does not show and were left out (ph ",
                             kinds, ")"));
  }
  if (cutEvent_)
    store_.addWarning(strCat("'", source_,
                             "' ends inside an event (cut off while being written?); the ",
                             eventsSeen_, " complete events before it were read"));
  if (unclosedArray_)
    store_.addWarning(strCat("'", source_,
                             "' ends without closing its event array (a trace still being "
                             "written?); its complete events were read"));
  if (replacedBytes_ > 0)
    store_.addWarning(strCat("'", source_, "' has ", replacedBytes_,
                             " bytes that are not UTF-8; they are shown as '?'"));
  store_.finalize();
}

}  // namespace ringx::model::chrome_detail
