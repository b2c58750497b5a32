// A two-rank ringx.ddp job written event by event as the engine records it, with timings that
// follow the replay's own model, so that the model read back is the one that made them and its
// answers are known (the what-if and advice tests).
//
// Per step from S: forward 100, loss 10, backward compute 450 with gradient hooks at 100, 200,
// 300, 400 for parameters 3, 2, 1, 0 (1000 bytes each; each fills its slot in 50 ns), one
// bucket each, allreduce 100 ns, copy back 50 ns per bucket, optimizer 50: 810 ns a step (the
// replay test's fourBuckets() worked out by hand). Rank 1 arrives at each allreduce 60 ns
// early and so waits: its wire times are 160, the last arrival's (rank 0's) 100.
#pragma once

#include <string>

#include "tests/cpp/trace/trace_fixture.h"
#include "trace/format/schema.h"

namespace ringx::trace::fixture {

struct DdpJobOptions {
  bool grads = true;  // the sampled steps' "grad" instants
  bool plan = true;   // the "bucket_plan" instant of the rebuild
  // What the engine also records, for the advice: each bucket's ready, launch and exposed
  // times (bucket 2 launched `lateLaunch` ns after it was ready; the last bucket exposed 100
  // ns after backward's compute), and each allreduce on the communication lane, rank 1
  // beginning it `rank1Late` ns after rank 0.
  bool engineTimes = false;
  int64_t lateLaunch = 0;
  int64_t rank1Late = 0;
  // The engine the plan names ("torch.ddp": torch's DDP, watched); empty: none (ringx.ddp's,
  // before schema 7).
  std::string engine;
};

inline void writeDdpJob(const TempDir& dir, const DdpJobOptions& o = {}) {
  for (int rank = 0; rank < 2; ++rank) {
    RankStream s(rank, 2);
    if (o.plan) {
      std::vector<TestArg> args = {
          {arg::kStep, 1},       {arg::kBucketCapBytes, 1000}, {arg::kFirstBucketBytes, 1000},
          {arg::kBucketView, 0}, {arg::kGroupSize, 2},         {"buckets", 4}};
      if (!o.engine.empty()) args.emplace_back(arg::kEngine, o.engine);
      s.instant(Category::kDdp, "ddp", "bucket_plan", 5000, args);
    }
    for (int64_t step = 0; step < 7; ++step) {
      const int64_t S = 10000 + step * 810;
      if (step > 0) {
        s.span(Category::kDdp, "ddp", "optimizer", S - 50, S, {{arg::kStep, step - 1}});
      }
      s.span(Category::kDdp, "ddp", "forward", S, S + 100, {{arg::kStep, step}});
      s.span(Category::kDdp, "ddp", "backward", S + 110, S + 760,
             {{arg::kStep, step}, {arg::kComputeEndNs, S + 560}});
      for (int64_t k = 0; k < 4; ++k) {
        const std::string track = "ddp:bucket" + std::to_string(k);
        if (o.grads) {
          s.instant(Category::kDdp, track, "grad", S + 110 + 100 * (k + 1),
                    {{arg::kStep, step},
                     {arg::kParam, 3 - k},
                     {arg::kBytes, 1000},
                     {arg::kParamGroup, "float32@cpu"}});
        }
        const int64_t wireEnd = S + 360 + 100 * k;
        const int64_t wireStart = wireEnd - (rank == 0 ? 100 : 160);
        std::vector<TestArg> args = {{arg::kBucket, k},
                                     {arg::kStep, step},
                                     {arg::kBytes, 1000},
                                     {arg::kParams, 1},
                                     {arg::kWireStartNs, wireStart},
                                     {arg::kWireEndNs, wireEnd},
                                     {arg::kCopyBackNs, S + 560 + 50 * k}};
        if (o.engineTimes) {
          const int64_t launch = S + 260 + 100 * k;
          args.push_back({arg::kReadyNs, launch - (k == 2 ? o.lateLaunch : 0)});
          args.push_back({arg::kLaunchNs, launch});
          args.push_back({arg::kExposedNs, k == 3 ? 100 : 0});
          const int64_t begin = launch + (rank == 1 ? o.rank1Late : 0);
          s.collective("allreduce", step * 4 + k, begin, wireEnd, 1000);
        }
        s.span(Category::kDdp, track, "bucket", S + 210 + 100 * k, S + 610 + 50 * k, args);
      }
    }
    s.writeTo(dir.file("rank-" + std::to_string(rank) + ".ringx"));
  }
}

}  // namespace ringx::trace::fixture
