// bench/latency_method.py's method for the C++ rank programs of bench/vs_libraries.py
// (bench/oneccl_ranks.cc: oneCCL; bench/ringx_ranks.cc: ringx without torch), ported as it
// is, so that every side times a case the same way: settle() barriers first, then per case one
// operation to warm up, and `operations` single operations each timed alone right after a
// barrier; the median of them on every rank, and the slowest rank's median is the figure.
// The cases and their operation counts come from latency_method.case_arguments() on the
// command line ("allreduce:4096:400,...,barrier:0:400"): they are defined in Python only.
// Header-only and standard C++ only: oneccl_setup.sh compiles oneccl_ranks.cc with a plain c++.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace latency_method {

struct Case {
  std::string collective;
  long long bytes = 0;
  int operations = 0;
};

inline std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// case_arguments()'s text back into cases.
inline std::vector<Case> parseCases(const std::string& text) {
  std::vector<Case> cases;
  for (const auto& item : split(text, ',')) {
    const auto parts = split(item, ':');
    if (parts.size() != 3) throw std::runtime_error("a case is collective:bytes:operations");
    cases.push_back({parts[0], std::stoll(parts[1]), std::stoi(parts[2])});
  }
  return cases;
}

// latency_method.element_count: float32 elements of each rank's input.
inline size_t elementCount(const std::string& collective, long long bytes, int world) {
  const size_t elements = static_cast<size_t>(bytes) / 4;
  if (collective == "all_gather") return elements / world;
  if (collective == "reduce_scatter") return elements / world * world;
  return elements;
}

// The buffers of one case and the operation on them, as bench/openmpi_ranks.py's make_op.
struct Op {
  std::vector<float> input, output;
  std::function<void()> run;
};

// The float32 buffers of one case, as bench/openmpi_ranks.py's make_op makes them: the input
// holds elementCount() ones; the output is the gathered whole (all_gather) or this rank's share
// (reduce_scatter), and the other collectives work in place on the input.
inline void makeBuffers(Op& op, const Case& c, int world) {
  const size_t n = elementCount(c.collective, c.bytes, world);
  op.input.assign(n, 1.0f);
  if (c.collective == "all_gather") op.output.resize(n * world);
  if (c.collective == "reduce_scatter") op.output.resize(n / world);
}

// latency_method.median_single_op_seconds (statistics.median: the mean of the middle two of
// an even count).
inline double medianSingleOpSeconds(const std::function<void()>& op,
                                    const std::function<void()>& barrier, int count) {
  using Clock = std::chrono::steady_clock;
  op();  // connections, caches and buffers warm
  std::vector<double> samples;
  samples.reserve(count);
  for (int i = 0; i < count; ++i) {
    barrier();
    const auto start = Clock::now();
    op();
    samples.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(samples.begin(), samples.end());
  const size_t mid = samples.size() / 2;
  return samples.size() % 2 ? samples[mid] : (samples[mid - 1] + samples[mid]) / 2;
}

// Times every case on this rank: settle barriers, then each case's median, made the slowest
// rank's by `slowest` (a MAX allreduce of one double). Returns rank 0's line of output,
// {"collective size": seconds, ...}, as bench/openmpi_ranks.py prints it.
inline std::string timeCases(const std::vector<Case>& cases, int settle,
                             const std::function<void()>& barrier,
                             const std::function<void(Op&, const Case&)>& makeOp,
                             const std::function<double(double)>& slowest) {
  for (int i = 0; i < settle; ++i) barrier();  // latency_method.settle
  std::string json = "{";
  for (const auto& c : cases) {
    Op op;
    makeOp(op, c);
    const double seconds = slowest(medianSingleOpSeconds(op.run, barrier, c.operations));
    char cell[160];
    std::snprintf(cell, sizeof(cell), "%s\"%s %lld\": %.9g", json.size() > 1 ? ", " : "",
                  c.collective.c_str(), c.bytes, seconds);
    json += cell;
  }
  return json + "}";
}

}  // namespace latency_method
