// A torch DDP job's CPU profiler files, made by hand with known answers (the analyses' and the
// viewer's tests of analysis/profiler_ddp.h): two ranks, two layers, two buckets, gloo's or
// ringx's scopes of the allreduces.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "trace/model/chrome_ingest.h"
#include "trace/model/trace_store.h"

namespace ringx::testing {

// Two layers of a 256x256 weight and a 256 bias (float): readiness bias1, w1, bias0, w0; two
// buckets of 65792 floats (the bias and weight of a layer each).
inline constexpr int64_t kWeight = 256 * 256, kBias = 256, kBucket = kWeight + kBias;

// One rank's CPU profiler file (microseconds, as Kineto writes them): the main thread (tid 1),
// gloo's worker (tid 2).
class CpuRank {
 public:
  CpuRank(int rank, bool shapes = true, bool gloo = true)
      : rank_(rank), shapes_(shapes), gloo_(gloo) {}
  void op(const char* cat, const std::string& name, int tid, int64_t ts, int64_t dur,
          const std::string& dims = "", const char* type = "float") {
    std::string args;
    if (shapes_ && !dims.empty()) {
      args = strCat(R"(,"args":{"Input Dims":)", dims, R"(,"Input type":[")", type, R"("]})");
    }
    events_ += strCat(R"(,{"ph":"X","cat":")", cat, R"(","name":")", name, R"(","pid":1,"tid":)",
                      tid, R"(,"ts":)", ts, R"(,"dur":)", dur, args, "}");
  }
  // Step n from t: forward [t+100, t+2100); backward's nodes from t+2200 to t+4700, the
  // gradients ready at t+2340, t+3340 (bucket 0 launched at t+3400, on the wire
  // [t+3460, t+3460+wire0)), t+3600, t+4600 (bucket 1 at t+4620, wire [t+4660, t+5660)); the
  // copies back from t+5700 to t+5900, the optimizer [t+6000, t+7000).
  void step(int n, int64_t t, int64_t wire0 = 1000) {
    op("user_annotation", strCat("ProfilerStep#", n), 1, t, 9000);
    op("user_annotation", "DistributedDataParallel.forward", 1, t + 100, 2000);
    op("cpu_op", "autograd::engine::evaluate_function: MseLossBackward0", 1, t + 2200, 100);
    const int64_t ready[] = {2340, 3340, 3600, 4600};
    const int64_t sizes[] = {kBias, kWeight, kBias, kWeight};
    for (int k = 0; k < 4; ++k) {
      const int64_t end = t + ready[k];
      const int64_t begin = k % 2 == 0 ? end - 40 : end - 900;
      op("cpu_op", "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 1,
         begin - 5,
         end - begin +
             (k == 1   ? 120
              : k == 3 ? 105
                       : 10));
      op("cpu_op", "torch::autograd::AccumulateGrad", 1, begin, end - begin,
         sizes[k] == kBias ? "[[256]]" : "[[256, 256]]");
    }
    const std::string flat = strCat("[[[", kBucket, "]], [], []]");
    op("cpu_op", "c10d::allreduce_", 1, t + 3400, 50, flat);
    wire(t + 3400, t + 3460, wire0);
    op("cpu_op", "c10d::allreduce_", 1, t + 4620, 30, flat);
    wire(t + 4620, t + 4660, 1000);
    const char* copy = "torch.distributed.ddp.reducer::copy_bucket_to_grad";
    op("cpu_op", copy, 1, t + 5700, 10, "[[256]]");
    op("cpu_op", copy, 1, t + 5710, 90, "[[256, 256]]");
    op("cpu_op", copy, 1, t + 5800, 10, "[[256]]");
    op("cpu_op", copy, 1, t + 5810, 90, "[[256, 256]]");
    op("user_annotation", "Optimizer.step#SGD.step", 1, t + 6000, 1000);
  }
  // The backend's scope of an allreduce: gloo's on its worker with the tensor's dims; ringx's
  // on the main thread without them, from inside the c10d op (as ringx issues it) to completion.
  void wire(int64_t issue, int64_t ts, int64_t dur) {
    if (gloo_) {
      op("user_annotation", "gloo:all_reduce", 2, ts, dur, strCat("[[", kBucket, "]]"));
    } else {
      op("user_annotation", "ringx:all_reduce", 1, issue + 5, ts + dur - issue - 5);
    }
  }
  std::string json() const {
    return strCat(R"({"schemaVersion":1,"distributedInfo":{"backend":"gloo","rank":)", rank_,
                  R"(,"world_size":2},"traceEvents":[)",
                  R"({"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"python"}})",
                  events_, "]}");
  }

 private:
  int rank_;
  bool shapes_, gloo_;
  std::string events_;
};

inline model::TraceStore storeOf(const std::vector<CpuRank>& ranks) {
  model::TraceStore store;
  for (size_t r = 0; r < ranks.size(); ++r) {
    model::ingestChromeTraceText(store, ranks[r].json(), strCat("rank", r, ".json"));
  }
  return store;
}

// Steps 1..3, 9 ms apart; rank 1 starts each 5 us later.
inline std::vector<CpuRank> profiledDdpJob(bool shapes = true, bool gloo = true) {
  std::vector<CpuRank> ranks;
  for (int r = 0; r < 2; ++r) {
    CpuRank& k = ranks.emplace_back(r, shapes, gloo);
    for (int n = 1; n <= 3; ++n) k.step(n, 1'000'000 + (n - 1) * 9000 + r * 5);
  }
  return ranks;
}

}  // namespace ringx::testing
