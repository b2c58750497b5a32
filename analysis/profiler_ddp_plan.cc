// torch DDP's buckets re-planned in a GPU job's profiler program (see profiler_ddp_plan.h).
#include "analysis/profiler_ddp_plan.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>

namespace ringx::analysis {

using replay::kNoOp;
using replay::ProgramOp;

std::vector<replay::BucketSpec> profiledPlan(const ProfiledDdp& ddp,
                                             const replay::BucketLimits& limits) {
  return replay::assignBuckets(ddp.recording.params, ddp.readiness, limits);
}

ProfilerProgram withBucketPlan(const ProfilerProgram& base, const ProfiledDdp& ddp,
                               const std::vector<replay::BucketSpec>& plan,
                               const replay::LinkFit& wire) {
  if (!wire.ok) {
    throw std::invalid_argument(
        "no wire could be fitted from the trace's collectives (no sizes recorded): the new "
        "buckets' allreduces cannot be timed");
  }
  const size_t params = ddp.readiness.size(), nb = plan.size();
  // Each gradient (in readiness order) to its new bucket; how many each bucket waits for.
  std::vector<size_t> readinessOf(ddp.recording.params.size(), 0);
  for (size_t k = 0; k < params; ++k) readinessOf[ddp.readiness[k]] = k;
  std::vector<size_t> bucketOf(params, 0), need(nb, 0);
  for (size_t b = 0; b < nb; ++b) {
    for (size_t p : plan[b].params) bucketOf[readinessOf[p]] = b;
    need[b] = plan[b].params.size();
  }
  // The recorded buckets' last gradients (readiness order).
  std::vector<size_t> recordedLast;
  {
    const std::vector<replay::BucketSpec> recorded = profiledPlan(ddp, ddp.recording.limits);
    for (const replay::BucketSpec& b : recorded) {
      size_t last = 0;
      for (size_t p : b.params) last = std::max(last, readinessOf[p]);
      recordedLast.push_back(last);
    }
  }

  // The program's steps by ProfilerStep number, and the ranks' DDP kernels by program rank.
  std::map<int64_t, size_t> stepOf;
  for (size_t s = 0; s < base.stepNumbers.size(); ++s) stepOf[base.stepNumbers[s]] = s;
  const size_t ranks = base.program.perRank.size();
  std::vector<const ProfiledDdpKernels*> kernelsOf(ranks, nullptr);
  for (size_t r = 0; r < ranks; ++r) {
    for (const ProfiledDdpKernels& k : ddp.kernels) {
      if (k.rank == base.times.ranks[r]) kernelsOf[r] = &k;
    }
    if (kernelsOf[r] == nullptr) {
      throw std::invalid_argument("rank " + std::to_string(base.times.ranks[r]) +
                                  "'s DDP kernels were not recovered: no bucket plan can be "
                                  "replayed without every rank's");
    }
  }
  // Steps every rank recorded the plan in: the ones rewritten (program step index -> its
  // position in each rank's kernels).
  std::map<size_t, std::vector<size_t>> rewritten;
  for (const auto& [number, s] : stepOf) {
    std::vector<size_t> at;
    for (size_t r = 0; r < ranks; ++r) {
      const std::vector<int64_t>& steps = kernelsOf[r]->steps;
      const auto it = std::find(steps.begin(), steps.end(), number);
      if (it == steps.end()) break;
      at.push_back(static_cast<size_t>(it - steps.begin()));
    }
    if (at.size() == ranks) rewritten[s] = std::move(at);
  }
  if (rewritten.empty()) {
    throw std::invalid_argument("no profiled step has DDP's buckets on every rank");
  }

  // The recorded allreduces' ops, their lane, stream and group, and per step their times
  // against the fit (the scale the new ones keep).
  auto collectiveOf = [&](size_t r, int64_t correlation) -> size_t {
    const auto it = base.opOf[r].find(correlation);
    if (it == base.opOf[r].end() ||
        base.program.perRank[r].ops[it->second].type != ProgramOp::Type::kIssue) {
      throw std::invalid_argument(
          "DDP's allreduce kernels are not collectives matched across ranks in this program: "
          "give every rank's file of the same steps");
    }
    return it->second;
  };
  size_t lane = 0;
  int64_t groupSize = static_cast<int64_t>(ranks);
  std::vector<uint32_t> commQueue(ranks, 0);
  std::map<size_t, double> scale;
  for (const auto& [s, at] : rewritten) {
    double recorded = 0, fitted = 0;
    for (size_t r = 0; r < ranks; ++r) {
      for (int64_t correlation : kernelsOf[r]->allreduces[at[r]]) {
        const ProgramOp& issue = base.program.perRank[r].ops[collectiveOf(r, correlation)];
        commQueue[r] = issue.queue;
        if (r != 0) continue;
        const size_t c = issue.collective;
        lane = base.program.collectives[c].lane;
        groupSize = base.collectiveGroupSize[c];
        recorded += static_cast<double>(base.program.collectives[c].ns);
        fitted += static_cast<double>(
            replay::collectiveNs(wire.link, "allreduce", base.collectiveBytes[c], groupSize));
      }
    }
    scale[s] = recorded > 0 && fitted > 0 ? recorded / fitted : 1.0;
  }

  // The recorded allreduces' collectives, by step.
  std::map<size_t, size_t> droppedStep;  // collective -> step
  for (const auto& [s, at] : rewritten) {
    for (int64_t correlation : kernelsOf[0]->allreduces[at[0]]) {
      droppedStep[base.program.perRank[0].ops[collectiveOf(0, correlation)].collective] = s;
    }
  }
  // The collectives anew: a lane runs its collectives in index order, so each step's new
  // buckets take the place of its recorded ones.
  ProfilerProgram out = base;
  out.program.collectives.clear();
  out.collectiveOps.clear();
  out.collectiveBytes.clear();
  out.collectiveGroupSize.clear();
  out.recordedStartNs.clear();
  std::vector<size_t> collectiveNow(base.program.collectives.size(), kNoOp);
  std::map<std::pair<size_t, size_t>, size_t> collectiveFor;
  auto keep = [&](size_t c) {
    collectiveNow[c] = out.program.collectives.size();
    out.program.collectives.push_back(base.program.collectives[c]);
    out.collectiveOps.push_back(base.collectiveOps[c]);
    out.collectiveBytes.push_back(base.collectiveBytes[c]);
    out.collectiveGroupSize.push_back(base.collectiveGroupSize[c]);
    out.recordedStartNs.push_back(base.recordedStartNs[c]);
  };
  auto addBuckets = [&](size_t s) {
    for (size_t b = 0; b < nb; ++b) {
      replay::ProgramCollective c;
      c.kind = replay::PathSegment::Kind::kAllreduce;
      c.bytes = plan[b].bytes;
      c.lane = lane;
      c.owner = static_cast<int64_t>(b);
      c.step = s;
      c.ns = std::llround(
          static_cast<double>(replay::collectiveNs(wire.link, "allreduce", c.bytes, groupSize)) *
          scale[s]);
      collectiveFor[{s, b}] = out.program.collectives.size();
      out.program.collectives.push_back(c);
      out.collectiveOps.push_back("allreduce");
      out.collectiveBytes.push_back(c.bytes);
      out.collectiveGroupSize.push_back(groupSize);
      out.recordedStartNs.push_back(-1);  // never ran
    }
  };
  for (size_t c = 0; c < base.program.collectives.size(); ++c) {
    const auto d = droppedStep.find(c);
    if (d == droppedStep.end()) {
      keep(c);
    } else if (collectiveFor.count({d->second, 0}) == 0) {
      addBuckets(d->second);
    }
  }
  out.collectives = out.program.collectives.size();

  for (size_t r = 0; r < ranks; ++r) {
    const replay::RankProgram& old = base.program.perRank[r];
    const ProfiledDdpKernels& k = *kernelsOf[r];
    // The old ops' roles: dropped (-> the recorded bucket's last gradient and its step),
    // making gradients ready, copying one back.
    std::unordered_map<size_t, std::pair<size_t, size_t>> dropped;
    std::unordered_map<size_t, std::vector<std::pair<size_t, size_t>>> readies;
    for (const auto& [s, at] : rewritten) {
      const std::vector<int64_t>& allreduces = k.allreduces[at[r]];
      for (size_t b = 0; b < allreduces.size() && b < recordedLast.size(); ++b) {
        const size_t issue = collectiveOf(r, allreduces[b]);
        dropped[issue] = dropped[issue + 1] = {s, recordedLast[b]};
      }
      const std::vector<int64_t>& ready = k.ready[at[r]];
      for (size_t g = 0; g < ready.size() && g < params; ++g) {
        const auto it = base.opOf[r].find(ready[g]);
        if (it == base.opOf[r].end()) {
          throw std::invalid_argument(
              "rank " + std::to_string(k.rank) +
              "'s program does not hold the kernel a gradient became ready at (launched outside "
              "the profiled steps?)");
        }
        readies[it->second].emplace_back(s, g);
      }
    }
    std::unordered_map<size_t, size_t> copyOf;  // op -> gradient
    for (const auto& [correlation, g] : k.copies) {
      if (const auto it = base.opOf[r].find(correlation); it != base.opOf[r].end()) {
        copyOf[it->second] = g;
      }
    }

    replay::RankProgram neu;
    std::vector<size_t> newIndex(old.ops.size(), kNoOp);
    std::map<size_t, std::vector<size_t>> arrived, waitOp;  // per step: per bucket
    std::map<size_t, size_t> nextBucket;
    for (const auto& [s, at] : rewritten) {
      arrived[s].assign(nb, 0);
      waitOp[s].assign(nb, kNoOp);
      nextBucket[s] = 0;
    }
    auto push = [&](ProgramOp op, const std::vector<size_t>& deps) {
      op.firstDep = static_cast<uint32_t>(neu.deps.size());
      op.depCount = static_cast<uint32_t>(deps.size());
      neu.deps.insert(neu.deps.end(), deps.begin(), deps.end());
      neu.ops.push_back(op);
      return neu.ops.size() - 1;
    };
    for (size_t i = 0; i < old.ops.size(); ++i) {
      if (dropped.count(i) != 0) continue;
      ProgramOp op = old.ops[i];
      const auto copy = copyOf.find(i);
      std::vector<size_t> deps;
      for (uint32_t d = 0; d < op.depCount; ++d) {
        const size_t from = old.deps[op.firstDep + d];
        if (newIndex[from] != kNoOp) {
          deps.push_back(newIndex[from]);
        } else if (const auto x = dropped.find(from); x != dropped.end() && copy == copyOf.end()) {
          // What waited for a recorded allreduce waits for the bucket that now ends with its
          // last gradient (a copy back waits for its own gradient's, below).
          const size_t w = waitOp[x->second.first][bucketOf[x->second.second]];
          if (w != kNoOp) deps.push_back(w);
        }
      }
      if (copy != copyOf.end() && waitOp.count(op.step) != 0) {
        const size_t w = waitOp[op.step][bucketOf[copy->second]];
        if (w != kNoOp) deps.push_back(w);
      }
      if (op.launchedBy != kNoOp) op.launchedBy = newIndex[op.launchedBy];
      if (op.type == ProgramOp::Type::kIssue || op.type == ProgramOp::Type::kWait) {
        op.collective = collectiveNow[op.collective];
      }
      const size_t at = push(op, deps);
      newIndex[i] = at;
      const auto ready = readies.find(i);
      if (ready == readies.end()) continue;
      for (const auto& [s, g] : ready->second) {
        ++arrived[s][bucketOf[g]];
        // The buckets whose gradients are all ready, in index order.
        for (size_t& b = nextBucket[s]; b < nb && arrived[s][b] == need[b]; ++b) {
          ProgramOp issue;
          issue.type = ProgramOp::Type::kIssue;
          issue.kind = replay::PathSegment::Kind::kAllreduce;
          issue.collective = collectiveFor.at({s, b});
          issue.step = s;
          issue.queue = commQueue[r];
          issue.launchedBy = neu.ops[at].launchedBy;
          push(issue, {at});
          ProgramOp wait = issue;
          wait.type = ProgramOp::Type::kWait;
          wait.launchedBy = kNoOp;
          waitOp[s][b] = push(wait, {});
        }
      }
    }
    for (const auto& [s, b] : nextBucket) {
      if (b < nb) {
        throw std::invalid_argument("rank " + std::to_string(k.rank) + "'s gradients of step " +
                                    std::to_string(base.stepNumbers[s]) +
                                    " were not all made ready by ops of the program");
      }
    }
    out.program.perRank[r] = std::move(neu);
    // Correlations now index the rewritten program.
    for (auto& [correlation, op] : out.opOf[r]) op = newIndex[op];
  }
  return out;
}

}  // namespace ringx::analysis
