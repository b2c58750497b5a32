// The "ringx without torch" side of bench/vs_libraries.py: one rank of a ringx group driven
// from C++ (backend/group, no torch, no Python), timing the cases it is given with
// bench/latency_method.py's method (its C++ port: bench/latency_method.h). Each collective is
// the algorithm ProcessGroupRingx runs for the torch call the Python side times (allreduce,
// broadcast, ringAllgather for all_gather_into_tensor, ringReduceScatter for
// reduce_scatter_tensor, barrier), with the group's options read from the environment as
// there. Beside ringx through torch in the same table, the difference between the two is
// what a call costs on its way through torch and the c10d glue; beside the other libraries,
// what ringx's own collective does.
//
//   bench_ringx_ranks --store DIR --rank R --world N --cases allreduce:4096:400,...
//                     [--settle 5000] [--call-cost-us X]
//
// --call-cost-us X spends X us of CPU before every call, barriers too, as a call through
// torch does before ringx's collective starts (vs_libraries.py prints that cost: a call on a
// one-rank ringx group). With it, these ranks show what that per-call cost alone does where
// ranks share cores.
//
// The ranks meet through a directory store in DIR (tests/cpp/process_ranks.h), which must
// be empty and on a local file system. Rank 0 prints {"collective size": seconds} as one
// JSON line, as bench/openmpi_ranks.py does.
#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/algorithms/algorithms.h"
#include "backend/group/group.h"
#include "backend/transport/context.h"
#include "backend/transport/registry.h"
#include "base/command_line.h"
#include "bench/latency_method.h"
#include "tests/cpp/process_ranks.h"

namespace {

using ringx::DataType;
using ringx::Group;
using ringx::ReduceOp;
using ringx::algorithms::Collective;
using ringx::algorithms::CollectiveKind;

struct Options {
  std::string storeDir;
  std::string cases;
  int settle = 5000;
  int rank = 0;
  int world = 2;
  double callCostUs = 0;
};

// Busy for `micros` us (the CPU a call spends before it reaches the collective).
void spend(double micros) {
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::nanoseconds(static_cast<long long>(micros * 1000));
  while (std::chrono::steady_clock::now() < until) {
  }
}

// op.run, after the per-call cost when there is one.
void addCallCost(latency_method::Op& op, double micros) {
  if (micros <= 0) return;
  op.run = [collective = std::move(op.run), micros] {
    spend(micros);
    collective();
  };
}

void makeOp(latency_method::Op& op, const latency_method::Case& c, Group& group) {
  const int world = group.size();
  latency_method::makeBuffers(op, c, world);
  const size_t n = op.input.size();
  const auto& tuning = group.tuning();
  Group* g = &group;
  if (c.collective == "allreduce") {
    float* buf = op.input.data();
    op.run = [g, buf, n, &tuning] {
      g->run(CollectiveKind::kAllreduce, DataType::kFloat32, ReduceOp::kSum, -1, {},
             [&](Collective& c) {
               ringx::algorithms::allreduce(c, buf, n, DataType::kFloat32, ReduceOp::kSum, tuning);
             });
    };
  } else if (c.collective == "broadcast") {
    float* buf = op.input.data();
    op.run = [g, buf, n, &tuning] {
      g->run(CollectiveKind::kBroadcast, DataType::kFloat32, ReduceOp::kSum, 0, {},
             [&](Collective& c) { ringx::algorithms::broadcast(c, buf, n * 4, 0, tuning); });
    };
  } else if (c.collective == "all_gather") {
    const float* in = op.input.data();
    float* out = op.output.data();
    op.run = [g, in, out, n, &tuning] {
      g->run(CollectiveKind::kAllgather, DataType::kFloat32, ReduceOp::kSum, -1, {},
             [&](Collective& c) {
               ringx::algorithms::ringAllgather(c, in, out, n * 4, tuning.segmentBytes);
             });
    };
  } else if (c.collective == "reduce_scatter") {
    const float* in = op.input.data();
    float* out = op.output.data();
    const size_t share = n / world;
    op.run = [g, in, out, share, &tuning] {
      g->run(CollectiveKind::kReduceScatter, DataType::kFloat32, ReduceOp::kSum, -1, {},
             [&](Collective& c) {
               ringx::algorithms::ringReduceScatter(c, in, out, share, DataType::kFloat32,
                                                    ReduceOp::kSum, tuning.segmentBytes);
             });
    };
  } else if (c.collective == "barrier") {
    op.run = [g, &tuning] {
      g->run(CollectiveKind::kBarrier, DataType::kUInt8, ReduceOp::kSum, -1, {},
             [&](Collective& c) { ringx::algorithms::barrier(c, tuning); });
    };
  } else {
    throw std::runtime_error("unknown collective " + c.collective);
  }
}

int run(const Options& o) {
  const auto cases = latency_method::parseCases(o.cases);
  ringx::GroupOptions options = ringx::testing::groupOptions(
      o.rank, o.world, std::make_shared<ringx::testing::DirectoryStore>(o.storeDir),
      std::chrono::seconds(600));
  options.tuning = ringx::tuningFromEnvironment();
  options.mesh = ringx::transport::meshOptionsFromEnvironment();
  options.name = "bench";
  Group group(options);
  // As a synchronous torch call on the caller's thread (work_queue.cc's runHereIfIdle): this
  // thread waits for its own collective and has nothing else to run, so it polls longer.
  ringx::transport::PatientWaits patient;
  latency_method::Op barrierOp;
  makeOp(barrierOp, {"barrier", 0, 0}, group);
  addCallCost(barrierOp, o.callCostUs);
  std::vector<double> slowest(1);
  const std::string json = latency_method::timeCases(
      cases, o.settle, barrierOp.run,
      [&](latency_method::Op& op, const latency_method::Case& c) {
        makeOp(op, c, group);
        addCallCost(op, o.callCostUs);
      },
      [&](double seconds) {
        slowest[0] = seconds;
        group.run(CollectiveKind::kAllreduce, DataType::kFloat64, ReduceOp::kMax, -1, {},
                  [&](Collective& c) {
                    ringx::algorithms::allreduce(c, slowest.data(), 1, DataType::kFloat64,
                                                 ReduceOp::kMax, group.tuning());
                  });
        return slowest[0];
      });
  barrierOp.run();  // leave together: a rank gone early would fail a peer still reading it
  if (o.rank == 0) std::printf("%s\n", json.c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "One rank of a ringx group timing collectives without torch (the \"ringx, no "
      "torch\" side of bench/vs_libraries.py).",
      "bench_ringx_ranks"};
  ringx::cli::useConventions(app);
  app.add_option("--store", o.storeDir, "an empty directory the ranks meet in")->required();
  app.add_option("--rank", o.rank, "this rank")->required()->check(CLI::NonNegativeNumber);
  app.add_option("--world", o.world, "the number of ranks")->required()->check(CLI::Range(1, 4096));
  app.add_option("--cases", o.cases, "latency_method.case_arguments()'s text")->required();
  app.add_option("--settle", o.settle, "barriers before the first timing")->capture_default_str();
  app.add_option("--call-cost-us", o.callCostUs, "CPU time spent before every call (us)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  if (const int status = ringx::cli::parse(app, argc, argv); status >= 0) return status;
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_ringx_ranks: %s\n", e.what());
    return 1;
  }
}
