// What the flight recorder costs, in one run: recording one collective
// (issue, start, finish: what every collective pays with it on) beside a 4 KiB
// ringx allreduce between two ranks (forked processes over shared memory, as
// tests/cpp/process_ranks.h runs them), and that allreduce with the recorder on
// and off, alternated in rounds so that the machine's drift falls on both alike.
//
//   build/bin/bench_flight_recorder [allreduces per round]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "backend/algorithms/algorithms.h"
#include "backend/group/flight_recorder.h"
#include "backend/group/group.h"
#include "backend/store/store.h"
#include "tests/cpp/process_ranks.h"

namespace {

using namespace ringx;
using Clock = std::chrono::steady_clock;

double nsSince(Clock::time_point start, int64_t count) {
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count() / count;
}

// Nanoseconds per collective of issue + start + finish, best of `rounds`.
double recordCost(int64_t perRound, int rounds) {
  FlightRecorder recorder("world", "bench", 0, 2, FlightRecorder::kDefaultEntries);
  double best = 1e30;
  int64_t seq = 0;
  for (int r = 0; r < rounds; ++r) {
    const auto start = Clock::now();
    for (int64_t i = 0; i < perRound; ++i, ++seq) {
      const auto e = recorder.issue("allreduce", 4096);
      recorder.start(e, seq, "allreduce", DataType::kFloat32, true, ReduceOp::kSum, -1, 0);
      recorder.finish(e, "direct");
    }
    best = std::min(best, nsSince(start, perRound));
  }
  return best;
}

// Microseconds per 4 KiB allreduce on 2 ranks, the recorder on or off (the
// slower rank's figure); as the c10d layer does, each call is issued before it runs.
double allreduceCost(bool recorder, int count) {
  const std::string result = "/tmp/ringx-bench-flight-" + std::to_string(::getpid());
  const auto errors = testing::runProcesses(2, [&](int rank, std::shared_ptr<Store> store) {
    GroupOptions options;
    options.rank = rank;
    options.size = 2;
    options.store = std::move(store);
    options.name = "bench";
    options.flightRecorderEntries = recorder ? FlightRecorder::kDefaultEntries : 0;
    Group group(options);
    std::vector<float> data(1024, 1.0f);
    auto once = [&] {
      CallNote note;
      note.bytes = data.size() * sizeof(float);
      if (FlightRecorder* f = group.flightRecorder())
        note.flightEntry = f->issue("allreduce", 4096);
      group.noteCall(note);
      group.run(algorithms::CollectiveKind::kAllreduce, DataType::kFloat32, ReduceOp::kSum, -1,
                std::chrono::milliseconds(0), [&](algorithms::Collective& c) {
                  algorithms::allreduce(c, data.data(), data.size(), DataType::kFloat32,
                                        ReduceOp::kSum, group.tuning());
                });
    };
    for (int i = 0; i < count / 10; ++i) once();  // warm up
    const auto start = Clock::now();
    for (int i = 0; i < count; ++i) once();
    std::ofstream(result + "-" + std::to_string(rank)) << nsSince(start, count) / 1e3;
  });
  double us = 0;
  for (int rank = 0; rank < 2; ++rank) {
    if (!errors[rank].empty()) {
      std::fprintf(stderr, "bench_flight_recorder: rank %d failed: %s\n", rank,
                   errors[rank].c_str());
      std::exit(1);
    }
    const std::string path = result + "-" + std::to_string(rank);
    double rankUs = 0;
    std::ifstream(path) >> rankUs;
    std::remove(path.c_str());
    us = std::max(us, rankUs);
  }
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  const int count = argc > 1 ? std::atoi(argv[1]) : 20000;
  const double recordNs = recordCost(2000000, 5);
  double on = 1e30, off = 1e30;
  for (int round = 0; round < 3; ++round) {
    off = std::min(off, allreduceCost(false, count));
    on = std::min(on, allreduceCost(true, count));
  }
  std::printf("flight recorder: %.0f ns to record one collective (issue + start + finish)\n",
              recordNs);
  std::printf(
      "4 KiB allreduce, 2 ranks (processes, shm): %.2f us with the recorder, %.2f us "
      "without (best of 3 rounds of %d)\n",
      on, off, count);
  std::printf("= recording is %.2f%% of a 4 KiB allreduce; measured difference %+.2f us\n",
              recordNs / (off * 1e3) * 100, on - off);
  return 0;
}
