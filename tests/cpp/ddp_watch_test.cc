// The bookkeeping that turns torch's own DDP, as its callbacks show it, into per-bucket timings
// (ddp/watch/ddp_watch.h), driven here as torch_callbacks.cc would drive it.
#include <gtest/gtest.h>

#include "ddp/watch/ddp_watch.h"

namespace ringx::observe {
namespace {

// Four parameters; torch's Reducer put the last two in bucket 0 and the first two in bucket 1.
int params[4];

DdpLayout twoBuckets(bool view = false) {
  DdpLayout layout;
  for (int& p : params) {
    layout.params.push_back(&p);
    layout.facts.push_back({100, "Float@cpu"});
  }
  layout.buckets = {{3, 2}, {1, 0}};
  layout.bucketBytes = {200, 200};
  layout.plan.gradientAsBucketView = view;
  return layout;
}

TEST(DdpWatch, FollowsTheReducerBucketByBucket) {
  DdpWatch w;
  w.setLayout(twoBuckets());
  w.forwardBegin(100);
  w.forwardEnd(200, /*syncsGradients=*/true);
  ASSERT_TRUE(w.armed());
  ASSERT_TRUE(w.backwardNode(300));
  EXPECT_FALSE(w.backwardNode(310));  // later nodes do not begin it again
  w.gradReady(&params[3], 400);
  w.gradReady(&params[0], 450);  // bucket 1's first gradient, before bucket 0 is ready
  w.gradReady(&params[2], 500);  // bucket 0 ready: the Reducer launches it
  const uint64_t first = w.collectiveIssued(510);
  w.attachWire(first, [] { return WireTimes{520, 700, 7}; });
  w.gradReady(&params[1], 600);
  const uint64_t second = w.collectiveIssued(610);
  w.collectiveFinished(first, 710);
  w.computeEnded(650);
  w.collectiveFinished(second, 900);
  ASSERT_TRUE(w.copiesBack());
  for (int64_t at : {910, 920, 930, 940}) w.copiedBack(at, at + 5);
  w.finalized(1000);

  ASSERT_EQ(w.iterations(), 1);
  const ddp::IterationTiming it = w.lastIteration();
  EXPECT_EQ(it.iteration, 0);
  EXPECT_EQ(it.forwardBeginNs, 100);
  EXPECT_EQ(it.backwardBeginNs, 300);
  EXPECT_EQ(it.backwardEndNs, 650);
  EXPECT_EQ(it.finalizeEndNs, 1000);
  ASSERT_EQ(it.buckets.size(), 2u);
  const ddp::BucketTiming& b0 = it.buckets[0];
  EXPECT_EQ(b0.firstGradNs, 400);
  EXPECT_EQ(b0.readyNs, 500);
  EXPECT_EQ(b0.launchNs, 510);
  EXPECT_EQ(b0.wireStartNs, 520);  // from the ringx Work
  EXPECT_EQ(b0.wireEndNs, 700);
  EXPECT_EQ(b0.seq, 7);
  EXPECT_EQ(b0.exposedNs, 710 - 650);
  EXPECT_EQ(b0.copyBackBeginNs, 910);
  EXPECT_EQ(b0.copyBackEndNs, 925);
  const ddp::BucketTiming& b1 = it.buckets[1];
  EXPECT_EQ(b1.firstGradNs, 450);
  EXPECT_EQ(b1.readyNs, 600);
  // Another backend (no wire times): the launch is the mirror's, the Work's scope the wire (gloo
  // begins it when its worker runs the collective).
  EXPECT_EQ(b1.launchNs, 600);
  EXPECT_EQ(b1.wireStartNs, 610);
  EXPECT_EQ(b1.wireEndNs, 900);
  EXPECT_EQ(b1.seq, -1);
  EXPECT_EQ(b1.copyBackBeginNs, 930);
  EXPECT_EQ(it.exposedNs, 900 - 650);
  ASSERT_EQ(it.grads.size(), 4u);  // iteration 0 is sampled
  EXPECT_EQ(it.grads[1].param, 0u);
  EXPECT_EQ(it.grads[1].bucket, 1u);
}

TEST(DdpWatch, AHooksFurtherCollectiveJoinsItsBucket) {
  DdpWatch w;
  w.setLayout(twoBuckets(/*view=*/true));
  w.forwardBegin(1);
  w.forwardEnd(2, true);
  w.backwardNode(3);
  w.gradReady(&params[3], 10);
  w.gradReady(&params[2], 20);
  const uint64_t a = w.collectiveIssued(21);
  const uint64_t b = w.collectiveIssued(22);  // the same hook's second collective
  w.collectiveFinished(a, 30);
  w.collectiveFinished(b, 40);
  w.gradReady(&params[1], 50);
  w.gradReady(&params[0], 60);
  const uint64_t c = w.collectiveIssued(61);
  w.collectiveFinished(c, 70);
  w.computeEnded(65);
  EXPECT_FALSE(w.copiesBack());
  w.finalized(80);
  const ddp::IterationTiming it = w.lastIteration();
  ASSERT_EQ(it.buckets.size(), 2u);
  EXPECT_EQ(it.buckets[0].launchNs, 20);
  EXPECT_EQ(it.buckets[0].wireStartNs, 21);
  EXPECT_EQ(it.buckets[0].doneNs, 40);  // its last collective
  EXPECT_EQ(it.buckets[1].launchNs, 60);
  EXPECT_EQ(it.buckets[1].exposedNs, 5);
  EXPECT_EQ(it.buckets[0].copyBackBeginNs, 0);
}

TEST(DdpWatch, UnusedParametersAndOtherModelsAndNoSync) {
  DdpWatch w;
  DdpLayout layout = twoBuckets(true);
  layout.findUnused = true;
  w.setLayout(layout);
  // A forward in no_sync (or without grad) records nothing and arms nothing.
  w.forwardBegin(1);
  w.forwardEnd(2, false);
  EXPECT_FALSE(w.armed());
  EXPECT_FALSE(w.backwardNode(3));
  EXPECT_EQ(w.collectiveIssued(4), 0u);

  w.forwardBegin(10);
  w.forwardEnd(20, true);
  w.backwardNode(30);
  int other = 0;
  w.gradReady(&other, 35);      // another model's parameter
  w.gradReady(&params[3], 40);  // parameter 2 never gets a gradient (unused): the Reducer
  const uint64_t a = w.collectiveIssued(50);  // marked it ready; the mirror lags behind
  w.collectiveFinished(a, 60);
  w.gradReady(&params[1], 70);
  w.gradReady(&params[0], 80);
  const uint64_t b = w.collectiveIssued(90);
  w.collectiveFinished(b, 95);
  w.computeEnded(85);
  w.finalized(100);
  const ddp::IterationTiming it = w.lastIteration();
  EXPECT_EQ(it.iteration, 0);  // the no_sync forward is not an iteration
  ASSERT_EQ(it.buckets.size(), 2u);
  EXPECT_EQ(it.buckets[0].launchNs, 50);
  EXPECT_EQ(it.buckets[1].launchNs, 90);
  EXPECT_EQ(it.buckets[1].doneNs, 95);
  EXPECT_EQ(it.grads.size(), 3u);
}

}  // namespace
}  // namespace ringx::observe
