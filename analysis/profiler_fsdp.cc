// torch FSDP2 from profiler traces (see profiler_fsdp.h for what is read and why).
#include "analysis/profiler_fsdp.h"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "analysis/store_reading.h"
#include "trace/format/fsdp2_scopes.h"
#include "trace/format/schema.h"
#include "trace/model/chrome_ingest.h"

namespace ringx::analysis {
using namespace store_reading;
using trace::FsdpScope;

namespace {

constexpr std::string_view kRootScope = "FSDP::root_pre_forward";

struct ScopeSpan {
  FsdpScope kind = FsdpScope::kOther;
  std::string unit;
  int64_t begin = 0, end = 0;
  size_t track = 0;
  std::vector<size_t> issued;  // the c10d ops begun inside it on its thread (indices)
};

struct TimedOp {
  int64_t begin = 0, end = 0;
  size_t track = 0;
  int64_t bytes = -1;  // a wire's, as nccl-tests counts them
};

// One rank's FSDP2 scopes, c10d ops and backend scopes, each in begin order.
struct ProfiledFsdpRank {
  int32_t rank = 0;
  std::map<int64_t, std::pair<int64_t, int64_t>> steps;  // N -> window
  std::vector<ScopeSpan> scopes;
  std::vector<TimedOp> issues, wires, prefetches;
  std::vector<const TimedOp*> wireOf;  // issues[i]'s wire or null
  std::string wireBackend;
};

template <typename T>
void byBegin(std::vector<T>& v) {
  std::stable_sort(v.begin(), v.end(), [](const T& a, const T& b) { return a.begin < b.begin; });
}

ProfiledFsdpRank readProfiledFsdpRank(const model::TraceStore& store, const RankData& data) {
  const StringPool& pool = store.strings();
  const uint32_t scopeKey = pool.find("scope"), bytesKey = pool.find(targ::kBytes);
  const int collectiveCat = store.findCategory(trace::categoryName(trace::Category::kCollective));
  ProfiledFsdpRank r;
  r.rank = data.rank;
  for (size_t ti = 0; ti < data.tracks.size(); ++ti) {
    const Track& t = data.tracks[ti];
    if (model::isDeviceTrack(store.str(t.name))) continue;
    forAllSpans(t, [&](uint32_t, uint32_t, const Span& s) {
      const std::string_view name = store.str(s.name);
      if (const std::optional<int64_t> n = model::profilerStepNumber(name)) {
        r.steps.try_emplace(*n, s.begin, s.end);
        return;
      }
      if (collectiveCat >= 0 && s.category == collectiveCat) {
        const ArgRange a(data, s);
        const std::string_view scope = store.str(a.string(scopeKey));
        if (scope.empty()) return;
        r.wires.push_back({s.begin, s.end, ti, a.integer(bytesKey, -1)});
        r.wireBackend = std::string(scope.substr(0, scope.find(':')));
        return;
      }
      if (startsWith(name, "c10d::")) {
        r.issues.push_back({s.begin, s.end, ti});
        return;
      }
      ScopeSpan scope;
      scope.kind = trace::parseFsdpScope(name, &scope.unit);
      if (scope.kind == FsdpScope::kOther || scope.kind == FsdpScope::kZeroGrad) return;
      scope.begin = s.begin;
      scope.end = s.end;
      scope.track = ti;
      if (scope.kind == FsdpScope::kForwardPrefetch || scope.kind == FsdpScope::kBackwardPrefetch) {
        r.prefetches.push_back({s.begin, s.end, ti});
      }
      r.scopes.push_back(std::move(scope));
    });
  }
  byBegin(r.scopes);
  byBegin(r.issues);
  byBegin(r.wires);
  byBegin(r.prefetches);
  r.wireOf = wiresInIssueOrder(r.issues, r.wires);
  // The c10d ops each gather or reduce scope issued: those its thread began inside it.
  for (ScopeSpan& scope : r.scopes) {
    if (scope.kind != FsdpScope::kAllGather && scope.kind != FsdpScope::kPostBackwardReduce) {
      continue;
    }
    auto it = std::lower_bound(r.issues.begin(), r.issues.end(), scope.begin,
                               [](const TimedOp& o, int64_t t) { return o.begin < t; });
    for (; it != r.issues.end() && it->begin <= scope.end; ++it) {
      if (it->track == scope.track)
        scope.issued.push_back(static_cast<size_t>(it - r.issues.begin()));
    }
  }
  return r;
}

// Whether [begin, ...] on `track` sits in a prefetch scope.
bool inPrefetch(const ProfiledFsdpRank& r, const ScopeSpan& s) {
  for (const TimedOp& p : r.prefetches) {
    if (p.begin > s.begin) break;
    if (p.track == s.track && s.begin <= p.end) return true;
  }
  return false;
}

// What one rank's scopes give, by the watch's rules.
struct RankScopesRead {
  std::map<int64_t, replay::FsdpStepRecord> steps;  // by ProfilerStep#N
  std::vector<bool> regathered;  // by unit: gathered again in backward (it frees after forward)
  bool forwardPrefetched = false;
  bool missingWire = false;    // a collective without its backend scope
  bool missingShapes = false;  // a wire without its tensors' dims (record_shapes off)
};

// The watch's rules (fsdp/watch/fsdp_watch.cc) run over one rank's scopes in time order.
class RankScopesReader {
 public:
  RankScopesReader(const ProfiledFsdpRank& r, std::vector<std::string>& units)
      : r_(r), units_(units) {}

  RankScopesRead run() {
    struct Event {
      int64_t ns;
      int order;  // at one time: ends of spans that lasted, then begins, then empty spans' ends
      const ScopeSpan* scope;
      bool begin;
    };
    std::vector<Event> events;
    for (const ScopeSpan& s : r_.scopes) {
      events.push_back({s.begin, 1, &s, true});
      events.push_back({s.end, s.end > s.begin ? 0 : 2, &s, false});
    }
    std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
      return a.ns != b.ns ? a.ns < b.ns : a.order < b.order;
    });
    for (const Event& e : events) {
      if (e.begin) {
        begin(*e.scope);
      } else {
        end(*e.scope);
      }
    }
    out_.regathered.resize(units_.size(), false);
    // A post_forward frees the unit only where it is gathered again in backward.
    for (auto& [n, spans] : postForward_) {
      for (const replay::FsdpStepRecord::Span& s : spans) {
        if (out_.regathered[s.unit]) out_.steps[n].reshards.push_back(s);
      }
    }
    return std::move(out_);
  }

 private:
  struct Pending {
    int64_t issueNs = 0, waitBeginNs = 0, bytes = -1, wireEndNs = 0;
    bool prefetched = false;
  };
  struct UnitState {
    Pending gather;
    int64_t computeBeginNs = 0;
  };
  static constexpr int64_t kNone = -1;

  size_t unitOf(const std::string& path) {
    // The root's as a ringx trace names it.
    const std::string name = path.empty() ? trace::track::kFsdpRootUnit : path;
    auto it = std::find(units_.begin(), units_.end(), name);
    if (it != units_.end()) return static_cast<size_t>(it - units_.begin());
    units_.push_back(name);
    return units_.size() - 1;
  }
  replay::FsdpStepRecord* current() { return step_ == kNone ? nullptr : &out_.steps[step_]; }
  void markRegathered(size_t unit) {
    if (out_.regathered.size() <= unit) out_.regathered.resize(unit + 1, false);
    out_.regathered[unit] = true;
  }

  void begin(const ScopeSpan& s) {
    const int64_t ns = s.begin;
    if (s.kind == FsdpScope::kRootPreForward) {
      if (replay::FsdpStepRecord* last = current(); last != nullptr && lastBackwardEndNs_ > 0) {
        last->optimizerNs = ns - lastBackwardEndNs_;
      }
      step_ = kNone;
      for (const auto& [n, window] : r_.steps) {
        if (window.first <= ns && ns <= window.second) step_ = n;
      }
      inBackward_ = false;
      lastBackwardEndNs_ = 0;
      if (replay::FsdpStepRecord* p = current()) {
        p->step = step_;
        p->forwardBeginNs = ns;
      }
      return;
    }
    replay::FsdpStepRecord* p = current();
    if (p == nullptr) return;  // outside the profiled steps
    const size_t unit = unitOf(s.unit);
    UnitState& u = state_[unit];
    switch (s.kind) {
      case FsdpScope::kPreForward:
      case FsdpScope::kPreBackward:
        if (s.kind == FsdpScope::kPreBackward && !inBackward_) {
          inBackward_ = true;
          p->backwardBeginNs = ns;
        }
        // Compute needs the unit's parameters from here: a gather not ready yet is waited for.
        u.gather.waitBeginNs = ns;
        return;
      case FsdpScope::kAllGather: {
        const int64_t waitBegin = u.gather.waitBeginNs;
        u.gather = Pending{};
        u.gather.issueNs = ns;
        u.gather.prefetched = inPrefetch(r_, s);
        // Issued by the unit's own pre_forward/pre_backward: waited for from its start.
        if (!u.gather.prefetched) u.gather.waitBeginNs = waitBegin;
        if (inBackward_) markRegathered(unit);
        if (u.gather.prefetched && !inBackward_) out_.forwardPrefetched = true;
        const TimedOp* w = s.issued.empty() ? nullptr : r_.wireOf[s.issued.front()];
        if (w != nullptr) {
          out_.missingShapes = out_.missingShapes || w->bytes < 0;
          u.gather.bytes = w->bytes;
          u.gather.wireEndNs = w->end;
        } else {
          out_.missingWire = true;
        }
        return;
      }
      case FsdpScope::kPostForward:
      case FsdpScope::kPostBackwardAccumulate:
      case FsdpScope::kPostBackwardReshard:
        if (u.computeBeginNs > 0) {
          auto& spans = s.kind == FsdpScope::kPostForward ? p->forward : p->backward;
          spans.push_back({unit, u.computeBeginNs, ns});
          u.computeBeginNs = 0;
        }
        return;
      case FsdpScope::kPostBackwardReduce:
        for (size_t k = 0; k < s.issued.size(); ++k) {
          const TimedOp& issue = r_.issues[s.issued[k]];
          const TimedOp* w = r_.wireOf[s.issued[k]];
          if (w == nullptr) {
            out_.missingWire = true;
            continue;
          }
          out_.missingShapes = out_.missingShapes || w->bytes < 0;
          // The first is the reduce-scatter whatever the backend runs it as; a second HSDP's.
          p->reductions.push_back({unit, k > 0, w->bytes, issue.begin, w->end, w->end});
        }
        return;
      default:
        return;
    }
  }

  void end(const ScopeSpan& s) {
    replay::FsdpStepRecord* p = current();
    if (p == nullptr) return;
    const size_t unit = unitOf(s.unit);
    UnitState& u = state_[unit];
    switch (s.kind) {
      case FsdpScope::kPreForward:
      case FsdpScope::kPreBackward:
        u.computeBeginNs = s.end;
        return;
      case FsdpScope::kCopyOut:
        if (u.gather.issueNs > 0) {
          Pending& g = u.gather;
          if (g.waitBeginNs > s.end) g.waitBeginNs = 0;
          const int64_t exposed =
              g.waitBeginNs > 0 ? std::max<int64_t>(0, s.end - g.waitBeginNs) : 0;
          p->gathers.push_back({unit, std::max<int64_t>(0, g.bytes), g.issueNs, s.end, exposed,
                                g.wireEndNs > 0 ? g.wireEndNs : s.end, g.prefetched});
        }
        u.gather = Pending{};
        return;
      case FsdpScope::kPostForward:
        p->forwardEndNs = s.end;
        postForward_[step_].push_back({unit, s.begin, s.end});
        return;
      case FsdpScope::kPostBackwardReshard:
        p->reshards.push_back({unit, s.begin, s.end});
        return;
      case FsdpScope::kRootPostBackward:
        if (p->forwardEndNs == 0) p->forwardEndNs = p->backwardBeginNs;
        p->backwardEndNs = s.end;
        lastBackwardEndNs_ = s.end;
        inBackward_ = false;
        return;
      default:
        return;
    }
  }

  const ProfiledFsdpRank& r_;
  std::vector<std::string>& units_;
  RankScopesRead out_;
  std::map<size_t, UnitState> state_;
  // The post_forward spans by step: frees only for units gathered again in backward.
  std::map<int64_t, std::vector<replay::FsdpStepRecord::Span>> postForward_;
  int64_t step_ = kNone;
  bool inBackward_ = false;
  int64_t lastBackwardEndNs_ = 0;
};

}  // namespace

bool holdsProfiledTorchFsdp2(const model::TraceStore& store) {
  return profiledSpanNamed(store, kRootScope);
}

ProfiledFsdp profiledTorchFsdp2(const model::TraceStore& store) {
  std::vector<ProfiledFsdpRank> ranks;
  for (const RankData& data : store.ranks()) {
    ProfiledFsdpRank r = readProfiledFsdpRank(store, data);
    if (!r.scopes.empty()) ranks.push_back(std::move(r));
  }
  if (ranks.empty()) {
    throw std::runtime_error("no FSDP:: scopes in these profiler traces: not a torch FSDP2 job");
  }
  std::sort(ranks.begin(), ranks.end(),
            [](const ProfiledFsdpRank& a, const ProfiledFsdpRank& b) { return a.rank < b.rank; });
  const std::vector<int64_t> numbers = stepsEveryRankHas(ranks);
  if (numbers.empty()) {
    throw std::runtime_error(
        "the ranks' profiler traces share no ProfilerStep#N: profile with a schedule "
        "(torch.profiler.schedule) and call prof.step() once per training step, on every rank");
  }
  ProfiledFsdp out;
  replay::FsdpRecording& rec = out.recording;
  bool regathered = false, forwardPrefetch = false;
  for (const ProfiledFsdpRank& r : ranks) {
    RankScopesRead read = RankScopesReader(r, rec.units).run();
    if (read.missingWire) {
      throw std::runtime_error(
          "rank " + std::to_string(r.rank) +
          "'s profiler trace has FSDP2 collectives without the backend's scope of them "
          "(gloo:all_gather, ringx:_all_gather_base): the wire's times are unknown (a GPU job's "
          "NCCL kernels are replayed by the profiler program, not as FSDP2 yet)");
    }
    if (read.missingShapes) {
      throw std::runtime_error(
          "these profiler traces do not record the collectives' tensors: profile with "
          "record_shapes=True (torch.profiler.profile(..., record_shapes=True)) to recover "
          "FSDP2's gathered and reduced bytes");
    }
    // Only the steps every rank profiled, complete.
    replay::FsdpRankRecord& rr = rec.ranks.emplace_back();
    rr.rank = r.rank;
    for (int64_t n : numbers) {
      auto it = read.steps.find(n);
      if (it == read.steps.end() || it->second.backwardEndNs == 0) continue;
      rr.steps.push_back(std::move(it->second));
    }
    if (rr.steps.empty()) {
      throw std::runtime_error("rank " + std::to_string(r.rank) +
                               "'s profiler trace has no step with FSDP2's root pre-forward and "
                               "its post-backward callback in one ProfilerStep#N");
    }
    for (size_t u = 0; u < read.regathered.size(); ++u) {
      // A unit other than the root gathered again in backward: reshard_after_forward=True.
      if (rec.units[u] != trace::track::kFsdpRootUnit && read.regathered[u]) regathered = true;
    }
    forwardPrefetch = forwardPrefetch || read.forwardPrefetched;
    if (out.wire.empty()) out.wire = r.wireBackend;
  }
  rec.runtime.sharding =
      regathered ? replay::FsdpSharding::kFullShard : replay::FsdpSharding::kShardGradOp;
  rec.runtime.backwardPrefetch = replay::FsdpBackwardPrefetch::kBackwardPre;
  rec.runtime.forwardPrefetch = forwardPrefetch;
  rec.runtime.limitAllGathers = false;  // FSDP2 has no rate limiter
  rec.runtime.gatherLane = false;
  rec.runtime.blocking = true;  // CPU tensors: the profiler program reads GPU jobs
  rec.runtime.fsdp2 = true;
  int64_t world = 0;
  for (const RankData& r : store.ranks()) world = std::max(world, r.worldSize);
  rec.worldSize = world > 0 ? world : static_cast<int64_t>(ranks.size());
  out.firstStep = rec.ranks.front().steps.front().step;
  return out;
}

}  // namespace ringx::analysis
