// The alpha-beta cost of a ring collective and its fit (see cost_model.h).
#include "analysis/replay/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "analysis/figures.h"

namespace ringx::replay {

std::string LinkCost::describe() const {
  char text[96];
  const double gbps = nsPerByte > 0 ? 1.0 / nsPerByte : 0;
  std::snprintf(text, sizeof text, "%.1f us/step, %.2f GB/s", stepNs / 1e3, gbps);
  return text;
}

RingShape ringShape(std::string_view op, int64_t bytes, int64_t ranks) {
  RingShape shape;
  shape.steps = analysis::ringSteps(op, ranks);
  if (shape.steps == 0) return shape;
  shape.bytesSent =
      static_cast<double>(std::max<int64_t>(bytes, 0)) * analysis::busBandwidthFactor(op, ranks);
  return shape;
}

namespace {

// The share of a core each of a host's runnable threads gets: `threadsPerRank` of them on each of
// the host's ranks of `world` (the ranks spread evenly over the hosts), capped at one.
// The ranks of `world` on the busiest of `host.hosts` (the ranks spread evenly).
int64_t ranksPerHost(const HostCores& host, int64_t world) {
  const int64_t hosts = std::max<int64_t>(1, host.hosts);
  return (world + hosts - 1) / hosts;
}

double coreShare(const HostCores& host, int64_t world, int64_t threadsPerRank) {
  const int64_t perHost = ranksPerHost(host, world);
  return std::min(1.0,
                  host.cores / static_cast<double>(perHost * std::max<int64_t>(1, threadsPerRank)));
}

}  // namespace

HostCores hostsAt(const HostCores& host, int64_t recordedWorld, int64_t worldSize) {
  HostCores out = host;
  if (host.hosts <= 1 || recordedWorld <= 0 || worldSize <= 0) return out;
  // Ranks per host as recorded, hosts enough for all.
  const int64_t perHost = ranksPerHost(host, recordedWorld);
  out.hosts = (worldSize + perHost - 1) / perHost;
  return out;
}

double hostShareRatio(const HostCores& host, int64_t recordedWorld, int64_t worldSize) {
  if (host.cores <= 0 || recordedWorld <= 0 || worldSize <= 0) return 1;
  return coreShare(host, recordedWorld, host.threadsPerRank) /
         coreShare(hostsAt(host, recordedWorld, worldSize), worldSize, host.threadsPerRank);
}

double coresContention(const HostCores& host, int64_t worldSize) {
  if (host.cores <= 0 || worldSize <= 0) return 0;
  const int64_t threads = std::max<int64_t>(1, host.threadsPerRank);
  return 1 - coreShare(host, worldSize, threads + 1) / coreShare(host, worldSize, threads);
}

int64_t collectiveNs(const LinkCost& link, std::string_view op, int64_t bytes, int64_t ranks) {
  const RingShape shape = ringShape(op, bytes, ranks);
  if (shape.steps == 0) return 0;
  return static_cast<int64_t>(std::llround(link.stepNs * static_cast<double>(shape.steps) +
                                           link.nsPerByte * shape.bytesSent));
}

namespace {

// Weighted least squares of t on (s, b) through the origin, weights 1/t^2: minimises the
// summed squared relative error. Returns false when the normal equations are singular.
bool solve(const std::vector<CostSample>& samples, LinkCost* out) {
  double ss = 0, sb = 0, bb = 0, st = 0, bt = 0;
  for (const CostSample& c : samples) {
    const RingShape shape = ringShape(c.op, c.bytes, c.ranks);
    const double t = static_cast<double>(c.durationNs);
    const double w = 1.0 / (t * t);
    const double s = static_cast<double>(shape.steps), b = shape.bytesSent;
    ss += w * s * s;
    sb += w * s * b;
    bb += w * b * b;
    st += w * s * t;
    bt += w * b * t;
  }
  const double det = ss * bb - sb * sb;
  if (std::fabs(det) <= 1e-12 * ss * bb) return false;
  out->stepNs = (st * bb - bt * sb) / det;
  out->nsPerByte = (ss * bt - sb * st) / det;
  return true;
}

// The median |priced - recorded| / recorded of `samples` under `link`.
double medianErrorShare(const LinkCost& link, const std::vector<CostSample>& samples) {
  std::vector<double> errors;
  for (const CostSample& c : samples) {
    const double t = static_cast<double>(c.durationNs);
    errors.push_back(std::fabs(collectiveNs(link, c.op, c.bytes, c.ranks) - t) / t);
  }
  return analysis::median(errors);
}

// One constant alone (the other 0), least squares in relative error.
double onlyConstant(const std::vector<CostSample>& samples, bool steps) {
  double num = 0, den = 0;
  for (const CostSample& c : samples) {
    const RingShape shape = ringShape(c.op, c.bytes, c.ranks);
    const double x = steps ? static_cast<double>(shape.steps) : shape.bytesSent;
    const double t = static_cast<double>(c.durationNs);
    num += x / t;
    den += (x / t) * (x / t);
  }
  return den > 0 ? num / den : 0;
}

}  // namespace

LinkFit fitLinkCost(const std::vector<CostSample>& all) {
  LinkFit fit;
  std::vector<CostSample> samples;
  for (const CostSample& c : all) {
    if (c.durationNs > 0 && c.ranks >= 2 && c.bytes >= 0) samples.push_back(c);
  }
  fit.samples = samples.size();
  if (samples.empty()) return fit;
  fit.ok = true;
  // Distinct shapes: with one, steps and bytes are proportional and cannot be told apart.
  std::vector<std::pair<int64_t, double>> shapes;
  for (const CostSample& c : samples) {
    const RingShape s = ringShape(c.op, c.bytes, c.ranks);
    shapes.emplace_back(s.steps, s.bytesSent);
  }
  std::sort(shapes.begin(), shapes.end());
  shapes.erase(std::unique(shapes.begin(), shapes.end()), shapes.end());
  LinkCost both;
  if (shapes.size() >= 2 && solve(samples, &both) && both.stepNs >= 0 && both.nsPerByte >= 0) {
    fit.link = both;
    fit.separated = true;
  } else if (shapes.size() >= 2) {
    // The unconstrained optimum has a negative constant: the best with that one at 0.
    LinkCost bytesOnly{0, onlyConstant(samples, false)};
    LinkCost stepsOnly{onlyConstant(samples, true), 0};
    auto error = [&](const LinkCost& l) {
      double e = 0;
      for (const CostSample& c : samples) {
        const double r =
            (collectiveNs(l, c.op, c.bytes, c.ranks) - static_cast<double>(c.durationNs)) /
            static_cast<double>(c.durationNs);
        e += r * r;
      }
      return e;
    };
    fit.link = error(bytesOnly) <= error(stepsOnly) ? bytesOnly : stepsOnly;
    fit.separated = true;
  } else {
    fit.link = {0, onlyConstant(samples, false)};
  }
  fit.medianErrorShare = medianErrorShare(fit.link, samples);
  return fit;
}

LinkFit calibratedLink(const std::vector<CostSample>& calibration, std::string_view op) {
  std::vector<CostSample> mine;
  for (const CostSample& c : calibration) {
    if (c.op == op && c.durationNs > 0 && c.ranks >= 2 && c.bytes >= 0) mine.push_back(c);
  }
  LinkFit fit;
  fit.samples = mine.size();
  if (mine.empty()) return fit;
  auto byBytes = [](const CostSample& a, const CostSample& b) { return a.bytes < b.bytes; };
  const CostSample& small = *std::min_element(mine.begin(), mine.end(), byBytes);
  const CostSample& large = *std::max_element(mine.begin(), mine.end(), byBytes);
  const RingShape s = ringShape(op, small.bytes, small.ranks),
                  l = ringShape(op, large.bytes, large.ranks);
  if (l.bytesSent <= s.bytesSent || s.steps <= 0) return fit;
  fit.link.nsPerByte = std::max(
      0.0, static_cast<double>(large.durationNs - small.durationNs) / (l.bytesSent - s.bytesSent));
  fit.link.stepNs =
      std::max(0.0, (static_cast<double>(small.durationNs) - fit.link.nsPerByte * s.bytesSent) /
                        static_cast<double>(s.steps));
  fit.ok = fit.separated = true;
  fit.medianErrorShare = medianErrorShare(fit.link, mine);
  return fit;
}

}  // namespace ringx::replay
