// A two-rank ringx.fsdp job written event by event as the engine records it, on the schedule
// tests/cpp/fsdp_replay_test.cc works out by hand (rootAndTwoBlocks: 2405 ns a step): the
// FSDP what-if tests (analysis, viewer) read back a model whose answers are known.
#pragma once

#include <string>

#include "tests/cpp/trace/trace_fixture.h"
#include "trace/format/schema.h"

namespace ringx::trace::fixture {

// Per step from S: the root's gather 0-50, A's 60-160, A's forward 160-460, B's gather
// 460-560, B's forward 560-860, the root's forward 50-870; backward from 890: B gathered
// 900-1000, A prefetched 1000-1100 (used at 1600), B's backward 1000-1600, A's 1600-2200, the
// root's 890-2210; reduce-scatters on the wire B 1600-1700, A 2200-2300, root 2300-2350
// (done when the engine retired them: 2200, 2300, 2350); backward ends 2355, the optimizer
// takes 50. Rank 1 issues every collective 30 ns earlier and waits for rank 0: its times from
// issue to wire end are 30 ns longer than the last arrival's.
inline void writeFsdpJob(const TempDir& dir, bool withConfig = true) {
  for (int rank = 0; rank < 2; ++rank) {
    RankStream s(rank, 2);
    const int64_t late = rank == 1 ? 30 : 0;
    for (int64_t step = 0; step < 6; ++step) {
      const int64_t S = 10000 + step * 2405;
      if (withConfig) {
        s.instant(Category::kFsdp, "fsdp", "fsdp_config", S,
                  {{arg::kStep, step},
                   {arg::kShardingStrategy, "FULL_SHARD"},
                   {arg::kBackwardPrefetch, "BACKWARD_PRE"},
                   {arg::kForwardPrefetch, 0},
                   {arg::kLimitAllGathers, 1},
                   {arg::kGatherLane, 1},
                   {arg::kGroupSize, 2}});
      }
      if (step > 0)
        s.span(Category::kFsdp, "fsdp", "optimizer", S - 50, S, {{arg::kStep, step - 1}});
      s.span(Category::kFsdp, "fsdp", "forward", S, S + 870, {{arg::kStep, step}});
      s.span(Category::kFsdp, "fsdp", "backward", S + 890, S + 2355, {{arg::kStep, step}});
      auto gather = [&](const char* unit, int64_t bytes, const char* phase, int64_t issue,
                        int64_t wireEnd, int64_t ready, int64_t exposed, int64_t prefetched) {
        const int64_t wire = wireEnd - issue;
        s.span(Category::kFsdp, std::string("fsdp:") + unit, "all_gather", S + issue, S + ready,
               {{arg::kStep, step},
                {arg::kBytes, bytes},
                {arg::kPhase, phase},
                {arg::kPrefetched, prefetched},
                {arg::kIssueNs, S + issue - late},
                {arg::kWireStartNs, S + wireEnd - wire - late},
                {arg::kWireEndNs, S + wireEnd},
                {arg::kExposedNs, exposed}});
      };
      gather("(root)", 1000, "forward", 0, 50, 50, 50, 0);
      gather("A", 2000, "forward", 60, 160, 160, 100, 0);
      gather("B", 2000, "forward", 460, 560, 560, 100, 0);
      gather("B", 2000, "backward", 900, 1000, 1000, 100, 0);
      gather("A", 2000, "backward", 1000, 1100, 1600, 0, 1);
      auto compute = [&](const char* unit, const char* name, int64_t b, int64_t e) {
        s.span(Category::kFsdp, std::string("fsdp:") + unit, name, S + b, S + e,
               {{arg::kStep, step}});
      };
      compute("(root)", "forward", 50, 870);
      compute("A", "forward", 160, 460);
      compute("B", "forward", 560, 860);
      compute("(root)", "backward", 890, 2210);
      compute("B", "backward", 1000, 1600);
      compute("A", "backward", 1600, 2200);
      auto reduce = [&](const char* unit, int64_t bytes, int64_t launch, int64_t wireStart,
                        int64_t wireEnd, int64_t done) {
        s.span(Category::kFsdp, std::string("fsdp:") + unit, "reduce_scatter", S + launch, S + done,
               {{arg::kStep, step},
                {arg::kBytes, bytes},
                {arg::kLaunchNs, S + launch - late},
                {arg::kWireStartNs, S + wireStart - late},
                {arg::kWireEndNs, S + wireEnd}});
      };
      reduce("B", 2000, 1600, 1600, 1700, 2200);
      reduce("A", 2000, 2200, 2200, 2300, 2300);
      reduce("(root)", 1000, 2210, 2300, 2350, 2350);
    }
    s.writeTo(dir.file("rank-" + std::to_string(rank) + ".ringx"));
  }
}

}  // namespace ringx::trace::fixture
