// The hang report (see hang_report.h for what each verdict means).
//
// Entries are matched across ranks by (group, seq): group by name and id (the
// hash of its token), so that a group's dumps from an older job in the same
// directory never mix in. A seq below the oldest one a rank's ring still holds
// counts as finished there: the ring only lets go of entries that many
// collectives ago, and a collective stuck on that rank would have stopped the
// later ones from starting.
#include "analysis/hang_report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "base/error.h"
#include "base/format.h"
#include "base/text.h"

namespace ringx::trace {
namespace {

constexpr size_t kMaxMismatches = 3;
// Clocks of different hosts disagree by about this much: "late" needs more.
constexpr int64_t kLateSlackNs = 5'000'000;

// Sizes that every rank of a collective passes alike (gather, scatter and
// all-to-all sizes differ between the root and the others, or by design), in
// ringx's names and torch's alike: "allreduce", "all_reduce", "_all_gather_base",
// "reduce_scatter_tensor" are one op each without their underscores and suffix.
bool bytesMustAgree(const std::string& op) {
  std::string name;
  for (char c : op)
    if (c != '_') name += c;
  for (const char* suffix : {"base", "intotensor", "tensor"}) {
    const std::string s = suffix;
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      name.resize(name.size() - s.size());
      break;
    }
  }
  return name == "allreduce" || name == "broadcast" || name == "reduce" || name == "allgather" ||
         name == "reducescatter";
}

// How a rank called a collective, for mismatch detection: "allreduce 4.0 KiB float32 AVG"
// (the op as asked: AVG beside SUM, or two PREMUL_SUM factors, are a mismatch).
std::string callOf(const FlightEntry& e, bool withBytes) {
  std::string text = e.op;
  if (withBytes && e.bytes > 0 && bytesMustAgree(e.op)) text += strCat(" ", formatBytes(e.bytes));
  if (!e.dtype.empty()) text += strCat(" ", e.dtype);
  if (!e.reduceOp.empty()) text += strCat(" ", reduceOpText(e));
  if (e.root >= 0) text += strCat(" root ", e.root);
  return text;
}

// One member of a group as its dump shows it.
struct Member {
  const FlightDump* dump = nullptr;
  const FlightGroup* group = nullptr;
  std::map<int64_t, const FlightEntry*> bySeq;  // the latest entry per seq
  int64_t oldestSeq = -1;                       // the lowest seq the ring still holds
  int64_t newestSeq = -1;                       // the highest seq of any entry
  const FlightEntry* lastStarted = nullptr;     // the highest seq that started

  bool finished(int64_t seq) const {
    if (seq < oldestSeq) return true;  // left the ring long ago
    auto it = bySeq.find(seq);
    if (it == bySeq.end()) return seq <= newestSeq;  // a gap: not recorded, not pending
    return it->second->state == FlightState::kFinished;
  }
};

Member memberOf(const FlightDump& dump, const FlightGroup& group) {
  Member m;
  m.dump = &dump;
  m.group = &group;
  for (const FlightEntry& e : group.entries) {
    if (e.seq < 0) continue;
    auto [it, added] = m.bySeq.try_emplace(e.seq, &e);
    if (!added && e.id > it->second->id) it->second = &e;
  }
  if (!m.bySeq.empty()) {
    m.oldestSeq = m.bySeq.begin()->first;
    m.newestSeq = m.bySeq.rbegin()->first;
  }
  for (auto it = m.bySeq.rbegin(); it != m.bySeq.rend(); ++it) {
    if (it->second->state != FlightState::kIssued) {
      m.lastStarted = it->second;
      break;
    }
  }
  return m;
}

// Each member's calls whose seq is sure, by group rank and seq.
using CallsBySeq = std::map<int32_t, std::map<int64_t, const FlightEntry*>>;

// The seqs at which members called different things, lowest first: one rule for ringx's dumps
// and torch's.
std::vector<HangMismatch> findMismatches(const CallsBySeq& members) {
  std::set<int64_t> seqs;
  for (const auto& [rank, calls] : members)
    for (const auto& [seq, e] : calls) seqs.insert(seq);
  std::vector<HangMismatch> out;
  for (int64_t seq : seqs) {
    std::vector<std::pair<int32_t, const FlightEntry*>> calls;
    for (const auto& [rank, byseq] : members) {
      auto it = byseq.find(seq);
      if (it != byseq.end()) calls.emplace_back(rank, it->second);
    }
    if (calls.size() < 2) continue;
    // Bytes compare only where every rank recorded them (0: the caller did not say).
    bool allBytes = true;
    for (const auto& [rank, e] : calls) allBytes &= e->bytes > 0;
    HangMismatch mismatch;
    mismatch.seq = seq;
    for (const auto& [rank, e] : calls) {
      const std::string call = callOf(*e, allBytes);
      auto it = std::find_if(mismatch.calls.begin(), mismatch.calls.end(),
                             [&](const auto& c) { return c.first == call; });
      if (it == mismatch.calls.end())
        mismatch.calls.push_back({call, {rank}});
      else
        it->second.push_back(rank);
    }
    if (mismatch.calls.size() > 1) {
      out.push_back(std::move(mismatch));
      if (out.size() == kMaxMismatches) break;
    }
  }
  return out;
}

GroupHang analyzeGroup(const std::string& name, int32_t size,
                       const std::map<int32_t, Member>& members) {
  GroupHang g;
  g.name = name;
  g.size = size;
  g.dumped = static_cast<int32_t>(members.size());
  // What every rank that started a collective called (a queued entry's seq is a guess and its
  // dtype unknown: it does not count).
  CallsBySeq started;
  for (const auto& [rank, m] : members) {
    auto& calls = started[rank];
    for (const auto& [seq, e] : m.bySeq)
      if (e->state != FlightState::kIssued) calls[seq] = e;
  }
  g.mismatches = findMismatches(started);
  std::set<int64_t> seqs;
  for (const auto& [rank, m] : members)
    for (const auto& [seq, e] : m.bySeq) seqs.insert(seq);
  for (int64_t seq : seqs) {
    bool everywhere = true;
    for (const auto& [rank, m] : members) everywhere &= m.finished(seq);
    if (!everywhere) {
      g.seq = seq;
      break;
    }
  }
  if (g.seq < 0) {
    g.complete = true;
    g.lastSeq = seqs.empty() ? -1 : *seqs.rbegin();
    return g;
  }
  // Name the collective by what the ranks that got to it recorded (a started
  // entry over a queued one: its fields are the real call's).
  const FlightEntry* named = nullptr;
  for (const auto& [rank, m] : members) {
    auto it = m.bySeq.find(g.seq);
    if (it == m.bySeq.end()) continue;
    if (!named || (named->state == FlightState::kIssued && it->second->state != named->state))
      named = it->second;
  }
  if (named) {
    g.op = named->op;
    g.dtype = named->dtype;
    g.reduceOp = reduceOpText(*named);
    g.bytes = named->bytes;
    g.root = named->root;
  }
  // Verdicts.
  int64_t gaveUpWall = INT64_MAX;  // the first failure's end, on the wall clock
  int32_t gaveUpRank = -1;
  for (int32_t r = 0; r < size; ++r) {
    HangRank h;
    h.groupRank = r;
    auto found = members.find(r);
    if (found == members.end()) {
      g.ranks.push_back(h);  // kNoDump
      continue;
    }
    const Member& m = found->second;
    h.rank = m.dump->rank;
    if (m.lastStarted) {
      h.lastSeq = m.lastStarted->seq;
      h.lastOp = m.lastStarted->op;
      h.lastState = m.lastStarted->state;
    }
    auto it = m.bySeq.find(g.seq);
    if (it == m.bySeq.end()) {
      h.verdict = m.finished(g.seq) ? HangVerdict::kFinished : HangVerdict::kNeverArrived;
    } else {
      const FlightEntry& e = *it->second;
      switch (e.state) {
        case FlightState::kFinished:
          h.verdict = HangVerdict::kFinished;
          break;
        case FlightState::kFailed:
          h.verdict = HangVerdict::kFailed;
          h.error = e.error;
          if (e.startNs > 0 && e.endNs >= e.startNs) h.elapsedNs = e.endNs - e.startNs;
          if (e.endNs > 0 && m.dump->wallNsOf(e.endNs) < gaveUpWall) {
            gaveUpWall = m.dump->wallNsOf(e.endNs);
            gaveUpRank = r;
          }
          break;
        case FlightState::kStarted:
          h.verdict = HangVerdict::kStuck;
          h.elapsedNs = m.dump->steadyNs - e.startNs;
          break;
        case FlightState::kIssued:
          h.verdict = HangVerdict::kQueued;
          if (e.issueNs > 0) h.elapsedNs = m.dump->steadyNs - e.issueNs;
          break;
      }
    }
    g.ranks.push_back(h);
  }
  // Late arrivals: started only after another rank had given up on it.
  if (gaveUpRank >= 0) {
    for (HangRank& h : g.ranks) {
      if (h.groupRank == gaveUpRank || h.rank < 0) continue;
      const Member& m = members.at(h.groupRank);
      auto it = m.bySeq.find(g.seq);
      if (it == m.bySeq.end() || it->second->startNs <= 0) continue;
      const int64_t late = m.dump->wallNsOf(it->second->startNs) - gaveUpWall;
      if (late > kLateSlackNs) {
        h.lateNs = late;
        h.lateAfter = gaveUpRank;
      }
    }
  }
  return g;
}

// A torch entry as the report names a call (torch_flight.h says how).
FlightEntry torchCall(const TorchFlightEntry& x) {
  FlightEntry e;
  e.seq = x.seq;
  e.op = x.call();
  e.dtype = x.dtype;
  e.bytes = x.bytes();
  e.state = x.flightState();
  return e;
}

std::string whoIs(const HangRank& h) {
  if (h.rank < 0 || h.rank == h.groupRank) return strCat("rank ", h.groupRank);
  return strCat("rank ", h.groupRank, " (process rank ", h.rank, ")");
}

}  // namespace

const char* hangVerdictName(HangVerdict verdict) {
  switch (verdict) {
    case HangVerdict::kFinished:
      return "finished";
    case HangVerdict::kFailed:
      return "failed";
    case HangVerdict::kStuck:
      return "stuck";
    case HangVerdict::kQueued:
      return "queued";
    case HangVerdict::kNeverArrived:
      return "never arrived";
    case HangVerdict::kNoDump:
      return "no dump";
    case HangVerdict::kOtherCall:
      return "called something else";
  }
  return "?";
}

HangReport analyzeHang(const FlightDumpSet& set) {
  HangReport report;
  report.path = set.path;
  report.warnings = set.warnings;
  // Groups by (name, id); members by group rank.
  struct GroupKey {
    std::string name, id;
    bool operator<(const GroupKey& o) const { return name != o.name ? name < o.name : id < o.id; }
  };
  std::map<GroupKey, std::pair<int32_t, std::map<int32_t, Member>>> groups;
  for (const FlightDump& d : set.dumps) {
    if (report.job.empty()) report.job = d.job;
    report.worldSize = std::max(report.worldSize, d.worldSize);
    report.dumpedRanks.push_back(d.rank);
    report.reasons.emplace_back(d.rank, d.reason);
    for (const FlightGroup& g : d.groups) {
      auto& [size, members] = groups[GroupKey{g.name, g.id}];
      size = std::max(size, g.size);
      if (!members.try_emplace(g.rank, memberOf(d, g)).second) {
        report.warnings.push_back(strCat("group '", g.name, "': two dumps claim its rank ", g.rank,
                                         "; using rank ", members.at(g.rank).dump->rank, "'s"));
      }
    }
  }
  std::sort(report.dumpedRanks.begin(), report.dumpedRanks.end());
  for (int32_t r = 0; r < report.worldSize; ++r) {
    if (!std::binary_search(report.dumpedRanks.begin(), report.dumpedRanks.end(), r))
      report.missingRanks.push_back(r);
  }
  for (const auto& [key, value] : groups)
    report.groups.push_back(analyzeGroup(key.name, value.first, value.second));
  std::stable_sort(report.groups.begin(), report.groups.end(),
                   [](const GroupHang& a, const GroupHang& b) {
                     const bool x = !a.complete || !a.mismatches.empty();
                     const bool y = !b.complete || !b.mismatches.empty();
                     return x && !y;
                   });
  return report;
}

HangReport analyzeTorchHang(const TorchFlightSet& set) {
  HangReport report;
  report.path = set.path;
  report.warnings = set.warnings;
  // Who is in each group (torch_flight.h), and per rank what its dump says of it.
  const TorchJobGroups job = torchGroupMembers(set);
  report.worldSize = job.worldSize;
  struct Seen {
    std::map<int32_t, const TorchFlightGroup*> status;  // per rank: its dump's view of the group
    std::map<int32_t, std::map<int64_t, const TorchFlightEntry*>> collectives;  // rank, seq
  };
  std::map<std::string, Seen> seenOf;
  std::map<int32_t, const TorchFlightDump*> dumpOf;
  std::string version, ncclVersion, backend;
  for (const TorchFlightDump& d : set.dumps) {
    dumpOf[d.rank] = &d;
    report.dumpedRanks.push_back(d.rank);
    if (version.empty()) {
      version = d.version;
      ncclVersion = d.ncclVersion;
    }
    if (backend.empty()) backend = d.backend;  // a rank that issued nothing does not say
    const auto pending = std::count_if(d.entries.begin(), d.entries.end(),
                                       [](const TorchFlightEntry& e) { return !e.retired; });
    report.reasons.emplace_back(
        d.rank, d.empty() ? std::string("nothing (no entries, no process group's status)")
                : static_cast<size_t>(pending) == d.entries.size()
                    ? strCat(pending, " ops not retired")
                    : strCat(pending, " of ", d.entries.size(), " ops not retired"));
    for (const TorchFlightGroup& g : d.groups)
      if (!g.name.empty()) seenOf[g.name].status[d.rank] = &g;
    // Its collectives on each member (point-to-point ops count apart, per peer).
    for (const TorchFlightEntry& e : d.entries)
      if (!e.group.empty() && !e.p2p) seenOf[e.group].collectives[d.rank][e.seq] = &e;
  }
  report.producer = "torch Flight Recorder";
  if (!version.empty()) {
    const std::string lib = !ncclVersion.empty() ? ", NCCL " + ncclVersion
                            : backend.empty()    ? std::string()
                                                 : ", " + backend;
    report.producer += strCat(" (version ", version, lib, ")");
  }
  for (int32_t r = 0; r < report.worldSize; ++r) {
    if (!dumpOf.count(r)) report.missingRanks.push_back(r);
  }
  for (const TorchGroupMembers& group : job.groups) {
    if (group.p2p && !group.collectives) continue;
    const std::vector<int32_t>& members = group.ranks;
    Seen& seen = seenOf[group.name];
    // A member's pg_status for the group; a dump that ties every status it has to a group and
    // has none of this one issued nothing in it (torch's seqs start at 1).
    TorchFlightGroup none;
    none.statusKnown = true;
    none.lastEnqueued = none.lastCompleted = 0;
    auto statusOf = [&](int32_t r) -> const TorchFlightGroup* {
      auto m = seen.status.find(r);
      if (m != seen.status.end() && m->second->statusKnown) return m->second;
      auto d = dumpOf.find(r);
      return d != dumpOf.end() && d->second->statusComplete ? &none : nullptr;
    };
    int32_t known = 0;  // members whose dump has the group's status
    int64_t least = -1, most = -1;
    for (int32_t r : members) {
      const TorchFlightGroup* status = statusOf(r);
      if (!status) continue;
      ++known;
      least = known == 1 ? status->lastEnqueued : std::min(least, status->lastEnqueued);
      most = std::max(most, status->lastEnqueued);
    }
    if (known == 0) continue;
    // Every member's calls by group rank, as the report names them.
    std::map<int32_t, std::map<int64_t, FlightEntry>> callsOf;
    CallsBySeq calls;
    for (size_t k = 0; k < members.size(); ++k) {
      const int32_t groupRank = static_cast<int32_t>(k);
      for (const auto& [seq, e] : seen.collectives[members[k]]) {
        if (seq < 0) continue;
        calls[groupRank][seq] = &(callsOf[groupRank][seq] = torchCall(*e));
      }
    }
    GroupHang g;
    g.name = group.label();
    g.size = static_cast<int32_t>(members.size());
    g.dumped = known;
    g.membersFromDumps = group.fromDumps;
    g.mismatches = findMismatches(calls);
    int64_t seq = least < most ? least + 1 : -1;
    if (!g.mismatches.empty() && (seq < 0 || g.mismatches[0].seq < seq)) seq = g.mismatches[0].seq;
    if (seq < 0) {
      for (int32_t r : members) {
        const TorchFlightGroup* status = statusOf(r);
        if (!status) continue;
        // Past the status's last completed and not retired: unfinished. A retired entry is
        // over whatever the status says, since gloo's two worker threads each write
        // last_completed_collective as they finish, so it can end lower than a seq already
        // retired and stay so (NCCL's dumps hold only entries not yet retired).
        for (const auto& [s, e] : seen.collectives[r])
          if (s > status->lastCompleted && !e->retired && (seq < 0 || s < seq)) seq = s;
      }
      if (seq < 0 && known < g.size) seq = most + 1;
    }
    if (seq < 0) {
      g.complete = true;
      g.lastSeq = most;
      report.groups.push_back(std::move(g));
      continue;
    }
    g.seq = seq;
    // Where members called different things at it, the collective is what most of them called
    // (the lowest member's among equals); the others called something else.
    const HangMismatch* split =
        !g.mismatches.empty() && g.mismatches[0].seq == seq ? &g.mismatches[0] : nullptr;
    const std::pair<std::string, std::vector<int32_t>>* agreed = nullptr;
    if (split) {
      for (const auto& c : split->calls)
        if (!agreed || c.second.size() > agreed->second.size()) agreed = &c;
    }
    auto agrees = [&](int32_t groupRank) {
      return !agreed || std::find(agreed->second.begin(), agreed->second.end(), groupRank) !=
                            agreed->second.end();
    };
    // What the collective was: the lowest agreeing member's entry of it.
    for (const auto& [groupRank, bySeq] : calls) {
      auto e = bySeq.find(seq);
      if (e == bySeq.end() || !agrees(groupRank)) continue;
      g.op = e->second->op;
      g.dtype = e->second->dtype;
      g.bytes = e->second->bytes;
      break;
    }
    for (size_t k = 0; k < members.size(); ++k) {
      const int32_t r = members[k];
      const auto& mine = seen.collectives[r];
      HangRank h;
      h.groupRank = static_cast<int32_t>(k);
      h.rank = dumpOf.count(r) ? r : -1;
      const TorchFlightGroup* status = statusOf(r);
      if (!status) {
        h.verdict = HangVerdict::kNoDump;
      } else if (status->lastEnqueued < seq) {
        h.verdict = HangVerdict::kNeverArrived;
        h.lastSeq = status == &none ? -1 : status->lastEnqueued;  // -1: it issued none
        auto last = mine.find(h.lastSeq);
        if (last != mine.end()) {
          h.lastOp = last->second->op;
          h.lastState = callsOf[h.groupRank][h.lastSeq].state;
        } else if (h.lastSeq >= 0) {
          h.lastOp = "collective";
          h.lastState = FlightState::kFinished;  // retired: no longer in the dump
        }
      } else if (auto e = mine.find(seq); e != mine.end()) {
        const TorchFlightEntry& x = *e->second;
        if (!agrees(h.groupRank)) {
          h.verdict = HangVerdict::kOtherCall;
          for (const auto& c : split->calls)
            if (std::find(c.second.begin(), c.second.end(), h.groupRank) != c.second.end())
              h.call = c.first;
        } else if (x.state == "started") {
          h.verdict = HangVerdict::kStuck;
        } else if (x.state == "completed") {
          h.verdict = HangVerdict::kFinished;
        } else if (x.retired) {
          // torch's reading of a retired entry that never completed: its work timed out.
          h.verdict = HangVerdict::kFailed;
          h.error = "retired without completing: timed out or failed (the dump keeps no error)";
        } else {
          h.verdict = HangVerdict::kQueued;
          h.startUnrecorded = dumpOf.at(r)->backend == "gloo";
        }
      } else {
        h.verdict = HangVerdict::kFinished;  // enqueued, and retired since
      }
      g.ranks.push_back(std::move(h));
    }
    report.groups.push_back(std::move(g));
  }
  // The groups a member never arrived at, called something else at, or said nothing of first:
  // the others wait on them.
  auto culprit = [](const GroupHang& g) {
    return std::any_of(g.ranks.begin(), g.ranks.end(),
                       [](const HangRank& h) { return isHangCulprit(h.verdict); });
  };
  std::stable_sort(report.groups.begin(), report.groups.end(),
                   [&](const GroupHang& a, const GroupHang& b) {
                     if (culprit(a) != culprit(b)) return culprit(a);
                     return !a.complete && b.complete;
                   });
  return report;
}

bool isHangCulprit(HangVerdict verdict) {
  return verdict == HangVerdict::kNeverArrived || verdict == HangVerdict::kNoDump ||
         verdict == HangVerdict::kOtherCall;
}

std::string formatGroupHangTitle(const GroupHang& g) {
  const std::string title =
      strCat("group '", g.name, "' (", g.size, " ranks, ", g.dumped, " dumped)");
  if (g.complete) {
    return strCat(title, ": every collective finished on every rank that dumped",
                  g.lastSeq >= 0 ? strCat(" (last seq ", g.lastSeq, ")") : std::string());
  }
  std::string what = g.op.empty() ? std::string("collective") : g.op;
  std::vector<std::string> details;
  if (g.bytes > 0) details.push_back(formatBytes(g.bytes));
  if (!g.dtype.empty()) details.push_back(g.dtype);
  if (!g.reduceOp.empty()) details.push_back(g.reduceOp);
  if (g.root >= 0) details.push_back(strCat("root ", g.root));
  std::string detail;
  for (const auto& d : details) detail += (detail.empty() ? "" : ", ") + d;
  return strCat(title, ": ", what, " seq ", g.seq, detail.empty() ? "" : " (" + detail + ")",
                " did not finish on every rank");
}

std::vector<std::string> formatGroupHangVerdicts(const GroupHang& g) {
  std::vector<std::string> out;
  // The culprits first.
  for (HangVerdict v : {HangVerdict::kNeverArrived, HangVerdict::kOtherCall, HangVerdict::kNoDump,
                        HangVerdict::kQueued, HangVerdict::kStuck, HangVerdict::kFailed}) {
    std::vector<int32_t> ranks;
    for (const HangRank& h : g.ranks)
      if (h.verdict == v) ranks.push_back(h.groupRank);
    if (!ranks.empty()) out.push_back(strCat(hangVerdictName(v), ": ", rankList(ranks)));
  }
  std::vector<int32_t> late;
  for (const HangRank& h : g.ranks)
    if (h.lateNs > 0) late.push_back(h.groupRank);
  if (!late.empty())
    out.push_back(strCat("arrived late: ", rankList(late),
                         " (started it after another rank had given up: the one the others "
                         "waited for)"));
  return out;
}

std::string formatHangRank(const HangRank& h) {
  std::string out = strCat(whoIs(h), ": ", hangVerdictName(h.verdict));
  switch (h.verdict) {
    case HangVerdict::kNeverArrived:
      out += h.lastSeq >= 0 ? strCat(" (its last collective was ", h.lastOp, " seq ", h.lastSeq,
                                     ", ", flightStateName(h.lastState), ")")
                            : std::string(" (it started no collective in this group)");
      break;
    case HangVerdict::kQueued:
      out += strCat(
          h.elapsedNs > 0 ? strCat(" (issued ", formatDuration(h.elapsedNs), " before its dump")
                          : std::string(" (issued"),
          h.startUnrecorded ? ", not finished; gloo records no start" : ", not started",
          h.lastSeq >= 0
              ? strCat("; its thread was at seq ", h.lastSeq, ", ", flightStateName(h.lastState))
              : std::string(),
          ")");
      break;
    case HangVerdict::kStuck:
      out += strCat(" (started ", formatDuration(h.elapsedNs), " before its dump)");
      break;
    case HangVerdict::kFailed:
      out += strCat(h.elapsedNs > 0 ? strCat(" after ", formatDuration(h.elapsedNs)) : "", ": ",
                    h.error);
      break;
    case HangVerdict::kOtherCall:
      out += strCat(" (", h.call, ")");
      break;
    case HangVerdict::kNoDump:
      out += h.rank >= 0 ? " (its dump says nothing of this group)"
                         : " (wrote none: killed, or its dump directory is on another host)";
      break;
    case HangVerdict::kFinished:
      break;
  }
  if (h.lateNs > 0)
    out += strCat("; started ", formatDuration(h.lateNs), " after rank ", h.lateAfter, " gave up");
  return out;
}

std::string formatHangReport(const HangReport& report) {
  std::string out;
  out += strCat(report.producer, ": ", report.dumpedRanks.size(), " of ", report.worldSize,
                " ranks dumped in ", report.path,
                report.job.empty() ? std::string() : " (job " + report.job + ")", "\n");
  if (!report.missingRanks.empty()) {
    out += strCat("  no dump from ", rankList(report.missingRanks),
                  ": killed, or its host is unreachable; the report goes by the others\n");
  }
  // Why each rank dumped, in brief: the errors come in full below.
  constexpr size_t kReasonChars = 120;
  for (const auto& [rank, reason] : report.reasons) {
    out += strCat("  rank ", rank, " dumped: ", reason.substr(0, kReasonChars),
                  reason.size() > kReasonChars ? "..." : "", "\n");
  }
  for (const GroupHang& g : report.groups) {
    out += strCat("\n", formatGroupHangTitle(g), "\n");
    if (!g.complete) {
      if (g.membersFromDumps) {
        std::vector<int32_t> members;
        for (const HangRank& h : g.ranks) members.push_back(h.rank);
        out += strCat("  members: ", rankList(members),
                      " (the dumps list none: the ranks whose dumps name the group)\n");
      }
      // The culprits first, by verdict, then every rank's line.
      for (const std::string& line : formatGroupHangVerdicts(g)) out += strCat("  ", line, "\n");
      for (const HangRank& h : g.ranks) out += strCat("  ", formatHangRank(h), "\n");
    }
    for (const HangMismatch& m : g.mismatches) {
      out += strCat("  mismatch at seq ", m.seq, ":");
      for (size_t i = 0; i < m.calls.size(); ++i)
        out += strCat(i ? "; " : " ", m.calls[i].first, " (", rankList(m.calls[i].second), ")");
      out += "\n";
    }
  }
  for (const std::string& w : report.warnings) out += strCat("warning: ", w, "\n");
  return out;
}

}  // namespace ringx::trace
