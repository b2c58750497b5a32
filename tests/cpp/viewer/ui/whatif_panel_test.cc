// The What-if panel: its reading of the report (the adapter) and its mapping of the critical
// path onto the recorded timeline, on a job whose replay is known (whatif_store.h); then the
// panel in the window, headless: computed once, its path drawn over the named ranks' rows, a
// click on a row draws that row's predicted step, and a trace it cannot replay says why.
#include <gtest/gtest.h>

#include <sstream>

#include "tests/cpp/profiled_ddp_trace.h"
#include "tests/cpp/shared_traces.h"
#include "tests/cpp/trace/fsdp_job.h"
#include "tests/cpp/viewer/ui/ui_harness.h"
#include "tests/cpp/viewer/whatif_store.h"
#include "trace/model/loader.h"
#include "viewer/ui/style.h"
#include "viewer/ui/viewer_ui.h"

namespace ringx::viewer {
namespace {

using testing::HeadlessImGui;
using testing::kWhatIfUnit;
using testing::whatIfStepBegin;
constexpr int64_t u = kWhatIfUnit;

struct Stretch {
  std::string kind;
  int32_t lane;
  int64_t begin, end;
};

std::string describe(const std::vector<PredictedItem>& items) {
  std::ostringstream text;
  for (const PredictedItem& i : items)
    text << i.kind << "#" << i.index << "@" << i.lane << " [" << i.beginNs / kWhatIfUnit << ", "
         << i.endNs / kWhatIfUnit << "]" << (i.onPath ? "*" : "") << "\n";
  return text.str();
}

TEST(WhatIfAdapter, ReadsTheRowsAndTheCriticalPathOfTheReport) {
  TraceStore store;
  testing::fillWhatIfStore(store);
  const analysis::WhatIfReport report = analysis::whatIf(store);
  const WhatIfView v = adaptWhatIf(report);
  ASSERT_TRUE(v.ok()) << v.error;
  EXPECT_EQ(v.engine, "ddp");
  EXPECT_EQ(v.recordedStepNs, testing::kWhatIfStep * u);
  EXPECT_EQ(v.firstStep, 1);
  EXPECT_EQ(v.anchorRank, report.baseline.slowestRank);
  EXPECT_EQ(v.baseline.replayedStepNs, report.baseline.stepNs);
  EXPECT_EQ(v.baseline.changeShare, report.baselineErrorShare);  // the model's own error
  EXPECT_NEAR(v.baseline.changeShare, 0, 0.01);
  EXPECT_EQ(v.baseline.collectives, 4u);
  // The path, segment by segment as the replay gave it; a collective goes to the rank that
  // launched it last.
  const std::vector<PredictedItem>& path = v.baseline.path;
  ASSERT_EQ(path.size(), report.baseline.criticalPath.size());
  for (size_t i = 0; i < path.size(); ++i) {
    const replay::PathSegment& s = report.baseline.criticalPath[i];
    EXPECT_EQ(path[i].kind, replay::pathKindName(s.kind));
    EXPECT_EQ(path[i].lane, s.rank);
    EXPECT_EQ(path[i].index, s.bucket);
    EXPECT_EQ(path[i].beginNs, s.beginNs);
    EXPECT_EQ(path[i].endNs, s.endNs);
    EXPECT_EQ(path[i].color, pathKindColor(s.kind));
    EXPECT_TRUE(path[i].onPath);
  }
  // This job's path (whatif_store.h, worked out by hand): rank 1's compute up to the first
  // allreduce, the four allreduces, its last copy back and optimizer.
  EXPECT_EQ(describe(path),
            "forward#-1@1 [0, 110]*\nbackward#-1@1 [110, 290]*\nallreduce#0@1 [290, 490]*\n"
            "allreduce#1@1 [490, 690]*\nallreduce#2@1 [690, 890]*\nallreduce#3@1 [890, 1090]*\n"
            "copy back#3@1 [1090, 1140]*\noptimizer#-1@1 [1140, 1190]*\n");
  // The predicted timeline: the path's stretches on their ranks' lanes, every bucket's
  // allreduce on the ring's, those on the path marked.
  int ring = 0, ringOnPath = 0;
  for (const PredictedItem& i : v.baseline.items) {
    if (i.lane != PredictedItem::kRing) {
      EXPECT_NE(i.kind, "allreduce");
      EXPECT_TRUE(i.onPath);
      continue;
    }
    EXPECT_EQ(i.beginNs, report.baseline.buckets[size_t(i.index)].startNs);
    EXPECT_EQ(i.endNs, report.baseline.buckets[size_t(i.index)].endNs);
    ++ring;
    ringOnPath += i.onPath;
  }
  EXPECT_EQ(ring, 4);
  EXPECT_EQ(ringOnPath, 4);
  // The rows, as the report has them; the best plan marked.
  ASSERT_EQ(v.rows.size(), report.rows.size());
  for (size_t i = 0; i < v.rows.size(); ++i) {
    const analysis::WhatIfRow& r = report.rows[i];
    EXPECT_EQ(v.rows[i].label, r.change.label);
    EXPECT_EQ(v.rows[i].predictedStepNs, r.predictedStepNs);
    EXPECT_EQ(v.rows[i].changeShare, r.changeShare);
    EXPECT_EQ(v.rows[i].exposedCommNs, r.replay.exposedCommNs);
    EXPECT_EQ(v.rows[i].collectives, r.replay.buckets.size());
    EXPECT_EQ(v.rows[i].error, r.error);
    EXPECT_EQ(v.rows[i].best, int64_t(i) == report.bestPlanRow);
  }
  ASSERT_GE(report.bestPlanRow, 0);
}

// An FSDP job (tests/cpp/trace/fsdp_job.h, its replay worked out by hand): the same view, the
// slowest rank's step as the path, gathers counted, the recorded steps from FSDP's iterations.
TEST(WhatIfAdapter, ReadsAnFsdpReport) {
  trace::fixture::TempDir dir;
  trace::fixture::writeFsdpJob(dir);
  TraceStore store;
  model::loadTraces(store, {dir.path()});
  const WhatIfView v = whatIfViewOf(store);
  ASSERT_TRUE(v.ok()) << v.error;
  EXPECT_EQ(v.engine, "fsdp");
  EXPECT_EQ(v.recordedStepNs, 2405);
  EXPECT_EQ(v.baseline.replayedStepNs, 2405);
  EXPECT_EQ(v.baseline.collectives, 5u);  // gathers a step
  ASSERT_FALSE(v.baseline.path.empty());
  EXPECT_EQ(v.baseline.path.front().kind, "all_gather");
  EXPECT_EQ(v.baseline.path.back().endNs, 2405);
  int best = -1;
  for (size_t i = 0; i < v.rows.size(); ++i) {
    if (v.rows[i].best) best = int(i);
  }
  ASSERT_GE(best, 0);
  EXPECT_EQ(v.rows[size_t(best)].label, "sharding_strategy=NO_SHARD");
  EXPECT_EQ(v.rows[size_t(best)].predictedStepNs, 2255);
  // The advisor's findings come with the view: B's gathers are never prefetched.
  bool unprefetched = false;
  for (const analysis::Finding& f : v.findings) unprefetched |= f.kind == "no-prefetch";
  EXPECT_TRUE(unprefetched);
  // Steps 0-4 have a next one.
  EXPECT_EQ(recordedStepsOf(store, v.anchorRank, v.firstStep).size(), 5u);
}

TEST(WhatIfAdapter, AKindItDoesNotKnowGetsAColourFromItsName) {
  const auto unknown = static_cast<replay::PathSegment::Kind>(97);
  EXPECT_EQ(pathKindColor(unknown),
            categoryColor(std::string("path:") + replay::pathKindName(unknown)));
  EXPECT_NE(pathKindColor(replay::PathSegment::Kind::kForward),
            pathKindColor(replay::PathSegment::Kind::kBackward));
}

TEST(WhatIfMapping, ThePathGoesOverItsRanksFromTheChosenStepsStart) {
  TraceStore store;
  testing::fillWhatIfStore(store);
  const WhatIfView v = whatIfViewOf(store);
  ASSERT_TRUE(v.ok()) << v.error;
  // Rank 0's steps from the plan's (1) that have a next one: 1 to 5, all of one length.
  const std::vector<RecordedStep> steps = recordedStepsOf(store, v.anchorRank, v.firstStep);
  ASSERT_EQ(steps.size(), 5u);
  EXPECT_EQ(steps[0].step, 1);
  EXPECT_EQ(steps[0].beginNs, whatIfStepBegin(1));
  EXPECT_EQ(steps[0].endNs, whatIfStepBegin(2));
  EXPECT_EQ(pickStep(steps, v.recordedStepNs), 0);
  int64_t clipped = -1;
  const std::vector<RankBand> bands = pathOnTimeline(v.baseline, steps[2], &clipped);
  ASSERT_EQ(bands.size(), v.baseline.path.size());
  EXPECT_EQ(clipped, 0);
  const int64_t S = whatIfStepBegin(3);
  // Rank 1's forward, as recorded at step 3; its optimizer, up to step 4's forward.
  EXPECT_EQ(bands.front().rank, 1);
  EXPECT_EQ(bands.front().beginNs, S);
  EXPECT_EQ(bands.front().endNs, S + 110 * u);
  EXPECT_EQ(bands.front().color, pathKindColor(replay::PathSegment::Kind::kForward));
  EXPECT_EQ(bands.front().label, "forward");
  EXPECT_EQ(bands.back().rank, 1);
  EXPECT_EQ(bands.back().beginNs, whatIfStepBegin(4) - 50 * u);
  EXPECT_EQ(bands.back().endNs, whatIfStepBegin(4));
  // Bucket 2's allreduce, over rank 1 (it launched it last), where step 3 ran it.
  EXPECT_EQ(bands[4].label, "allreduce 2");
  EXPECT_EQ(bands[4].rank, 1);
  EXPECT_EQ(bands[4].beginNs, S + 690 * u);
  EXPECT_EQ(bands[4].endNs, S + 890 * u);
  EXPECT_EQ(bands[6].label, "copy back 3");
  EXPECT_EQ(bands[6].rank, 1);
  // A recorded step shorter than the model's: what runs past its end is cut, and counted.
  RecordedStep shorter = steps[2];
  shorter.endNs = S + 1160 * u;
  const std::vector<RankBand> cut = pathOnTimeline(v.baseline, shorter, &clipped);
  EXPECT_EQ(clipped, 30 * u);
  for (const RankBand& b : cut) EXPECT_LE(b.endNs, shorter.endNs);
  EXPECT_EQ(cut.back().label, "optimizer");
  EXPECT_EQ(cut.back().endNs, shorter.endNs);
}

class WhatIfInWindow : public ::testing::Test {
 protected:
  void open(bool replayable) {
    if (replayable)
      testing::fillWhatIfStore(store);
    else
      testing::fillSampleStore(store);  // DDP iterations, but no bucket plan
    view.time.show(store.beginNs(), store.endNs(), 0.0);
    view.panel = PanelId::kWhatIf;
    view.panelRequested = true;
    for (int i = 0; i < 3; ++i) frame();
  }
  void draw() {
    UiActions actions;
    ui.frame(store, view, nullptr, {}, actions);
  }
  void frame() {
    gui.frame([&] { draw(); });
  }
  float xOf(int64_t t) const {
    return view.time.toX(t, ui.timeline().plotX0(), ui.timeline().plotWidth());
  }

  HeadlessImGui gui;
  TraceStore store;
  ViewState view;
  ViewerUi ui;
};

TEST_F(WhatIfInWindow, ATraceItCannotReplaySaysWhy) {
  open(false);
  const WhatIfPanel& panel = ui.whatIf();
  ASSERT_TRUE(panel.computed());
  EXPECT_FALSE(panel.report().ok());
  EXPECT_NE(panel.report().error.find("bucket_plan"), std::string::npos) << panel.report().error;
  EXPECT_TRUE(view.bands.empty());
  EXPECT_EQ(ui.timeline().bandsDrawn(), 0u);
}

TEST_F(WhatIfInWindow, ThePathIsDrawnOverItsRanksAndARowClickDrawsItsPredictedStep) {
  open(true);
  WhatIfPanel& panel = ui.whatIf();
  ASSERT_TRUE(panel.computed());
  ASSERT_TRUE(panel.report().ok()) << panel.report().error;
  for (int i = 0; i < 5; ++i) frame();
  EXPECT_EQ(panel.computations(), 1);  // once for the trace, not per frame
  ASSERT_FALSE(view.bands.empty());
  EXPECT_EQ(ui.timeline().bandsDrawn(), view.bands.size());
  // The forward band: on rank 1's rows, at step 1's start (the step nearest the median).
  const RankBand& forward = view.bands.front();
  EXPECT_EQ(forward.rank, 1);
  EXPECT_EQ(forward.beginNs, whatIfStepBegin(1));
  const auto* ddp1 = ui.timeline().findRow(store, 1, "ddp");
  const auto* ddp0 = ui.timeline().findRow(store, 0, "ddp");
  ASSERT_NE(ddp1, nullptr);
  ASSERT_NE(ddp0, nullptr);
  const ImU32 color = pathKindColor(replay::PathSegment::Kind::kForward);
  const float x = xOf(forward.beginNs);
  EXPECT_TRUE(HeadlessImGui::colorAt(color, x, (ddp1->y0 + ddp1->y1) / 2));
  EXPECT_FALSE(HeadlessImGui::colorAt(color, x, (ddp0->y0 + ddp0->y1) / 2));

  // Only the recorded plan's predicted step until a row is chosen.
  auto alternativeLanes = [&] {
    size_t n = 0;
    for (const WhatIfPanel::Lane& l : panel.lanes()) n += l.alternative;
    return n;
  };
  EXPECT_GT(panel.lanes().size(), 0u);
  EXPECT_EQ(alternativeLanes(), 0u);
  int best = -1;
  for (size_t i = 0; i < panel.report().rows.size(); ++i)
    if (panel.report().rows[i].best) best = int(i);
  ASSERT_GE(best, 0);
  ASSERT_GT(panel.rowY(best), 0.0f);
  gui.click(panel.rowX(), panel.rowY(best), [&] { draw(); });
  EXPECT_EQ(panel.selected(), best);
  EXPECT_GT(alternativeLanes(), 0u);
  // Its ring lane draws the first allreduce in the path's colour, or faded off the path.
  const WhatIfRowView& row = panel.report().rows[size_t(best)];
  for (const WhatIfPanel::Lane& l : panel.lanes()) {
    if (!l.alternative || l.lane != PredictedItem::kRing) continue;
    for (const PredictedItem& i : row.items) {
      if (i.lane != PredictedItem::kRing || !i.onPath) continue;
      const float mid = panel.ganttX((i.beginNs + i.endNs) / 2);
      EXPECT_TRUE(HeadlessImGui::colorAt(i.color, mid, (l.y0 + l.y1) / 2)) << i.index;
    }
  }
  // The checkbox's state: off, the timeline is clear of the path.
  panel.setHighlight(false);
  frame();
  EXPECT_TRUE(view.bands.empty());
  EXPECT_EQ(ui.timeline().bandsDrawn(), 0u);
  EXPECT_EQ(panel.computations(), 1);
}

TEST_F(WhatIfInWindow, AnotherTraceGetsItsOwnReportAndNotTheOldPath) {
  open(true);
  ASSERT_FALSE(view.bands.empty());
  // Another panel in front, another trace: its path is on, so the new trace is replayed at
  // once (this one cannot be: no path), and the old path is not drawn over it.
  view.panel = PanelId::kStats;
  view.panelRequested = true;
  frame();
  TraceStore other;
  testing::fillSampleStore(other);
  gui.frame([&] {
    UiActions a;
    ui.frame(other, view, nullptr, {}, a);
  });
  const WhatIfPanel& panel = ui.whatIf();
  EXPECT_EQ(panel.computations(), 2);
  EXPECT_FALSE(panel.report().ok());
  EXPECT_TRUE(view.bands.empty());
  EXPECT_EQ(ui.timeline().bandsDrawn(), 0u);
}

// A real NCCL job's profiler files (Megatron TP8, the folder as the user opens it): the panel
// reads the profiler replay's report, its bounds as rows, its path on the ranks' rows within
// the recorded ProfilerStep#3.
TEST(WhatIfAdapter, ReadsAProfilerTracesReplay) {
  TraceStore store;
  model::loadTraces(store, {ringx::testing::sharedTrace("nccl/astrasim_megatron_tp8")});
  const WhatIfView v = whatIfViewOf(store);
  ASSERT_TRUE(v.ok()) << v.error;
  EXPECT_EQ(v.engine, "profiler");
  EXPECT_EQ(v.firstStep, 3);
  EXPECT_LT(std::abs(v.baseline.changeShare), 0.03);
  ASSERT_EQ(v.rows.size(), 2u);
  EXPECT_EQ(v.rows[0].label, "communication free");
  EXPECT_EQ(v.baseline.collectives, 84u);
  ASSERT_FALSE(v.baseline.path.empty());
  bool launchBound = false;
  for (const analysis::Finding& f : v.findings) launchBound |= f.kind == "launch-bound";
  EXPECT_TRUE(launchBound);
  const std::vector<RecordedStep> steps = recordedStepsOf(store, v.anchorRank, v.firstStep);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].step, 3);
  int64_t clipped = 0;
  const std::vector<RankBand> bands = pathOnTimeline(v.baseline, steps[0], &clipped);
  EXPECT_FALSE(bands.empty());
  // The path ends where the replayed step does, within the recorded one (the replay is 0.03 ms
  // short of it).
  EXPECT_LT(clipped, v.recordedStepNs / 100);
}

// A CPU torch DDP job's profiler files (hand-made, tests/cpp/profiled_ddp_trace.h): the panel
// reads DDP's report from the buckets recovered, and its recorded steps are the job's forwards.
TEST(WhatIfAdapter, ReadsACpuJobsProfilerTracesAsDdp) {
  const TraceStore store = ringx::testing::storeOf(ringx::testing::profiledDdpJob());
  const WhatIfView v = whatIfViewOf(store);
  ASSERT_TRUE(v.ok()) << v.error;
  EXPECT_EQ(v.engine, "ddp");
  EXPECT_EQ(v.firstStep, 1);
  EXPECT_FALSE(v.rows.empty());
  ASSERT_FALSE(v.baseline.path.empty());
  const std::vector<RecordedStep> steps = recordedStepsOf(store, v.anchorRank, v.firstStep);
  ASSERT_EQ(steps.size(), 2u);  // steps 1 and 2, each to the next one's forward
  EXPECT_EQ(steps[0].endNs - steps[0].beginNs, 9'000'000);
  int64_t clipped = 0;
  EXPECT_FALSE(pathOnTimeline(v.baseline, steps[0], &clipped).empty());
}

}  // namespace
}  // namespace ringx::viewer
