// Two runs compared item by item (see diff.h for how they are aligned and why).
#include "analysis/diff.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <tuple>

#include "analysis/figures.h"
#include "analysis/trace_analyses.h"
#include "base/error.h"
#include "base/text.h"

namespace ringx::analysis {
namespace {

// A figure's samples within one run: its mean and spread.
struct Spread {
  double sum = 0, sumSquares = 0;
  uint64_t n = 0;
  void add(double x) {
    sum += x;
    sumSquares += x * x;
    ++n;
  }
  double variance() const {
    if (n < 2) return 0;
    const double mean = sum / double(n);
    return std::max(0.0, sumSquares / double(n) - mean * mean);
  }
};

// A row's noise (diff.h): the pooled spread of A's and B's samples, at least the floor.
constexpr double kFloorNs = 1000, kFloorShare = 0.01, kUnknownShare = 0.05;
int64_t noiseOf(const Spread* a, const Spread* b, int64_t aNs, int64_t bNs) {
  const double larger = double(std::max(std::llabs(aNs), std::llabs(bNs)));
  double noise = a && b ? std::sqrt((a->variance() + b->variance()) / 2) : kUnknownShare * larger;
  noise = std::max(noise, kFloorNs + kFloorShare * larger);
  return std::llround(noise);
}

DiffRow makeRow(DiffKind kind, std::string name, int64_t a, int64_t b, int64_t aTime = -1,
                int64_t bTime = -1, const Spread* aSpread = nullptr,
                const Spread* bSpread = nullptr) {
  DiffRow r;
  r.kind = kind;
  r.name = std::move(name);
  r.aNs = a;
  r.bNs = b;
  r.deltaNs = b - a;
  r.aTimeNs = aTime;
  r.bTimeNs = bTime;
  r.noiseNs = noiseOf(aSpread, bSpread, a, b);
  r.score = double(r.deltaNs) / double(r.noiseNs);
  return r;
}

// A collective's duration in one run: the mean of its ranks' spans.
int64_t meanDuration(const CollectiveRow& row) {
  int64_t total = 0;
  for (const CollectiveRank& r : row.ranks) total += r.durationNs;
  return meanOf(total, row.ranks.size());
}

// One run's iterations by step: the mean over ranks of forward + backward +
// optimizer, and where the step began (the earliest rank).
struct StepTime {
  int64_t total = 0;
  uint64_t ranks = 0;
  int64_t beginNs = -1;
};

template <typename Iteration>
std::map<int64_t, StepTime> stepTimes(const std::vector<Iteration>& iterations) {
  std::map<int64_t, StepTime> steps;
  for (const Iteration& it : iterations) {
    StepTime& s = steps[it.step];
    s.total += it.forwardNs + it.backwardNs + it.optimizerNs;
    ++s.ranks;
    const int64_t begin = it.forwardBeginNs > 0 ? it.forwardBeginNs : it.backwardBeginNs;
    if (s.beginNs < 0 || begin < s.beginNs) s.beginNs = begin;
  }
  return steps;
}

template <typename Iteration>
void diffSteps(const std::vector<Iteration>& a, const std::vector<Iteration>& b, RunDiff& d) {
  const auto stepsA = stepTimes(a), stepsB = stepTimes(b);
  Spread spreadA, spreadB;  // step times within each run
  for (const auto& [step, s] : stepsA) spreadA.add(double(meanOf(s.total, s.ranks)));
  for (const auto& [step, s] : stepsB) spreadB.add(double(meanOf(s.total, s.ranks)));
  for (const auto& [step, sa] : stepsA) {
    auto found = stepsB.find(step);
    if (found == stepsB.end()) continue;
    const StepTime& sb = found->second;
    d.rows.push_back(makeRow(DiffKind::kStep, strCat("step ", step), meanOf(sa.total, sa.ranks),
                             meanOf(sb.total, sb.ranks), sa.beginNs, sb.beginNs, &spreadA,
                             &spreadB));
    // Averaged rows point at the last step both runs recorded: past warm-up.
    d.exampleStep = step;
    d.exampleStepBeginA = sa.beginNs;
    d.exampleStepBeginB = sb.beginNs;
  }
}

// Where bucket `bucket` ran in `step` on the lowest rank that recorded it; -1 if nowhere.
int64_t bucketBegin(const DdpAnalysis& ddp, int64_t step, int64_t bucket) {
  for (const DdpIteration& it : ddp.iterations) {  // by rank, then step
    if (it.step != step) continue;
    for (const DdpBucketSample& sample : it.buckets)
      if (sample.bucket == bucket) return sample.beginNs;
  }
  return -1;
}

void diffEngines(const TraceStore& a, const TraceStore& b, RunDiff& d) {
  const DdpAnalysis ddpA = analyzeDdp(a), ddpB = analyzeDdp(b);
  const FsdpAnalysis fsdpA = analyzeFsdp(a), fsdpB = analyzeFsdp(b);
  auto phases = [&](const auto& x, const auto& y) {
    d.aIterations = x.iterations.size();
    d.bIterations = y.iterations.size();
    diffSteps(x.iterations, y.iterations, d);
    const int64_t atA = d.exampleStepBeginA, atB = d.exampleStepBeginB;
    d.phases.push_back(
        makeRow(DiffKind::kPhase, "forward", x.forwardMeanNs, y.forwardMeanNs, atA, atB));
    d.phases.push_back(
        makeRow(DiffKind::kPhase, "backward", x.backwardMeanNs, y.backwardMeanNs, atA, atB));
    d.phases.push_back(
        makeRow(DiffKind::kPhase, "optimizer", x.optimizerMeanNs, y.optimizerMeanNs, atA, atB));
    d.phases.push_back(makeRow(DiffKind::kPhase, "exposed communication", x.exposedMeanNs,
                               y.exposedMeanNs, atA, atB));
  };
  if (!ddpA.iterations.empty() && !ddpB.iterations.empty()) {
    d.engine = "DDP";
    phases(ddpA, ddpB);
  } else if (!fsdpA.iterations.empty() && !fsdpB.iterations.empty()) {
    d.engine = "FSDP";
    phases(fsdpA, fsdpB);
  }

  // Each bucket figure's samples (every iteration of every rank) in each run.
  struct BucketSpreads {
    Spread wire, exposed, launchDelay;
  };
  auto bucketSpreads = [](const DdpAnalysis& ddp) {
    std::map<int64_t, BucketSpreads> out;
    for (const DdpIteration& it : ddp.iterations)
      for (const DdpBucketSample& sample : it.buckets) {
        BucketSpreads& s = out[sample.bucket];
        s.wire.add(double(sample.wireNs));
        s.exposed.add(double(sample.exposedNs));
        s.launchDelay.add(double(sample.launchDelayNs));
      }
    return out;
  };
  const auto spreadsA = bucketSpreads(ddpA), spreadsB = bucketSpreads(ddpB);
  std::map<int64_t, const DdpBucketAverage*> bucketsB;
  for (const auto& bucket : ddpB.buckets) bucketsB[bucket.bucket] = &bucket;
  for (const auto& x : ddpA.buckets) {
    auto found = bucketsB.find(x.bucket);
    if (found == bucketsB.end()) continue;
    const DdpBucketAverage& y = *found->second;
    const std::string name = strCat("bucket ", x.bucket);
    const int64_t atA = bucketBegin(ddpA, d.exampleStep, x.bucket);
    const int64_t atB = bucketBegin(ddpB, d.exampleStep, x.bucket);
    const auto sa = spreadsA.find(x.bucket), sb = spreadsB.find(x.bucket);
    const bool sampled = sa != spreadsA.end() && sb != spreadsB.end();
    d.rows.push_back(makeRow(DiffKind::kBucket, name + " wire", x.wireMeanNs, y.wireMeanNs, atA,
                             atB, sampled ? &sa->second.wire : nullptr,
                             sampled ? &sb->second.wire : nullptr));
    d.rows.push_back(makeRow(DiffKind::kBucket, name + " exposed", x.exposedMeanNs, y.exposedMeanNs,
                             atA, atB, sampled ? &sa->second.exposed : nullptr,
                             sampled ? &sb->second.exposed : nullptr));
    d.rows.push_back(makeRow(DiffKind::kBucket, name + " wait to launch", x.launchDelayMeanNs,
                             y.launchDelayMeanNs, atA, atB,
                             sampled ? &sa->second.launchDelay : nullptr,
                             sampled ? &sb->second.launchDelay : nullptr));
  }

  std::map<std::string, const FsdpUnitAnalysis*> unitsB;
  for (const auto& unit : fsdpB.units) unitsB[unit.unit] = &unit;
  for (const auto& x : fsdpA.units) {
    auto found = unitsB.find(x.unit);
    if (found == unitsB.end()) continue;
    const FsdpUnitAnalysis& y = *found->second;
    auto unitRow = [&](const char* what, int64_t a, int64_t b) {
      d.rows.push_back(
          makeRow(DiffKind::kUnit, x.unit + what, a, b, x.firstBeginNs, y.firstBeginNs));
    };
    unitRow(" all_gather wire", x.gatherWireMeanNs, y.gatherWireMeanNs);
    unitRow(" waited for all_gather", x.exposedMeanNs, y.exposedMeanNs);
    unitRow(" forward", x.forwardMeanNs, y.forwardMeanNs);
    unitRow(" backward", x.backwardMeanNs, y.backwardMeanNs);
    if (x.reduceScatters && y.reduceScatters)
      unitRow(" reduce_scatter wire", x.reduceScatterMeanNs, y.reduceScatterMeanNs);
  }
}

// The durations of each run's collectives of one op, size and group: a collective's noise.
using CollectiveClass = std::tuple<std::string, int64_t, std::string>;
std::map<CollectiveClass, Spread> collectiveSpreads(const std::vector<CollectiveRow>& rows) {
  std::map<CollectiveClass, Spread> out;
  for (const CollectiveRow& row : rows)
    out[{row.op, row.bytes, row.group}].add(double(meanDuration(row)));
  return out;
}

void diffCollectives(const TraceStore& a, const TraceStore& b, RunDiff& d) {
  const std::vector<CollectiveRow> rowsA = matchCollectives(a);
  const std::vector<CollectiveRow> rowsB = matchCollectives(b);
  const auto spreadsA = collectiveSpreads(rowsA), spreadsB = collectiveSpreads(rowsB);
  std::map<std::pair<std::string, int64_t>, const CollectiveRow*> byKey;
  for (const CollectiveRow& row : rowsB) byKey[{row.group, row.seq}] = &row;
  uint64_t matchedInB = 0;
  for (const CollectiveRow& x : rowsA) {
    auto found = byKey.find({x.group, x.seq});
    if (found == byKey.end()) {
      ++d.onlyInA;
      continue;
    }
    ++matchedInB;
    const CollectiveRow& y = *found->second;
    if (x.op != y.op) {
      if (d.opMismatches++ == 0) {
        d.firstMismatch =
            strCat("seq ", x.seq, " of group ", x.group, ": ", x.op, " in A, ", y.op, " in B");
      }
      continue;
    }
    ++d.matchedCollectives;
    const int64_t da = meanDuration(x), db = meanDuration(y);
    d.collectiveTotalA += da;
    d.collectiveTotalB += db;
    std::string name = strCat(x.op, " seq ", x.seq, " (group ", x.group);
    if (x.bytes >= 0) name += strCat(", ", formatBytes(x.bytes));
    name += ")";
    d.rows.push_back(makeRow(DiffKind::kCollective, std::move(name), da, db, x.firstBeginNs,
                             y.firstBeginNs, &spreadsA.at({x.op, x.bytes, x.group}),
                             &spreadsB.at({y.op, y.bytes, y.group})));
  }
  d.onlyInB = rowsB.size() - matchedInB;
}

}  // namespace

std::string formatRatio(int64_t a, int64_t b) {
  if (a <= 0) return "-";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2fx", static_cast<double>(b) / static_cast<double>(a));
  return buffer;
}

const char* diffKindName(DiffKind kind) {
  switch (kind) {
    case DiffKind::kStep:
      return "step";
    case DiffKind::kPhase:
      return "phase";
    case DiffKind::kCollective:
      return "collective";
    case DiffKind::kBucket:
      return "bucket";
    case DiffKind::kUnit:
      return "unit";
  }
  return "?";
}

RunDiff diffRuns(const TraceStore& a, const TraceStore& b) {
  RunDiff d;
  diffEngines(a, b, d);
  diffCollectives(a, b, d);
  // The regression that stands out most from its own noise first, then by size; ties in a
  // stable, readable order.
  std::stable_sort(d.rows.begin(), d.rows.end(), [](const DiffRow& x, const DiffRow& y) {
    if (x.score != y.score) return x.score > y.score;
    return x.deltaNs > y.deltaNs;
  });
  return d;
}

std::string formatDiff(const RunDiff& d, const std::string& aName, const std::string& bName,
                       size_t top) {
  std::string out = strCat("ringx trace diff\n  A: ", aName, "\n  B: ", bName, "\n");
  char line[512];
  if (!d.engine.empty()) {
    out += strCat("\nStep time (", d.engine, " engine; means over ", d.aIterations, " and ",
                  d.bIterations, " iterations of all ranks)\n");
    std::snprintf(line, sizeof line, "  %-24s %12s %12s %12s %8s\n", "", "A", "B", "B - A", "B/A");
    out += line;
    for (const DiffRow& p : d.phases) {
      std::snprintf(line, sizeof line, "  %-24s %12s %12s %12s %8s\n", p.name.c_str(),
                    formatDuration(p.aNs).c_str(), formatDuration(p.bNs).c_str(),
                    formatSignedDuration(p.deltaNs).c_str(), formatRatio(p.aNs, p.bNs).c_str());
      out += line;
    }
  }
  out += strCat("\nCollectives matched by (group, seq): ", d.matchedCollectives);
  if (d.onlyInA || d.onlyInB)
    out += strCat(" (only in A: ", d.onlyInA, ", only in B: ", d.onlyInB, ")");
  out += "\n";
  if (d.matchedCollectives > 0) {
    out += strCat("  time in them (mean over ranks, summed): A ",
                  formatDuration(d.collectiveTotalA), ", B ", formatDuration(d.collectiveTotalB),
                  ", B - A ", formatSignedDuration(d.collectiveTotalB - d.collectiveTotalA), " (",
                  formatRatio(d.collectiveTotalA, d.collectiveTotalB), ")\n");
  }
  if (d.opMismatches > 0) {
    out += strCat("  the runs diverged: ", d.opMismatches,
                  " collectives have a different op at the same seq (first: ", d.firstMismatch,
                  "); they are not compared\n");
  }
  auto table = [&](const char* title, auto begin, auto end, auto keep) {
    std::vector<const DiffRow*> rows;
    for (auto it = begin; it != end && rows.size() < top; ++it)
      if (keep(*it)) rows.push_back(&*it);
    if (rows.empty()) return;
    out += strCat("\n", title, "\n");
    std::snprintf(line, sizeof line, "  %-10s %-44s %12s %12s %12s %8s %12s %8s\n", "kind", "what",
                  "A", "B", "B - A", "B/A", "noise", "/ noise");
    out += line;
    for (const DiffRow* r : rows) {
      std::snprintf(line, sizeof line, "  %-10s %-44s %12s %12s %12s %8s %12s %8.1f\n",
                    diffKindName(r->kind), r->name.c_str(), formatDuration(r->aNs).c_str(),
                    formatDuration(r->bNs).c_str(), formatSignedDuration(r->deltaNs).c_str(),
                    formatRatio(r->aNs, r->bNs).c_str(), formatDuration(r->noiseNs).c_str(),
                    r->score);
      out += line;
    }
  };
  table("Largest regressions (B slower than A), furthest above their noise first", d.rows.begin(),
        d.rows.end(), [](const DiffRow& r) { return r.deltaNs > 0; });
  table("Largest improvements (B faster than A)", d.rows.rbegin(), d.rows.rend(),
        [](const DiffRow& r) { return r.deltaNs < 0; });
  if (d.rows.empty())
    out += "\nNothing to compare: no collective, step, bucket or unit is in both runs\n";
  return out;
}

}  // namespace ringx::analysis
