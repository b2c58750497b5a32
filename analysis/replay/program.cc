// The replay program's runner (see program.h for the model and why it is built this way).
#include "analysis/replay/program.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>

#include "analysis/figures.h"
#include "analysis/replay/core_shares.h"

namespace ringx::replay {

using Kind = PathSegment::Kind;

void Program::beginStep() {
  ops.push_back({ProgramOp::Type::kStepBegin});
  ++steps;
}

void Program::compute(Kind kind, size_t slot, int64_t owner) {
  ops.push_back({ProgramOp::Type::kCompute, kind, slot, 0, steps ? steps - 1 : 0, owner});
}

size_t Program::issue(Kind kind, int64_t bytes, size_t lane, int64_t owner, bool prefetched) {
  ProgramCollective c;
  c.kind = kind;
  c.bytes = bytes;
  c.lane = lane;
  c.owner = owner;
  c.step = steps ? steps - 1 : 0;
  c.prefetched = prefetched;
  collectives.push_back(c);
  ops.push_back({ProgramOp::Type::kIssue, kind, 0, collectives.size() - 1});
  return collectives.size() - 1;
}

void Program::wait(size_t c) { ops.push_back({ProgramOp::Type::kWait, collectives[c].kind, 0, c}); }

std::vector<std::pair<int64_t, int64_t>> mergeIntervals(
    std::vector<std::pair<int64_t, int64_t>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  std::vector<std::pair<int64_t, int64_t>> merged;
  for (const auto& f : intervals) {
    if (f.second <= f.first) continue;
    if (!merged.empty() && f.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, f.second);
    } else {
      merged.push_back(f);
    }
  }
  return merged;
}

int64_t coveredNs(const std::vector<std::pair<int64_t, int64_t>>& merged, int64_t begin,
                  int64_t end) {
  int64_t total = 0;
  for (const auto& f : merged) {
    total += std::max<int64_t>(0, std::min(end, f.second) - std::max(begin, f.first));
  }
  return total;
}

std::optional<ContentionFit> fitContention(const ContentionSamples& all) {
  // A stretch covered (nearly) end to end by a collective says nothing: its overlap is its own
  // duration, so the two grow together whatever the cores do. Only stretches a collective
  // covers in part, where the overlap is set by the collective, are kept.
  std::vector<std::vector<std::pair<double, double>>> stretches;
  for (const auto& [stretch, points] : all) {
    std::vector<std::pair<double, double>> kept;
    for (const auto& [ns, over] : points) {
      if (over * 10 < ns * 9) kept.emplace_back(static_cast<double>(ns), static_cast<double>(over));
    }
    if (kept.size() >= 2) stretches.push_back(std::move(kept));
  }
  // Least squares with a mean of its own per stretch (each stretch's compute differs), one
  // slope for all: num / den. Its standard error from the residuals says how much the
  // recording pins it down.
  double num = 0, den = 0;
  size_t points = 0;
  std::vector<std::pair<double, double>> means;
  for (const auto& stretch : stretches) {
    double d = 0, o = 0;
    for (const auto& [ns, over] : stretch) {
      d += ns;
      o += over;
    }
    d /= static_cast<double>(stretch.size());
    o /= static_cast<double>(stretch.size());
    means.emplace_back(d, o);
    for (const auto& [ns, over] : stretch) {
      num += (ns - d) * (over - o);
      den += (over - o) * (over - o);
    }
    points += stretch.size();
  }
  if (den <= 0) return std::nullopt;
  const double slope = num / den;
  double residuals = 0;
  for (size_t i = 0; i < stretches.size(); ++i) {
    for (const auto& [ns, over] : stretches[i]) {
      const double r = (ns - means[i].first) - slope * (over - means[i].second);
      residuals += r * r;
    }
  }
  // Degrees of freedom: the points less a mean per stretch and the slope.
  const size_t fitted = stretches.size() + 1;
  const double standardError =
      points > fitted ? std::sqrt(residuals / static_cast<double>(points - fitted) / den)
                      : std::numeric_limits<double>::infinity();
  return ContentionFit{std::clamp(slope, 0.0, 0.95), standardError};
}

std::pair<double, bool> modelContention(const ContentionSamples& samples, const HostCores& host,
                                        int64_t worldSize) {
  const double cores = coresContention(host, worldSize);
  const std::optional<ContentionFit> fitted = fitContention(samples);
  if (!fitted || std::isinf(fitted->standardError)) return {cores, false};
  if (fitted->standardError == 0) return {fitted->value, true};
  // The cores' value is where the constant starts; the recording moves it as far as it pins
  // the constant down (inverse-variance weights): a fit from a few noisy overlaps, which two
  // recordings of one job put at 0 and at 0.93, stays near the cores', and a fit the
  // recording is sure of is taken as it is.
  const double fitWeight = 1.0 / (fitted->standardError * fitted->standardError);
  const double coresWeight = 1.0 / (kCoresContentionSpread * kCoresContentionSpread);
  return {std::clamp((fitted->value * fitWeight + cores * coresWeight) / (fitWeight + coresWeight),
                     0.0, 0.95),
          true};
}

size_t replayedRanks(size_t recorded, int64_t worldSize) {
  const size_t world = worldSize > 0 ? static_cast<size_t>(worldSize) : 0;
  return std::max(recorded, std::min(world, std::max(recorded, kMostReplayedRanks)));
}

RecordedSource recordedSourceOf(size_t rank, size_t step, size_t recorded, size_t steps) {
  if (recorded == 0) return {0, step};
  const size_t turn = rank / recorded;
  // The first step is every rank's start (program.h): it stays the first.
  const size_t s = step == 0 || steps < 2 ? step : 1 + (step - 1 + turn) % (steps - 1);
  return {rank % recorded, s};
}

std::vector<double> linkSharedNs(const std::vector<LaneSpan>& spans) {
  // A sweep over the spans' ends: between two consecutive ends, the lanes in flight are fixed.
  std::vector<int64_t> at;
  for (const LaneSpan& s : spans) {
    if (s.end > s.begin) {
      at.push_back(s.begin);
      at.push_back(s.end);
    }
  }
  std::sort(at.begin(), at.end());
  at.erase(std::unique(at.begin(), at.end()), at.end());
  std::vector<size_t> order(spans.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return spans[a].begin < spans[b].begin; });
  std::vector<double> lost(spans.size(), 0);
  std::vector<size_t> active;  // spans in flight over the current stretch
  std::vector<size_t> lanes;
  size_t next = 0;
  for (size_t k = 0; k + 1 < at.size(); ++k) {
    const int64_t b = at[k], e = at[k + 1];
    active.erase(
        std::remove_if(active.begin(), active.end(), [&](size_t i) { return spans[i].end <= b; }),
        active.end());
    for (; next < order.size() && spans[order[next]].begin <= b; ++next) {
      const LaneSpan& s = spans[order[next]];
      if (s.end > b) active.push_back(order[next]);
    }
    lanes.clear();
    for (size_t i : active) lanes.push_back(spans[i].lane);
    std::sort(lanes.begin(), lanes.end());
    const size_t inFlight =
        static_cast<size_t>(std::unique(lanes.begin(), lanes.end()) - lanes.begin());
    if (inFlight < 2) continue;
    const double share = static_cast<double>(e - b) * static_cast<double>(inFlight - 1) /
                         static_cast<double>(inFlight);
    for (size_t i : active) lost[i] += share;
  }
  return lost;
}

namespace {

// At most this many passes of the cores' shares over the last run's schedule.
constexpr int kSharePasses = 12;
// At most this many passes of the link's shares alone.
constexpr int kLinkPasses = 20;

struct TimelineEntry {
  Kind kind;
  int64_t owner, begin, end;
  bool wait;
  size_t collective;  // a wait's
};

// One run of the program: every rank's clock, and each collective's times.
struct Run {
  std::vector<int64_t> t;                            // per rank: when its last queue finished
  std::vector<std::vector<int64_t>> issued;          // [collective][rank]; -1: not (yet)
  std::vector<int64_t> startAt, endAt, laneBefore;   // laneBefore: the lane's previous end
  std::vector<size_t> lastIssuer;                    // index into the ranks
  std::vector<size_t> lanePrevious;                  // the lane's collective before; npos: none
  std::vector<std::vector<int64_t>> stepBegin;       // [rank][step]
  std::vector<std::vector<TimelineEntry>> timeline;  // per rank: its host's compute and waits
  std::vector<std::vector<int64_t>> computeBegin;    // [rank][op] (compute ops)
  // Streams: each op's begin and end, and what made it begin (kNoOp: its queue's clock or the
  // launch; else the op it waited for), for the critical path.
  std::vector<std::vector<int64_t>> opBegin, opEnd;  // [rank][op]
  std::vector<std::vector<size_t>> cause;            // [rank][op]
  std::vector<std::vector<size_t>> issueOp;          // [collective][rank]
};

// Per rank, per queue, the rank's ops on that queue in program order.
std::vector<std::vector<std::vector<size_t>>> queuesOf(const Program& p, size_t nr) {
  std::vector<std::vector<std::vector<size_t>>> q(nr);
  for (size_t r = 0; r < nr; ++r) {
    const std::vector<ProgramOp>& ops = p.opsOf(r);
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].queue >= q[r].size()) q[r].resize(ops[i].queue + 1);
      q[r][ops[i].queue].push_back(i);
    }
    if (q[r].empty()) q[r].resize(1);
  }
  return q;
}

Run simulate(const Program& p, const std::vector<std::vector<int64_t>>& dur,
             const std::vector<int64_t>& collectiveNs,
             const std::vector<std::vector<size_t>>& lanes,
             const std::vector<std::vector<std::vector<size_t>>>& queues, size_t nr,
             const ProgramTimes& times) {
  const size_t nc = p.collectives.size();
  Run x;
  x.t.assign(nr, 0);
  x.issued.assign(nc, std::vector<int64_t>(nr, -1));
  x.startAt.assign(nc, -1);
  x.endAt.assign(nc, -1);
  x.laneBefore.assign(nc, 0);
  x.lastIssuer.assign(nc, 0);
  x.lanePrevious.assign(nc, static_cast<size_t>(-1));
  x.stepBegin.assign(nr, {});
  x.timeline.assign(nr, {});
  x.computeBegin.resize(nr);
  x.opBegin.resize(nr);
  x.opEnd.resize(nr);
  x.cause.resize(nr);
  x.issueOp.assign(nc, std::vector<size_t>(nr, kNoOp));
  // Per rank and queue: the next op's place in the queue, and the queue's clock.
  std::vector<std::vector<size_t>> pc(nr);
  std::vector<std::vector<int64_t>> clock(nr);
  for (size_t r = 0; r < nr; ++r) {
    const size_t n = p.opsOf(r).size();
    x.computeBegin[r].assign(n, 0);
    x.opBegin[r].assign(n, -1);
    x.opEnd[r].assign(n, -1);
    x.cause[r].assign(n, kNoOp);
    pc[r].assign(queues[r].size(), 0);
    const int64_t start = r < times.startNs.size() ? times.startNs[r] : 0;
    clock[r].assign(queues[r].size(), start);
  }
  std::vector<size_t> laneNext(lanes.size(), 0);
  std::vector<int64_t> laneFree(lanes.size(), 0);
  auto isMember = [&](size_t c, size_t r) {
    const std::vector<size_t>& m = p.collectives[c].members;
    return m.empty() || std::find(m.begin(), m.end(), r) != m.end();
  };
  for (;;) {
    bool progress = false;
    for (size_t r = 0; r < nr; ++r) {
      const std::vector<ProgramOp>& ops = p.opsOf(r);
      const std::vector<size_t>& deps = p.depsOf(r);
      const int64_t latency = r < times.launchNs.size() ? times.launchNs[r] : 0;
      for (size_t q = 0; q < queues[r].size(); ++q) {
        const std::vector<size_t>& list = queues[r][q];
        while (pc[r][q] < list.size()) {
          const size_t i = list[pc[r][q]];
          const ProgramOp& op = ops[i];
          // What it waits for besides its queue: its launch, the ops it depends on.
          int64_t begin = clock[r][q];
          size_t why = kNoOp;
          bool ready = true;
          if (op.launchedBy != kNoOp) {
            const int64_t launched = x.opBegin[r][op.launchedBy];
            if (launched < 0) ready = false;
            begin = std::max(begin, launched + latency);
          }
          for (uint32_t d = op.firstDep; ready && d < op.firstDep + op.depCount; ++d) {
            const int64_t end = x.opEnd[r][deps[d]];
            if (end < 0) {
              ready = false;
            } else if (end > begin) {
              begin = end;
              why = deps[d];
            }
          }
          if (!ready) break;
          int64_t end = begin;
          if (op.type == ProgramOp::Type::kCompute) {
            const int64_t d = std::max<int64_t>(0, dur[r][i]);
            x.computeBegin[r][i] = begin;
            end = begin + d;
            if (d > 0 && q == 0) x.timeline[r].push_back({op.kind, op.owner, begin, end, false, 0});
          } else if (op.type == ProgramOp::Type::kIssue) {
            x.issued[op.collective][r] = begin;
            x.issueOp[op.collective][r] = i;
          } else if (op.type == ProgramOp::Type::kWait) {
            const int64_t done = x.endAt[op.collective];
            if (done < 0) break;
            if (done > begin) {
              if (q == 0) {
                x.timeline[r].push_back({op.kind, p.collectives[op.collective].owner, begin, done,
                                         true, op.collective});
              }
              end = done;
            }
          } else {
            x.stepBegin[r].push_back(begin);
          }
          x.opBegin[r][i] = begin;
          x.opEnd[r][i] = end;
          x.cause[r][i] = why;
          clock[r][q] = end;
          ++pc[r][q];
          progress = true;
        }
      }
    }
    for (size_t lane = 0; lane < lanes.size(); ++lane) {
      const std::vector<size_t>& list = lanes[lane];
      size_t& next = laneNext[lane];
      while (next < list.size()) {
        const size_t c = list[next];
        int64_t arrive = -1;
        bool all = true;
        for (size_t r = 0; r < nr && all; ++r) {
          if (!isMember(c, r)) continue;
          if (x.issued[c][r] < 0) {
            all = false;
          } else if (x.issued[c][r] >= arrive) {
            arrive = x.issued[c][r];
            x.lastIssuer[c] = r;
          }
        }
        if (!all || arrive < 0) break;
        x.laneBefore[c] = laneFree[lane];
        if (next > 0) x.lanePrevious[c] = list[next - 1];
        x.startAt[c] = std::max(arrive, laneFree[lane]);
        x.endAt[c] = x.startAt[c] + collectiveNs[c];
        laneFree[lane] = x.endAt[c];
        ++next;
        progress = true;
      }
    }
    bool done = true;
    for (size_t r = 0; r < nr && done; ++r) {
      for (size_t q = 0; q < queues[r].size(); ++q) done = done && pc[r][q] == queues[r][q].size();
    }
    if (done) break;
    if (!progress) throw std::logic_error("replay: the schedule deadlocked (a bug)");
  }
  for (size_t r = 0; r < nr; ++r) {
    for (int64_t c : clock[r]) x.t[r] = std::max(x.t[r], c);
  }
  return x;
}

// The critical path of [origin, until) on rank `slow`, walked back from its end: a rank's
// compute goes back to what ran before it on that rank; a wait, to its collective, which began
// either when its lane's previous collective ended (that one is next on the path) or when its
// last rank issued it (that rank's work up to the issue is). Compute of one kind for no bucket
// or unit, back to back on one rank, is one stretch; a collective is on the rank that issued
// it last.
std::vector<PathSegment> criticalPath(const Program& p, const Run& run,
                                      const std::vector<int32_t>& ranks, size_t slow,
                                      int64_t origin, int64_t until) {
  std::vector<PathSegment> path;  // backwards
  auto add = [&](Kind kind, size_t r, int64_t owner, int64_t begin, int64_t end, bool compute) {
    begin = std::max(begin, origin);
    if (end <= begin) return;
    PathSegment seg{kind, ranks[r], owner, begin - origin, end - origin};
    if (compute && owner < 0 && !path.empty() && path.back().kind == kind &&
        path.back().bucket < 0 && path.back().rank == seg.rank &&
        path.back().beginNs == seg.endNs) {
      path.back().beginNs = seg.beginNs;
    } else {
      path.push_back(seg);
    }
  };
  size_t r = slow;
  int64_t t = until;
  size_t total = 0;
  for (size_t k = 0; k < ranks.size(); ++k) total += p.opsOf(k).size();
  // Each step moves t back or goes from a collective to an earlier one; bounded all the same.
  for (size_t guard = 0; t > origin && guard < 4 * (total + p.collectives.size()) + 8; ++guard) {
    const std::vector<TimelineEntry>& line = run.timeline[r];
    // The rank's interval that ends at t (its time is contiguous: compute and waits).
    auto it = std::upper_bound(line.begin(), line.end(), t,
                               [](int64_t at, const TimelineEntry& i) { return at <= i.begin; });
    if (it == line.begin()) break;
    --it;
    if (!it->wait) {
      add(it->kind, r, it->owner, it->begin, std::min(t, it->end), true);
      t = it->begin;
      continue;
    }
    size_t c = it->collective;  // a wait: its collective
    // Back along the lane while each collective waited for the one before it.
    for (;;) {
      const int64_t arrive = run.issued[c][run.lastIssuer[c]];
      add(p.collectives[c].kind, run.lastIssuer[c], p.collectives[c].owner, run.startAt[c],
          run.endAt[c], false);
      const size_t before = run.lanePrevious[c];
      if (before < p.collectives.size() && run.laneBefore[c] > arrive && run.startAt[c] > origin) {
        c = before;
        continue;
      }
      r = run.lastIssuer[c];
      t = std::min(run.startAt[c], arrive);
      break;
    }
  }
  std::reverse(path.begin(), path.end());
  return path;
}

// The critical path of a program with streams, walked back from the op of rank `slow` that
// ended last by `until`: an op goes back to what made it begin (an op it waited for; else its
// launch, where the launch was later than its queue's previous op's end; else that op); a
// collective's wait, to the collective, which began when its last member issued it (that
// member's issue is next) or when its lane's previous collective ended (that one is). Gaps of
// launch latency between stretches are left out, so the path covers the step but for them.
std::vector<PathSegment> streamCriticalPath(
    const Program& p, const Run& run, const std::vector<std::vector<std::vector<size_t>>>& queues,
    const ProgramTimes& times, size_t slow, int64_t origin, int64_t until) {
  const size_t nr = times.ranks.size();
  // Each op's previous one on its queue.
  std::vector<std::vector<size_t>> previous(nr);
  for (size_t r = 0; r < nr; ++r) {
    previous[r].assign(p.opsOf(r).size(), kNoOp);
    for (const std::vector<size_t>& list : queues[r]) {
      for (size_t k = 1; k < list.size(); ++k) previous[r][list[k]] = list[k - 1];
    }
  }
  size_t r = slow, i = kNoOp;
  for (size_t k = 0; k < run.opEnd[slow].size(); ++k) {
    const int64_t end = run.opEnd[slow][k];
    if (end <= until && end > origin && (i == kNoOp || end > run.opEnd[slow][i])) i = k;
  }
  std::vector<PathSegment> path;  // backwards
  auto add = [&](Kind kind, size_t rank, int64_t owner, int64_t begin, int64_t end) {
    begin = std::max(begin, origin);
    end = std::min(end, until);
    if (end > begin) path.push_back({kind, times.ranks[rank], owner, begin - origin, end - origin});
  };
  size_t total = 0;
  for (size_t k = 0; k < nr; ++k) total += p.opsOf(k).size();
  for (size_t guard = 0; i != kNoOp && guard < 2 * total + p.collectives.size() + 8; ++guard) {
    if (run.opEnd[r][i] <= origin) break;
    const ProgramOp& op = p.opsOf(r)[i];
    if (op.type == ProgramOp::Type::kWait && run.opEnd[r][i] > run.opBegin[r][i]) {
      size_t c = op.collective;
      for (;;) {
        const size_t last = run.lastIssuer[c];
        add(p.collectives[c].kind, last, p.collectives[c].owner, run.startAt[c], run.endAt[c]);
        const size_t before = run.lanePrevious[c];
        if (before < p.collectives.size() && run.laneBefore[c] > run.issued[c][last] &&
            run.startAt[c] > origin) {
          c = before;
          continue;
        }
        r = last;
        i = run.issueOp[c][last];
        break;
      }
      continue;
    }
    if (op.type == ProgramOp::Type::kCompute) {
      add(op.kind, r, op.owner, run.opBegin[r][i], run.opEnd[r][i]);
    }
    if (run.cause[r][i] != kNoOp) {
      i = run.cause[r][i];
      continue;
    }
    const size_t queuePrevious = previous[r][i];
    const int64_t queueFree = queuePrevious == kNoOp ? 0 : run.opEnd[r][queuePrevious];
    if (op.launchedBy != kNoOp && run.opBegin[r][op.launchedBy] >= queueFree) {
      i = op.launchedBy;
    } else {
      i = queuePrevious;
    }
  }
  std::reverse(path.begin(), path.end());
  return path;
}

}  // namespace

ProgramRun runProgram(const Program& p, const ProgramTimes& times) {
  const size_t nr = times.ranks.size(), steps = p.steps;
  if (nr == 0 || steps == 0 || times.durations.size() != nr) {
    throw std::invalid_argument("replay: no ranks or no steps to run");
  }
  if (!p.perRank.empty() && p.perRank.size() != nr) {
    throw std::invalid_argument("replay: a program per rank, but not one for every rank");
  }
  const size_t nc = p.collectives.size();
  // Each compute op's duration and recorded overlap on each rank.
  std::vector<std::vector<int64_t>> dur(nr), recordedOverlap(nr);
  bool streamed = false;  // device streams: contention is theirs alone
  for (size_t r = 0; r < nr; ++r) {
    const std::vector<ProgramOp>& ops = p.opsOf(r);
    dur[r].assign(ops.size(), 0);
    recordedOverlap[r].assign(ops.size(), 0);
    for (const ProgramOp& op : ops) streamed = streamed || op.queue > 0;
    if (times.durations[r].size() < steps) {
      throw std::invalid_argument("replay: a rank's durations do not cover every step");
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      const ProgramOp& op = ops[i];
      if (op.type != ProgramOp::Type::kCompute) continue;
      const std::vector<int64_t>& d = times.durations[r][op.step];
      auto scaled = [&](int64_t ns) {
        return std::llround(static_cast<double>(ns) * times.computeScale);
      };
      dur[r][i] = op.slot < d.size() ? scaled(d[op.slot]) : 0;
      if (r < times.overlaps.size() && op.step < times.overlaps[r].size() &&
          op.slot < times.overlaps[r][op.step].size()) {
        recordedOverlap[r][i] = scaled(times.overlaps[r][op.step][op.slot]);
      }
    }
  }
  size_t laneCount = 0;
  for (const ProgramCollective& c : p.collectives) laneCount = std::max(laneCount, c.lane + 1);
  std::vector<std::vector<size_t>> lanes(laneCount);
  for (size_t c = 0; c < nc; ++c) lanes[p.collectives[c].lane].push_back(c);

  // Contention: take the recorded overlap's share out, add the run's own (program.h). `eff`:
  // the durations the last run used.
  const bool sharing = times.host.cores > 0 && times.lost.size() == nr;
  const double kappa = sharing ? 0 : times.contention;
  std::vector<std::vector<int64_t>> eff = dur;
  std::vector<int64_t> ring(nc);  // the collectives' times the last run used
  for (size_t c = 0; c < nc; ++c) ring[c] = p.collectives[c].ns;
  const auto queues = queuesOf(p, nr);
  Run run = simulate(p, eff, ring, lanes, queues, nr, times);
  // A shared link: what each collective loses to the other lanes' beside it in a run's
  // schedule (program.h), added to its time alone.
  std::vector<int64_t> linkLost(nc, 0);
  auto shareLink = [&](const Run& x) {
    if (!times.sharedLink) return;
    std::vector<LaneSpan> spans(nc);
    for (size_t c = 0; c < nc; ++c) spans[c] = {p.collectives[c].lane, x.startAt[c], x.endAt[c]};
    const std::vector<double> lost = linkSharedNs(spans);
    for (size_t c = 0; c < nc; ++c) linkLost[c] = std::llround(lost[c]);
  };
  auto lastClock = [&](const Run& x) {
    int64_t t = 0;
    for (size_t r = 0; r < nr; ++r) t = std::max(t, x.t[r]);
    return t;
  };
  if (sharing) {
    // Each compute's work: its duration less what it lost to the recording's sharing.
    std::vector<std::vector<double>> work(nr);
    for (size_t r = 0; r < nr; ++r) {
      const std::vector<ProgramOp>& ops = p.opsOf(r);
      work[r].assign(ops.size(), 0);
      for (size_t i = 0; i < ops.size(); ++i) {
        const ProgramOp& op = ops[i];
        if (op.type != ProgramOp::Type::kCompute) continue;
        double lost = 0;
        if (op.step < times.lost[r].size() && op.slot < times.lost[r][op.step].size()) {
          lost = times.lost[r][op.step][op.slot] * times.computeScale;
        }
        work[r][i] = std::max(0.0, static_cast<double>(dur[r][i]) - lost);
      }
    }
    const double copies = CoreShares::ranksPerRecordedRank(times.world, nr);
    // Each pass runs every compute and collective at the shares the last run's schedule gives
    // it, until the schedule settles: the last rank's clock moves by under 0.1% (two threads
    // that slow each other converge on their common share over several passes).
    for (int pass = 0; pass < kSharePasses; ++pass) {
      const int64_t before = lastClock(run);
      shareLink(run);
      std::vector<CoreShares::Intervals> compute(nr);
      for (size_t r = 0; r < nr; ++r) {
        for (const TimelineEntry& e : run.timeline[r]) {
          if (!e.wait) compute[r].emplace_back(e.begin, e.end);
        }
      }
      CoreShares::Intervals running;
      for (size_t c = 0; c < nc; ++c) running.emplace_back(run.startAt[c], run.endAt[c]);
      const CoreShares shares(times.host, copies, compute, running);
      for (size_t r = 0; r < nr; ++r) {
        const std::vector<ProgramOp>& ops = p.opsOf(r);
        for (size_t i = 0; i < ops.size(); ++i) {
          if (ops[i].type != ProgramOp::Type::kCompute) continue;
          eff[r][i] = shares.durationNs(r, run.computeBegin[r][i], work[r][i]);
        }
      }
      for (size_t c = 0; c < nc; ++c) {
        const double w = static_cast<double>(p.collectives[c].ns) - p.collectives[c].lostNs;
        ring[c] =
            shares.durationNs(CoreShares::kRing, run.startAt[c], std::max(0.0, w)) + linkLost[c];
      }
      run = simulate(p, eff, ring, lanes, queues, nr, times);
      const int64_t after = lastClock(run);
      if (std::abs(after - before) * 1000 <= after) break;
    }
  } else if (times.sharedLink) {
    // The link's shares alone, pass by pass as the cores', until every collective's time
    // settles within 0.1% of itself (two that start together converge on their common pace,
    // each pass halving what is left: 10 passes).
    for (int pass = 0; pass < kLinkPasses; ++pass) {
      shareLink(run);
      bool settled = true;
      for (size_t c = 0; c < nc; ++c) {
        const int64_t next = p.collectives[c].ns + linkLost[c];
        settled = settled && std::llabs(next - ring[c]) * 1000 <= next;
        ring[c] = next;
      }
      if (settled) break;
      run = simulate(p, eff, ring, lanes, queues, nr, times);
    }
  }
  for (int pass = 0; kappa > 0 && pass < 2; ++pass) {
    std::vector<std::vector<int64_t>> next = eff;
    // The collectives in flight: from when the ring started them (every rank had issued them
    // and the lane was free) to their end. A rank that issued one early waits for the others
    // asleep, taking no core from compute (transport/doorbell.h).
    // (Each rank's own: the collectives it is a member of.)
    for (size_t r = 0; r < nr; ++r) {
      std::vector<std::pair<int64_t, int64_t>> flight;
      for (size_t c = 0; c < nc; ++c) {
        if (run.issued[c][r] >= 0) flight.emplace_back(run.startAt[c], run.endAt[c]);
      }
      const auto merged = mergeIntervals(std::move(flight));
      const std::vector<ProgramOp>& ops = p.opsOf(r);
      for (size_t i = 0; i < ops.size(); ++i) {
        if (ops[i].type != ProgramOp::Type::kCompute) continue;
        // A stream job's host is not slowed by its device's collectives.
        if (streamed && ops[i].queue == 0) continue;
        const int64_t base =
            dur[r][i] - static_cast<int64_t>(kappa * static_cast<double>(recordedOverlap[r][i]));
        // The op's span in the last run, and its overlap with the flights: d = c + kappa * o
        // (with kappa < 1 the runs settle: each moves a compute by at most kappa times its
        // overlap's change).
        const int64_t begin = run.computeBegin[r][i];
        const int64_t over = coveredNs(merged, begin, begin + std::max<int64_t>(0, eff[r][i]));
        next[r][i] = std::max<int64_t>(0, base) +
                     static_cast<int64_t>(kappa * static_cast<double>(over) + 0.5);
      }
    }
    eff.swap(next);
    run = simulate(p, eff, ring, lanes, queues, nr, times);
  }
  for (size_t r = 0; r < nr; ++r) run.stepBegin[r].push_back(run.t[r]);  // a next step's begin

  // The step time: per step stepTimesNs of the ranks' periods (step.h); the median over the
  // steps after the first.
  std::vector<std::vector<int64_t>> rankPeriods(nr);
  for (size_t r = 0; r < nr; ++r) {
    for (size_t k = 0; k < steps; ++k) {
      rankPeriods[r].push_back(run.stepBegin[r][k + 1] - run.stepBegin[r][k]);
    }
  }
  const std::vector<int64_t> stepTimes = stepTimesNs(rankPeriods);
  auto period = [&](size_t r, size_t k) { return rankPeriods[r][k]; };
  ProgramRun out;
  std::vector<int64_t> periods(stepTimes.begin() + (steps > 1 ? 1 : 0), stepTimes.end());
  out.stepNs = medianNs(periods);
  std::sort(periods.begin(), periods.end());
  out.stepLowNs = analysis::percentile(periods, 25);
  out.stepHighNs = analysis::percentile(periods, 75);
  // The typical step (the first of those nearest the median) and its slowest rank: the longest
  // period; of equal ones the last to start, then the one that waited least (the others waited
  // for it).
  out.typical = steps > 1 ? 1 : 0;
  for (size_t k = out.typical; k < steps; ++k) {
    if (std::llabs(stepTimes[k] - out.stepNs) < std::llabs(stepTimes[out.typical] - out.stepNs)) {
      out.typical = k;
    }
  }
  const size_t typical = out.typical;
  auto waited = [&](size_t r) {
    int64_t w = 0;
    for (const TimelineEntry& i : run.timeline[r]) {
      if (i.wait && i.begin >= run.stepBegin[r][typical] &&
          i.begin < run.stepBegin[r][typical + 1]) {
        w += i.end - i.begin;
      }
    }
    return w;
  };
  auto key = [&](size_t x) {
    return std::make_tuple(period(x, typical), run.stepBegin[x][typical], -waited(x));
  };
  size_t slow = 0;
  for (size_t r = 1; r < nr; ++r) {
    if (key(r) > key(slow)) slow = r;
  }
  const int64_t origin = run.stepBegin[slow][typical], until = run.stepBegin[slow][typical + 1];
  out.slowestRank = times.ranks[slow];
  out.originNs = origin;
  if (streamed) {
    // A device's exposed communication: its collectives' time with none of its compute beside
    // (HolisticTraceAnalysis's definition).
    std::vector<std::pair<int64_t, int64_t>> comm, compute;
    for (size_t c = 0; c < nc; ++c) {
      if (run.issued[c][slow] >= 0) {
        comm.emplace_back(std::max(origin, run.startAt[c]), std::min(until, run.endAt[c]));
      }
    }
    const std::vector<ProgramOp>& ops = p.opsOf(slow);
    for (size_t k = 0; k < ops.size(); ++k) {
      if (ops[k].queue > 0 && ops[k].type == ProgramOp::Type::kCompute) {
        compute.emplace_back(run.opBegin[slow][k], run.opEnd[slow][k]);
      }
    }
    const auto busy = mergeIntervals(std::move(compute));
    for (const auto& [b, e] : mergeIntervals(std::move(comm))) {
      out.exposedCommNs += (e - b) - coveredNs(busy, b, e);
    }
    out.criticalPath = streamCriticalPath(p, run, queues, times, slow, origin, until);
  } else {
    for (const TimelineEntry& i : run.timeline[slow]) {
      if (i.wait && i.begin >= origin && i.begin < until) out.exposedCommNs += i.end - i.begin;
    }
    out.criticalPath = criticalPath(p, run, times.ranks, slow, origin, until);
  }
  out.issuedNs.assign(nc, 0);
  out.startNs.assign(nc, 0);
  out.endNs.assign(nc, 0);
  for (size_t c = 0; c < nc; ++c) {
    int64_t last = 0;
    for (size_t r = 0; r < nr; ++r) last = std::max(last, run.issued[c][r]);
    out.issuedNs[c] = last - origin;
    out.startNs[c] = run.startAt[c] - origin;
    out.endNs[c] = run.endAt[c] - origin;
  }
  return out;
}

}  // namespace ringx::replay
