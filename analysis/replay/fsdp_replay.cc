// The FSDP step replay (see fsdp_replay.h for the model and why it is built this way).
#include "analysis/replay/fsdp_replay.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

#include "analysis/replay/program.h"

namespace ringx::replay {

const char* fsdpShardingName(FsdpSharding s) {
  switch (s) {
    case FsdpSharding::kFullShard:
      return "FULL_SHARD";
    case FsdpSharding::kShardGradOp:
      return "SHARD_GRAD_OP";
    case FsdpSharding::kNoShard:
      return "NO_SHARD";
  }
  return "?";
}

const char* fsdpBackwardPrefetchName(FsdpBackwardPrefetch p) {
  switch (p) {
    case FsdpBackwardPrefetch::kNone:
      return "NONE";
    case FsdpBackwardPrefetch::kBackwardPre:
      return "BACKWARD_PRE";
    case FsdpBackwardPrefetch::kBackwardPost:
      return "BACKWARD_POST";
  }
  return "?";
}

bool parseFsdpSharding(std::string_view name, FsdpSharding* out) {
  for (FsdpSharding s :
       {FsdpSharding::kFullShard, FsdpSharding::kShardGradOp, FsdpSharding::kNoShard}) {
    if (name == fsdpShardingName(s)) {
      *out = s;
      return true;
    }
  }
  return false;
}

bool parseFsdpBackwardPrefetch(std::string_view name, FsdpBackwardPrefetch* out) {
  for (FsdpBackwardPrefetch p : {FsdpBackwardPrefetch::kNone, FsdpBackwardPrefetch::kBackwardPre,
                                 FsdpBackwardPrefetch::kBackwardPost}) {
    if (name == fsdpBackwardPrefetchName(p)) {
      *out = p;
      return true;
    }
  }
  return false;
}

namespace {

constexpr size_t kNone = static_cast<size_t>(-1);

// What of a phase's gaps a merge folds along with them: per hook, how much of its gap's compute
// overlapped a collective, or was lost to sharing the cores (empty: not recorded).
using Alongside = std::vector<std::pair<const std::vector<int64_t>*, std::vector<int64_t>*>>;

// The hooks a merged model keeps (renumbered to their groups), each with the compute before it:
// a dropped hook's gap folds into the next kept one's, and what follows the last into `tail`,
// less the engine's own work at the dropped hooks (`work`, per hook: a merged unit runs its
// hooks once). `alongside` folds the same way, scaled by what of its gaps stays; `keptWork`
// is the kept hooks' own work.
std::vector<FsdpHook> keepHooks(const std::vector<FsdpHook>& hooks,
                                const std::vector<size_t>& group, const std::vector<int64_t>& gaps,
                                const std::vector<int64_t>& work, std::vector<int64_t>* keptGaps,
                                std::vector<int64_t>* keptWork, int64_t* tail,
                                const Alongside& alongside) {
  // A group's first open and last close in this order are its hooks; the members' others go.
  std::map<size_t, size_t> firstOpen, lastClose;
  for (size_t i = 0; i < hooks.size(); ++i) {
    const size_t g = group[hooks[i].unit];
    if (hooks[i].open && !firstOpen.count(g)) firstOpen[g] = i;
    if (!hooks[i].open) lastClose[g] = i;
  }
  std::vector<FsdpHook> out;
  keptGaps->clear();
  keptWork->clear();
  for (const auto& [from, to] : alongside) to->clear();
  // A dropped close hook's work is in the gap after it, an open one's in its own: both are in
  // what is carried by the next kept hook (or the tail).
  int64_t carried = 0, dropped = 0;
  std::vector<int64_t> carriedAlong(alongside.size(), 0);
  // The carried gap less the dropped work; `alongside` kept for a hook (the tail's has no
  // record: its compute is the phase's end's).
  auto fold = [&](bool hook) {
    const int64_t stays = carried - std::min(dropped, carried);
    const double share =
        carried > 0 ? static_cast<double>(stays) / static_cast<double>(carried) : 1;
    for (size_t a = 0; a < alongside.size(); ++a) {
      if (hook && !alongside[a].first->empty()) {
        alongside[a].second->push_back(std::llround(static_cast<double>(carriedAlong[a]) * share));
      }
      carriedAlong[a] = 0;
    }
    carried = dropped = 0;
    return stays;
  };
  for (size_t i = 0; i < hooks.size(); ++i) {
    const size_t g = group[hooks[i].unit];
    carried += i < gaps.size() ? gaps[i] : 0;
    for (size_t a = 0; a < alongside.size(); ++a) {
      const std::vector<int64_t>& from = *alongside[a].first;
      carriedAlong[a] += i < from.size() ? from[i] : 0;
    }
    const bool keep = hooks[i].open ? firstOpen[g] == i : lastClose[g] == i;
    if (!keep) {
      dropped += i < work.size() ? work[i] : 0;
      continue;
    }
    out.push_back({g, hooks[i].open});
    if (i < work.size()) keptWork->push_back(work[i]);
    keptGaps->push_back(fold(true));
  }
  *tail += fold(false);
  return out;
}

// A unit's work that costs per call and per byte, fitted over the units of the typical step.
struct PerCall {
  double callNs = 0, nsPerByte = 0;
  double ns(int64_t bytes) const { return callNs + nsPerByte * static_cast<double>(bytes); }
};

// Least squares of every rank's typical time of each unit against its gathered bytes, both
// constants >= 0. Units of one size cannot tell a call from its bytes: all per byte, so that
// merged units cost what their members did.
PerCall perCall(const FsdpModel& m, std::vector<int64_t> FsdpRankProfile::*field) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  std::set<int64_t> sizes;
  for (const FsdpRankProfile& p : m.ranks) {
    const std::vector<int64_t>& times = p.*field;
    for (size_t u = 0; u < times.size() && u < m.units.size(); ++u) {
      const double x = static_cast<double>(m.units[u].paramBytes),
                   y = static_cast<double>(times[u]);
      if (x <= 0 || y <= 0) continue;
      sizes.insert(m.units[u].paramBytes);
      n += 1, sx += x, sy += y, sxx += x * x, sxy += x * y;
    }
  }
  PerCall out;
  if (n == 0 || sx <= 0) return out;
  const double spread = n * sxx - sx * sx;
  if (sizes.size() >= 2 && spread > 0) {
    out.nsPerByte = (n * sxy - sx * sy) / spread;
    out.callNs = (sy - out.nsPerByte * sx) / n;
  }
  if (sizes.size() < 2 || spread <= 0 || out.callNs < 0) {
    out = {0, sy / sx};
  } else if (out.nsPerByte < 0) {
    out = {sy / n, 0};
  }
  return out;
}

}  // namespace

FsdpModel mergeUnits(const FsdpModel& m, int64_t k) {
  if (k <= 1) return m;
  const size_t n = m.units.size();
  // Nesting from the forward hooks: a unit's parent is the one open when it opened.
  std::vector<size_t> parent(n, kNone), firstSeen;
  std::vector<char> hasChildren(n, 0), seen(n, 0);
  std::vector<size_t> stack;
  for (const FsdpHook& h : m.forward) {
    if (h.open) {
      if (!stack.empty()) {
        parent[h.unit] = stack.back();
        hasChildren[stack.back()] = 1;
      }
      stack.push_back(h.unit);
      if (!seen[h.unit]) firstSeen.push_back(h.unit);
      seen[h.unit] = 1;
    } else if (!stack.empty()) {
      stack.pop_back();
    }
  }
  // Runs of consecutive sibling leaves, cut into groups of k.
  std::vector<size_t> leader(n);
  for (size_t u = 0; u < n; ++u) leader[u] = u;
  std::map<size_t, std::vector<std::vector<size_t>>> runs;  // parent -> runs of leaves
  std::map<size_t, size_t> lastChild;                       // parent -> its last child seen
  for (size_t u : firstSeen) {
    const size_t p = parent[u];
    if (p == kNone) continue;
    auto& r = runs[p];
    const bool leaf = !hasChildren[u];
    const bool continues = leaf && lastChild.count(p) && !hasChildren[lastChild[p]] && !r.empty();
    if (leaf && !continues) r.emplace_back();
    if (leaf) r.back().push_back(u);
    lastChild[p] = u;
  }
  for (auto& [p, list] : runs) {
    for (const std::vector<size_t>& run : list) {
      for (size_t i = 0; i < run.size(); ++i) leader[run[i]] = run[i - i % static_cast<size_t>(k)];
    }
  }
  // New indices: the root first, then leaders in index order.
  std::vector<size_t> group(n);
  FsdpModel out = m;
  out.units.clear();
  std::vector<size_t> index(n, kNone);
  for (size_t u = 0; u < n; ++u) {
    if (leader[u] != u) continue;
    index[u] = out.units.size();
    out.units.push_back({m.units[u].name, 0, 0});
  }
  for (size_t u = 0; u < n; ++u) {
    group[u] = index[leader[u]];
    FsdpUnitModel& g = out.units[group[u]];
    if (leader[u] != u) g.name += "+" + m.units[u].name;
    g.paramBytes += m.units[u].paramBytes;
    g.gradBytes += m.units[u].gradBytes;
  }
  // A gather's copy-out and a free cost per call and per byte: a merged unit's is its members'
  // less the calls it saves, in the ratio the units' typical times say (perCall).
  const PerCall copyCost = perCall(m, &FsdpRankProfile::copyOutNs);
  const PerCall freeCost = perCall(m, &FsdpRankProfile::reshardNs);
  auto mergedCost = [&](const PerCall& cost, const std::vector<int64_t>& parts) {
    std::vector<int64_t> merged(out.units.size(), 0);
    std::vector<double> separate(out.units.size(), 0);
    for (size_t u = 0; u < n && u < parts.size(); ++u) {
      merged[group[u]] += parts[u];
      separate[group[u]] += cost.ns(m.units[u].paramBytes);
    }
    for (size_t g = 0; g < merged.size(); ++g) {
      const double once = cost.ns(out.units[g].paramBytes);
      if (separate[g] > 0 && once < separate[g]) {
        merged[g] = std::llround(static_cast<double>(merged[g]) * once / separate[g]);
      }
    }
    return merged;
  };
  auto merge = [&](const FsdpRankProfile& p, FsdpRankProfile* q) {
    int64_t forwardTail = 0, backwardTail = 0;
    out.forward = keepHooks(
        m.forward, group, p.forwardGapNs, p.forwardHookNs, &q->forwardGapNs, &q->forwardHookNs,
        &forwardTail,
        {{&p.forwardOverlapNs, &q->forwardOverlapNs}, {&p.forwardLostNs, &q->forwardLostNs}});
    out.backward = keepHooks(
        m.backward, group, p.backwardGapNs, p.backwardHookNs, &q->backwardGapNs, &q->backwardHookNs,
        &backwardTail,
        {{&p.backwardOverlapNs, &q->backwardOverlapNs}, {&p.backwardLostNs, &q->backwardLostNs}});
    q->toBackwardNs = p.toBackwardNs + forwardTail;
    q->finalizeNs = p.finalizeNs + backwardTail;
    q->reshardNs = mergedCost(freeCost, p.reshardNs);
    q->copyOutNs = mergedCost(copyCost, p.copyOutNs);
  };
  for (size_t r = 0; r < m.ranks.size(); ++r) merge(m.ranks[r], &out.ranks[r]);
  for (size_t i = 0; i < m.samples.size(); ++i) {
    for (size_t r = 0; r < m.samples[i].size(); ++r) merge(m.samples[i][r], &out.samples[i][r]);
  }
  return out;
}

namespace {

using Kind = PathSegment::Kind;

// The engine's schedule as a program (program.h; see fsdp/engine.cc, which this follows
// hook by hook). Compute slots: forward gaps, then backward gaps, then to-backward, finalize,
// optimizer, then one reshard per unit, then one copy-out per unit (after each gather).
class Schedule {
 public:
  Schedule(const FsdpModel& m, const FsdpRuntime& rt, size_t steps) : m_(m), rt_(rt) {
    const size_t nf = m.forward.size(), nb = m.backward.size();
    toBackward_ = nf + nb;
    finalize_ = toBackward_ + 1;
    optimizer_ = finalize_ + 1;
    reshard_ = optimizer_ + 1;
    copyOut_ = reshard_ + m.units.size();
    state_.assign(m.units.size(), State::kSharded);
    gather_.assign(m.units.size(), kNone);
    // The forward order of units (their first pre-forward): prefetch targets.
    for (const FsdpHook& h : m.forward) {
      if (h.open && std::find(order_.begin(), order_.end(), h.unit) == order_.end()) {
        order_.push_back(h.unit);
      }
    }
    // NO_SHARD keeps every parameter in place; the others start sharded but for the root,
    // which stays gathered from one step to the next only within a step.
    if (rt.sharding == FsdpSharding::kNoShard) state_.assign(m.units.size(), State::kUnsharded);
    for (size_t k = 0; k < steps; ++k) step();
  }

  Program program;
  size_t slots() const { return copyOut_ + m_.units.size(); }
  size_t optimizerSlot() const { return optimizer_; }
  // Per rank: every slot's duration.
  // The compute's recorded overlap with the rank's collectives in flight (gaps only).
  int64_t overlap(const FsdpRankProfile& p, size_t slot) const {
    const size_t nf = m_.forward.size();
    if (slot < nf) return slot < p.forwardOverlapNs.size() ? p.forwardOverlapNs[slot] : 0;
    if (slot < toBackward_) {
      return slot - nf < p.backwardOverlapNs.size() ? p.backwardOverlapNs[slot - nf] : 0;
    }
    return 0;
  }
  // What the slot's compute lost to sharing the cores as recorded: a gap's own, the rest at
  // the step's rate.
  double lost(const FsdpRankProfile& p, size_t slot, int64_t ns) const {
    const size_t nf = m_.forward.size();
    if (slot < nf && slot < p.forwardLostNs.size())
      return static_cast<double>(p.forwardLostNs[slot]);
    if (slot >= nf && slot < toBackward_ && slot - nf < p.backwardLostNs.size()) {
      return static_cast<double>(p.backwardLostNs[slot - nf]);
    }
    return p.otherLossRate * static_cast<double>(ns);
  }
  std::vector<int64_t> durations(const FsdpRankProfile& p) const {
    std::vector<int64_t> d(slots(), 0);
    for (size_t i = 0; i < p.forwardGapNs.size() && i < m_.forward.size(); ++i)
      d[i] = p.forwardGapNs[i];
    for (size_t i = 0; i < p.backwardGapNs.size() && i < m_.backward.size(); ++i) {
      d[m_.forward.size() + i] = p.backwardGapNs[i];
    }
    d[toBackward_] = p.toBackwardNs;
    d[finalize_] = p.finalizeNs;
    d[optimizer_] = p.optimizerNs;
    for (size_t u = 0; u < p.reshardNs.size() && u < m_.units.size(); ++u)
      d[reshard_ + u] = p.reshardNs[u];
    for (size_t u = 0; u < p.copyOutNs.size() && u < m_.units.size(); ++u)
      d[copyOut_ + u] = p.copyOutNs[u];
    return d;
  }

 private:
  enum class State { kSharded, kGathering, kUnsharded };

  void compute(Kind kind, size_t slot) { program.compute(kind, slot); }
  size_t issue(Kind kind, int64_t bytes, size_t lane, size_t unit, bool prefetched = false) {
    const size_t c = program.issue(kind, bytes, lane, static_cast<int64_t>(unit), prefetched);
    if (rt_.blocking) wait(c);  // the issuing thread waits for it there
    return c;
  }
  void wait(size_t c) { program.wait(c); }

  bool gathers() const { return rt_.sharding != FsdpSharding::kNoShard; }
  size_t gatherLane() const { return rt_.gatherLane ? 1 : 0; }

  void beginUnshard(size_t u, bool prefetched = false) {
    if (!gathers() || state_[u] != State::kSharded || m_.units[u].paramBytes <= 0) return;
    gather_[u] = issue(Kind::kAllGather, m_.units[u].paramBytes, gatherLane(), u, prefetched);
    state_[u] = State::kGathering;
  }
  void finishUnshard(size_t u, Kind kind) {
    if (state_[u] == State::kGathering) {
      wait(gather_[u]);
      compute(kind, copyOut_ + u);  // the gathered parameters copied out
    }
    if (state_[u] != State::kSharded || m_.units[u].paramBytes > 0) state_[u] = State::kUnsharded;
  }
  void reshard(size_t u, Kind kind) {
    if (!gathers()) return;
    if (state_[u] == State::kGathering) wait(gather_[u]);
    if (state_[u] == State::kSharded) return;
    state_[u] = State::kSharded;
    compute(kind, reshard_ + u);
  }
  size_t gatheredNonRoot() const {
    size_t n = 0;
    for (size_t u = 1; u < state_.size(); ++u) {
      n += state_[u] != State::kSharded && m_.units[u].paramBytes > 0;
    }
    return n;
  }
  void prefetch(size_t target) {
    if (target == kNone || !gathers() || state_[target] != State::kSharded) return;
    if (m_.units[target].paramBytes <= 0) return;
    if (rt_.limitAllGathers && target != 0 && gatheredNonRoot() >= 2) return;
    beginUnshard(target, /*prefetched=*/true);
  }
  // The unit whose backward comes next: the one before u in forward order whose
  // pre-backward has not run.
  size_t backwardTarget(size_t u) const {
    auto it = std::find(order_.begin(), order_.end(), u);
    if (it == order_.end()) return kNone;
    while (it != order_.begin()) {
      --it;
      if (!preBackwardDone_[*it]) return *it;
    }
    return kNone;
  }
  void retire(size_t keep) {
    size_t inFlight = 0;
    for (size_t c : launched_) inFlight += !retired_[c];
    for (size_t c : launched_) {
      if (inFlight <= keep) return;
      if (retired_[c]) continue;
      wait(c);
      retired_[c] = 1;
      --inFlight;
    }
  }

  void step() {
    program.beginStep();
    const size_t nf = m_.forward.size();
    for (size_t i = 0; i < nf; ++i) {
      compute(Kind::kForward, i);
      const size_t u = m_.forward[i].unit;
      if (m_.forward[i].open) {
        beginUnshard(u);
        finishUnshard(u, Kind::kForward);
        if (rt_.forwardPrefetch) {
          auto it = std::find(order_.begin(), order_.end(), u);
          if (it != order_.end() && it + 1 != order_.end()) prefetch(*(it + 1));
        }
      } else if (u != 0 && rt_.sharding == FsdpSharding::kFullShard) {
        reshard(u, Kind::kForward);  // reshard_after_forward
      }
    }
    compute(Kind::kBackward, toBackward_);
    preBackwardDone_.assign(m_.units.size(), 0);
    launched_.clear();
    for (size_t i = 0; i < m_.backward.size(); ++i) {
      compute(Kind::kBackward, nf + i);
      const size_t u = m_.backward[i].unit;
      if (m_.backward[i].open) {
        preBackwardDone_[u] = 1;
        beginUnshard(u);
        finishUnshard(u, Kind::kBackward);
        if (rt_.backwardPrefetch == FsdpBackwardPrefetch::kBackwardPre) prefetch(backwardTarget(u));
        continue;
      }
      if (m_.units[u].gradBytes > 0) {
        const bool noShard = rt_.sharding == FsdpSharding::kNoShard;
        const size_t c =
            issue(noShard ? Kind::kAllreduce : Kind::kReduceScatter, m_.units[u].gradBytes, 0, u);
        launched_.push_back(c);
        if (retired_.size() < program.collectives.size()) {
          retired_.resize(program.collectives.size(), 0);
        }
      }
      reshard(u, Kind::kBackward);
      if (rt_.backwardPrefetch == FsdpBackwardPrefetch::kBackwardPost) prefetch(backwardTarget(u));
      if (rt_.limitAllGathers) retire(1);
    }
    retire(0);
    for (size_t u = 0; u < m_.units.size(); ++u) reshard(u, Kind::kBackward);
    compute(Kind::kBackward, finalize_);
    compute(Kind::kOptimizer, optimizer_);
  }

  const FsdpModel& m_;
  const FsdpRuntime rt_;
  size_t toBackward_ = 0, finalize_ = 0, optimizer_ = 0, reshard_ = 0, copyOut_ = 0;
  std::vector<State> state_;
  std::vector<size_t> gather_;
  std::vector<size_t> order_;
  std::vector<char> preBackwardDone_;
  std::vector<size_t> launched_;
  std::vector<char> retired_;
};

}  // namespace

FsdpReplay replayFsdp(const FsdpModel& recorded, const FsdpWhatIf& change) {
  if (recorded.units.empty() || recorded.ranks.empty() || recorded.forward.empty()) {
    throw std::invalid_argument(
        "the FSDP model has no units, ranks or hooks: the trace holds no complete ringx.fsdp "
        "iteration");
  }
  if (change.mergeUnits < 1) {
    throw std::invalid_argument("unit boundaries: merge at least 1 unit into one");
  }
  const FsdpModel m = mergeUnits(recorded, change.mergeUnits);
  FsdpRuntime rt = m.runtime;
  if (change.sharding) rt.sharding = *change.sharding;
  if (change.backwardPrefetch) rt.backwardPrefetch = *change.backwardPrefetch;
  if (change.forwardPrefetch) rt.forwardPrefetch = *change.forwardPrefetch;
  if (change.limitAllGathers) rt.limitAllGathers = *change.limitAllGathers;
  // ringx.fsdp gives gathers their own group for the sharded strategies only.
  if (rt.sharding == FsdpSharding::kNoShard) rt.gatherLane = false;
  const int64_t world = change.worldSize.value_or(m.worldSize);
  // Another world size shares the cores of the hosts it runs on out differently (cost_model.h).
  const double share = hostShareRatio(m.host, m.worldSize, world);
  // The optimizer steps over the parameters a rank holds: its shard (1 / world of them) under
  // the sharded strategies, all of them under NO_SHARD. Its work scales with that (at 3 ranks
  // NO_SHARD's optimizer measured 3.1x FULL_SHARD's, bench/whatif.py).
  const auto held = [](FsdpSharding sharding, int64_t ranks) {
    return sharding == FsdpSharding::kNoShard ? 1.0 : 1.0 / static_cast<double>(ranks);
  };
  const double optimizerScale = held(rt.sharding, world) / held(m.runtime.sharding, m.worldSize);

  // The steps: the recorded ones, each rank with its own compute of that step, so that the
  // ranks' step-to-step jitter meets at the collectives as it did; else the typical step.
  const size_t nr = m.ranks.size();
  const bool recordedSteps = m.samples.size() >= 2;
  const size_t steps = recordedSteps ? m.samples.size() : kTypicalSteps;
  Schedule schedule(m, rt, steps);
  Program& program = schedule.program;
  // Recorded times for the recorded units' collectives: the same unit's collective of the kind
  // in that step that ran the same way (a gather waited on at once, or prefetched to run beside
  // compute: on busy cores the second took several times the first), in order; not for merged
  // units, another wire or another world size.
  using RunKey = std::tuple<int, size_t, size_t, bool>;  // kind, unit, sample, prefetched
  std::map<RunKey, std::vector<const FsdpModel::RecordedCollective*>> recordedNs;  // in order
  if (recordedSteps && change.mergeUnits <= 1 && !change.link && world == m.worldSize) {
    for (const FsdpModel::RecordedCollective& c : m.recordedCollectives) {
      recordedNs[{static_cast<int>(c.kind), c.unit, c.sample, c.prefetched}].push_back(&c);
    }
  }
  std::map<RunKey, size_t> occurrences;
  for (ProgramCollective& c : program.collectives) {
    if (change.commFree) continue;
    const RunKey key{static_cast<int>(c.kind), static_cast<size_t>(c.owner), c.step, c.prefetched};
    const size_t occurrence = occurrences[key]++;
    auto found = recordedNs.find(key);
    if (found != recordedNs.end() && !found->second.empty()) {
      const FsdpModel::RecordedCollective& ran =
          *found->second[std::min(occurrence, found->second.size() - 1)];
      c.ns = ran.ns;
      c.lostNs = ran.lostNs;
      continue;
    }
    const LinkCost& link = change.link                  ? *change.link
                           : c.kind == Kind::kAllGather ? m.gather
                           : c.kind == Kind::kAllreduce ? m.allreduce
                                                        : m.reduceScatter;
    const char* op = c.kind == Kind::kAllGather   ? "all_gather"
                     : c.kind == Kind::kAllreduce ? "allreduce"
                                                  : "reduce_scatter";
    c.ns = std::llround(static_cast<double>(collectiveNs(link, op, c.bytes, world)) * share);
    c.lostNs = static_cast<double>(c.ns) * m.ringLossShare;
  }
  // Per rank and step: each slot's compute, and (for contention) its recorded overlap with the
  // rank's collectives in flight. Free communication still takes the recorded overlap's share
  // out (its collectives take no time, so nothing is in flight and none is added back): kept
  // in, it left "communication free" slower than the baseline on traces whose replay overlaps
  // less than the recording.
  ProgramTimes times;
  times.sharedLink = m.sharedLink && rt.gatherLane;
  times.contention = change.computeFree ? 0 : m.contention;
  times.computeScale = share;
  // The host's cores shared by this schedule (core_shares.h), where the steps recorded how
  // they were shared.
  const bool canShare = recordedSteps && !change.computeFree && m.host.cores > 0;
  const bool sharing = canShare && change.sharedCores && world == m.worldSize;
  if (sharing) {
    times.host = m.host;
    times.world = world;
    times.computeScale = 1;
    times.lost.resize(nr);
  }
  // Another, larger world: its every rank (program.h's replayedRanks).
  const size_t ranks = recordedSteps && world > m.worldSize ? replayedRanks(nr, world) : nr;
  for (size_t r = 0; r < ranks; ++r) {
    times.ranks.push_back(r < nr ? m.ranks[r].rank : static_cast<int32_t>(r));
    times.durations.emplace_back();
    times.overlaps.emplace_back();
    for (size_t k = 0; k < steps; ++k) {
      const RecordedSource from = recordedSourceOf(r, k, nr, steps);
      const FsdpRankProfile& p = recordedSteps && from.rank < m.samples[from.step].size()
                                     ? m.samples[from.step][from.rank]
                                     : m.ranks[from.rank];
      times.durations[r].push_back(schedule.durations(p));
      int64_t& optimizer = times.durations[r].back()[schedule.optimizerSlot()];
      optimizer = std::llround(static_cast<double>(optimizer) * optimizerScale);
      if (change.computeFree) {
        std::fill(times.durations[r].back().begin(), times.durations[r].back().end(), 0);
      }
      std::vector<int64_t> over(schedule.slots(), 0);
      for (size_t slot = 0; slot < over.size(); ++slot) over[slot] = schedule.overlap(p, slot);
      times.overlaps[r].push_back(std::move(over));
      if (sharing) {
        const std::vector<int64_t>& d = times.durations[r].back();
        std::vector<double> lost(d.size(), 0);
        for (size_t slot = 0; slot < d.size(); ++slot) lost[slot] = schedule.lost(p, slot, d[slot]);
        times.lost[r].push_back(std::move(lost));
      }
    }
  }
  const ProgramRun run = runProgram(program, times);

  FsdpReplay out;
  if (canShare && change.sharedCores && !sharing) {
    FsdpWhatIf unchanged;
    unchanged.sharedCores = false;
    out.referenceNs = replayFsdp(recorded, unchanged).stepNs;
  }
  out.units = m.units.size();
  out.stepNs = run.stepNs;
  out.stepLowNs = run.stepLowNs;
  out.stepHighNs = run.stepHighNs;
  out.slowestRank = run.slowestRank;
  out.exposedCommNs = run.exposedCommNs;
  out.criticalPath = run.criticalPath;
  for (const ProgramCollective& c : program.collectives) {
    if (c.step != run.typical) continue;
    out.commNs += c.ns;
    out.gathers += c.kind == Kind::kAllGather;
  }
  return out;
}

}  // namespace ringx::replay
