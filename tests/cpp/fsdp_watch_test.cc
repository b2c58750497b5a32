// The bookkeeping that turns FSDP2's record_function scopes into per-unit events and memory
// counters (fsdp/watch/fsdp_watch.h), driven as torch_callbacks.cc would drive it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "fsdp/watch/fsdp_watch.h"
#include "tests/cpp/recorded_file.h"

namespace ringx::observe {
namespace {

TEST(FsdpWatch, ParsesFsdp2ScopeNames) {
  std::string unit;
  EXPECT_EQ(parseFsdpScope("FSDP::pre_forward (layers.0)", &unit), FsdpScope::kPreForward);
  EXPECT_EQ(unit, "layers.0");
  EXPECT_EQ(parseFsdpScope("FSDP::all_gather_copy_out (layers.10.attn)", &unit),
            FsdpScope::kCopyOut);
  EXPECT_EQ(unit, "layers.10.attn");
  EXPECT_EQ(parseFsdpScope("FSDP::all_gather", &unit), FsdpScope::kAllGather);  // the root
  EXPECT_EQ(unit, "");
  EXPECT_EQ(parseFsdpScope("FSDP::forward_prefetch for layers.1", &unit),
            FsdpScope::kForwardPrefetch);
  EXPECT_EQ(unit, "layers.1");
  EXPECT_EQ(parseFsdpScope("FSDP::root_post_backward_callback", &unit),
            FsdpScope::kRootPostBackward);
  EXPECT_EQ(parseFsdpScope("Optimizer.zero_grad#SGD.zero_grad", &unit), FsdpScope::kZeroGrad);
  EXPECT_EQ(parseFsdpScope("FSDP::post_backward_rs_wait (x)", &unit), FsdpScope::kOther);
  EXPECT_EQ(parseFsdpScope("DistributedDataParallel.forward", &unit), FsdpScope::kOther);
}

TEST(FsdpWatch, CountsWhatEachUnitHolds) {
  FsdpWatch w;
  w.setUnits({{"", 10, 40, 40, 10, false, 0}, {"1", 100, 400, 800, 200, true, 0}}, FsdpSchedule{});
  EXPECT_EQ(w.memory().shardedBytes, 110);
  w.scopeBegin(FsdpScope::kRootPreForward, "", 1, false);
  w.scopeEnd(FsdpScope::kRootPreForward, "", 1, 2);
  // Unit 1: gathered in its pre_forward (waited for from its start), computes, reshards.
  w.scopeBegin(FsdpScope::kPreForward, "1", 10, false);
  w.scopeBegin(FsdpScope::kAllGather, "1", 11, false);
  const uint64_t gather = w.collectiveIssued(FsdpScope::kAllGather, "1", 12);
  ASSERT_NE(gather, 0u);
  w.collectiveFinished(gather, 20);
  w.scopeEnd(FsdpScope::kAllGather, "1", 11, 20);
  w.scopeBegin(FsdpScope::kCopyOut, "1", 21, false);
  w.scopeEnd(FsdpScope::kCopyOut, "1", 21, 25);
  EXPECT_EQ(w.memory().unshardedBytes, 400);
  w.scopeEnd(FsdpScope::kPreForward, "1", 10, 26);
  w.scopeBegin(FsdpScope::kPostForward, "1", 40, false);
  w.scopeEnd(FsdpScope::kPostForward, "1", 40, 41);
  EXPECT_EQ(w.memory().unshardedBytes, 0);  // resharded after forward
  // Backward: gradients held from its post-backward until the reduce-scatter finished, then the
  // sharded ones until zero_grad.
  w.scopeBegin(FsdpScope::kPostBackwardAccumulate, "1", 60, false);
  EXPECT_EQ(w.memory().gradBytes, 800);
  w.scopeBegin(FsdpScope::kPostBackwardReduce, "1", 70, false);
  const uint64_t reduce = w.collectiveIssued(FsdpScope::kPostBackwardReduce, "1", 71);
  EXPECT_EQ(w.collectiveIssued(FsdpScope::kPreForward, "1", 72), 0u);  // not a unit's
  w.collectiveFinished(reduce, 80);
  EXPECT_EQ(w.memory().gradBytes, 200);
  EXPECT_EQ(w.memory().peakBytes, 110 + 800);
  w.scopeBegin(FsdpScope::kZeroGrad, "", 90, false);
  EXPECT_EQ(w.memory().gradBytes, 0);
  EXPECT_EQ(w.iterations(), 1);
}

}  // namespace
}  // namespace ringx::observe

namespace ringx::observe {
namespace {

// A reduce-scatter still on the GPU when the step's Python returned: awaitCollectives waits
// for its finish (on another thread), and it is recorded by then.
TEST(FsdpWatch, AwaitCollectivesWaitsForOnesStillRunning) {
  FsdpWatch w;
  w.setUnits({{"1", 100, 400, 800, 200, true, 0}}, FsdpSchedule{});
  EXPECT_TRUE(w.awaitCollectives(std::chrono::steady_clock::now()));  // none issued
  w.scopeBegin(FsdpScope::kPostBackwardAccumulate, "1", 60, false);
  w.scopeBegin(FsdpScope::kPostBackwardReduce, "1", 70, false);
  const uint64_t reduce = w.collectiveIssued(FsdpScope::kPostBackwardReduce, "1", 71);
  EXPECT_FALSE(w.awaitCollectives(std::chrono::steady_clock::now()));
  std::thread device([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    w.collectiveFinished(reduce, 80);
  });
  EXPECT_TRUE(w.awaitCollectives(std::chrono::steady_clock::now() + std::chrono::minutes(1)));
  EXPECT_EQ(w.memory().gradBytes, 200);  // recorded: the sharded gradients stay
  device.join();
}

TEST(FsdpWatch, ReshardingToASmallerGroupKeepsItsShardUntilTheNextGather) {
  FsdpWatch w;
  // reshard_after_forward=2 on a shard group of 4: a 1/2 slice of the 400 gathered bytes stays.
  w.setUnits({{"1", 100, 400, 400, 100, true, 200}}, FsdpSchedule{});
  w.scopeBegin(FsdpScope::kRootPreForward, "", 1, false);
  w.scopeBegin(FsdpScope::kAllGather, "1", 2, false);
  w.scopeBegin(FsdpScope::kCopyOut, "1", 3, false);
  w.scopeEnd(FsdpScope::kCopyOut, "1", 3, 4);
  EXPECT_EQ(w.memory().unshardedBytes, 400);
  w.scopeBegin(FsdpScope::kPostForward, "1", 5, false);
  w.scopeEnd(FsdpScope::kPostForward, "1", 5, 6);
  EXPECT_EQ(w.memory().unshardedBytes, 200);
  // Backward gathers from that slice; the copy-out frees it.
  w.scopeBegin(FsdpScope::kPreBackward, "1", 7, false);
  w.scopeBegin(FsdpScope::kAllGather, "1", 8, false);
  w.scopeBegin(FsdpScope::kCopyOut, "1", 9, false);
  w.scopeEnd(FsdpScope::kCopyOut, "1", 9, 10);
  EXPECT_EQ(w.memory().unshardedBytes, 400);
  w.scopeBegin(FsdpScope::kPostBackwardReshard, "1", 11, false);
  w.scopeEnd(FsdpScope::kPostBackwardReshard, "1", 11, 12);
  EXPECT_EQ(w.memory().unshardedBytes, 0);
  EXPECT_EQ(w.memory().peakBytes, 100 + 400 + 400);  // sharded, gathered, unsharded gradients
}

}  // namespace
}  // namespace ringx::observe

namespace ringx::observe {
namespace {

// On a GPU the host enqueues a gather's copy-out behind its collective and goes on: the unit's
// next gather can be issued before the last one's collective finishes (the H200 saw a backward
// gather recorded with its forward gather's wire, starting before its own issue). Each gather
// is recorded with its own collective's wire, once that finishes.
TEST(FsdpWatch, AGatherCopiedOutBeforeItsCollectiveFinishesGetsItsOwnWire) {
  testing::RecordedFile recorded;

  FsdpWatch w;
  w.setUnits({{"1", 100, 400, 400, 100, true, 0}}, FsdpSchedule{});
  w.scopeBegin(FsdpScope::kRootPreForward, "", 1, false);
  w.scopeBegin(FsdpScope::kAllGather, "1", 10, false);
  const uint64_t forward = w.collectiveIssued(FsdpScope::kAllGather, "1", 11);
  w.attachWire(forward, [] { return WireTimes{12, 30, 1}; });
  w.scopeBegin(FsdpScope::kCopyOut, "1", 13, false);
  w.scopeEnd(FsdpScope::kCopyOut, "1", 13, 14);  // enqueued; the collective still runs
  w.scopeBegin(FsdpScope::kPreBackward, "1", 20, false);
  w.scopeBegin(FsdpScope::kAllGather, "1", 21, false);
  const uint64_t backward = w.collectiveIssued(FsdpScope::kAllGather, "1", 22);
  w.attachWire(backward, [] { return WireTimes{31, 40, 2}; });
  w.collectiveFinished(forward, 30);  // the forward gather's, after the backward one's issue
  w.scopeBegin(FsdpScope::kCopyOut, "1", 23, false);
  w.scopeEnd(FsdpScope::kCopyOut, "1", 23, 24);
  w.collectiveFinished(backward, 41);
  EXPECT_TRUE(w.awaitCollectives(std::chrono::steady_clock::now()));
  const trace::RankTrace t = recorded.finish();
  std::vector<std::vector<int64_t>> gathers;  // issue, wire start, wire end, phase is backward
  for (const trace::Event& e : t.events) {
    if (e.category != trace::Category::kFsdp || t.str(e.name) != "all_gather") continue;
    gathers.push_back({t.findArg(e, "issue_ns")->intValue, t.findArg(e, "wire_start_ns")->intValue,
                       t.findArg(e, "wire_end_ns")->intValue,
                       t.str(t.findArg(e, "phase")->stringId) == "backward" ? 1 : 0});
  }
  std::sort(gathers.begin(), gathers.end());
  ASSERT_EQ(gathers.size(), 2u);
  EXPECT_EQ(gathers[0], (std::vector<int64_t>{10, 12, 30, 0}));
  EXPECT_EQ(gathers[1], (std::vector<int64_t>{21, 31, 40, 1}));
}

}  // namespace
}  // namespace ringx::observe
