// The cost of recording one collective's trace event on the communication
// thread, with the writer thread running and writing to a file: what tracing
// adds to every collective, independent of the machine's timing noise.
//
//   build/bin/bench_trace_record [events]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <unistd.h>

#include "backend/group/collective_trace.h"
#include "trace/record/file_sink.h"
#include "trace/record/recorder.h"

int main(int argc, char** argv) {
  using namespace ringx;
  const int events = argc > 1 ? std::atoi(argv[1]) : 2000000;
  trace::Recorder& recorder = trace::Recorder::instance();
  trace::RecorderOptions options;
  options.threadBufferEvents = 1 << 16;  // the writer keeps up; nothing is dropped
  recorder.start(options);
  // This run's own file: two runs at once would otherwise write into one.
  const std::string path = "/tmp/ringx-bench-trace-record-" + std::to_string(::getpid()) + ".ringx";
  recorder.addSink(std::make_unique<trace::FileSink>(path));
  CollectiveTracer tracer("world", 0, 2);
  CollectiveOutcome outcome;
  outcome.op = "allreduce";
  outcome.dtype = DataType::kFloat32;
  outcome.reduces = true;
  outcome.algorithm = "ring";
  outcome.peers = {1};
  outcome.transport = "shm";
  CallNote note{1, 65536};
  // Time in slices so the writer drains between them (as between real collectives).
  double best = 1e30, total = 0;
  const int slices = 100, perSlice = events / slices;
  for (int s = 0; s < slices; ++s) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < perSlice; ++i) {
      outcome.seq = static_cast<uint64_t>(s) * perSlice + i;
      const int64_t t = trace::nowNs();
      tracer.record(outcome, note, t, t + 1000, nullptr);
    }
    const double ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() /
        perSlice;
    best = std::min(best, ns);
    total += ns;
    recorder.flush();
  }
  recorder.stop();
  const trace::RankTrace trace = trace::readTraceFile(path);
  std::remove(path.c_str());
  std::printf(
      "recording one collective event (13 args): %.0f ns mean, %.0f ns best slice; "
      "%zu events written, %llu dropped\n",
      total / slices, best, trace.events.size(),
      static_cast<unsigned long long>(recorder.droppedEvents()));
  std::printf("= %.2f%% of a 10 us allreduce, %.2f%% of a 60 us one\n", total / slices / 100,
              total / slices / 600);
  return 0;
}
