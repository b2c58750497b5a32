// A DDP job that what-if can replay, for the viewer's What-if tests: the two-rank job of
// tests/cpp/analysis/whatif_test.cc, with rank 1 slower in backward and a slower wire so that
// the critical path crosses ranks, every time multiplied by kWhatIfUnit so that it is wide
// enough to see, written straight into a TraceStore as the ringx ingest would hold it.
//
// Per step from S (in units): forward 100, loss 10, then backward from B = S + 110: gradient
// hooks at B + 100, 200, 300, 400 for parameters 3, 2, 1, 0 (1000 bytes, one bucket each;
// filling a slot takes 50), compute ending at B + 450; rank 1 runs 30 later from its first
// hook, so it launches every allreduce last (at B + 180 + 100k). Allreduces take 200 on the
// ring, back to back: bucket k from S + 290 + 200k (rank 0 arrives 30 early and waits). The
// copy back takes 50 per bucket, the optimizer 50: finalize ends at S + 1140, the step is
// 1190. Replayed, the critical path is rank 1's forward and backward up to the first
// allreduce, the four allreduces (launched last by rank 1), then rank 1's (of ranks with equal
// steps, the one that waited least: the one the others wait for) last copy back and optimizer.
// Steps 0-6; the bucket plan is step 1's.
#pragma once

#include <string>

#include "tests/cpp/trace/model/sample_store.h"
#include "trace/format/schema.h"

namespace ringx::model::testing {

inline constexpr int64_t kWhatIfUnit = 10000;  // 10 us: a step is 8.1 ms
inline constexpr int64_t kWhatIfSteps = 7;

inline constexpr int64_t kWhatIfStep = 1190;  // units

inline int64_t whatIfStepBegin(int64_t step) { return (10000 + step * kWhatIfStep) * kWhatIfUnit; }

inline void fillWhatIfStore(TraceStore& store) {
  namespace targ = trace::arg;
  constexpr int64_t u = kWhatIfUnit;
  for (int32_t rank = 0; rank < 2; ++rank) {
    // The plan the engine rebuilt its buckets to after step 0.
    addInstant(store, rank, "ddp", "ddp", "bucket_plan", whatIfStepBegin(1) - 60 * u,
               {{targ::kStep, 1},
                {targ::kBucketCapBytes, 1000},
                {targ::kFirstBucketBytes, 1000},
                {targ::kBucketView, 0},
                {targ::kGroupSize, 2},
                {"buckets", 4}});
    const int64_t late = rank == 1 ? 30 : 0;
    for (int64_t step = 0; step < kWhatIfSteps; ++step) {
      const int64_t S = whatIfStepBegin(step), B = S + 110 * u;
      if (step > 0)
        addSpan(store, rank, "ddp", "ddp", "optimizer", S - 50 * u, S, {{targ::kStep, step - 1}});
      addSpan(store, rank, "ddp", "ddp", "forward", S, S + 100 * u, {{targ::kStep, step}});
      addSpan(store, rank, "ddp", "ddp", "backward", B, S + 1140 * u,
              {{targ::kStep, step}, {targ::kComputeEndNs, B + (450 + late) * u}});
      for (int64_t k = 0; k < 4; ++k) {
        const std::string track = "ddp:bucket" + std::to_string(k);
        const int64_t hook = B + (100 * (k + 1) + late) * u;
        addInstant(store, rank, track, "ddp", "grad", hook,
                   {{targ::kStep, step}, {targ::kParam, 3 - k}, {targ::kBytes, 1000}},
                   {{targ::kParamGroup, "float32@cpu"}});
        const int64_t wireEnd = S + (490 + 200 * k) * u;
        const int64_t wireStart = wireEnd - (rank == 0 ? 230 : 200) * u;
        const int64_t copyEnd = S + (k == 0 ? 610 + late : 740 + 200 * (k - 1)) * u;
        addSpan(store, rank, track, "ddp", "bucket", hook, copyEnd,
                {{targ::kBucket, k},
                 {targ::kStep, step},
                 {targ::kBytes, 1000},
                 {targ::kParams, 1},
                 {targ::kWireStartNs, wireStart},
                 {targ::kWireEndNs, wireEnd},
                 {targ::kCopyBackNs, copyEnd - 50 * u}});
      }
    }
  }
  store.finalize();
}

}  // namespace ringx::model::testing
