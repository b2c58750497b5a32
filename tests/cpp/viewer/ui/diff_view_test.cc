// The diff view (ringx-viewer --diff A B) driven headless: the ranked table puts
// the slower collective first, a click on it shows both runs there at one scale
// with the item's extent selected, and zooming one run zooms the other.
#include <gtest/gtest.h>

#include "tests/cpp/trace/model/sample_store.h"
#include "tests/cpp/viewer/ui/ui_harness.h"
#include "viewer/ui/diff_view.h"

namespace ringx::viewer {
namespace {

using testing::HeadlessImGui;
using testing::kMs;

// Run A's clock starts at 0, run B's at 1 s; B's seq 1 takes 3 ms more.
constexpr int64_t kClockB = 1000 * kMs;

class DiffViewTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::fillDiffRun(a, 0);
    testing::fillDiffRun(b, kClockB, /*slowerSeq1=*/3);
    view.setDiff(analysis::diffRuns(a, b), "runA", "runB");
    viewA.time.show(a.beginNs(), a.endNs(), 0.0);
    viewB.time.show(b.beginNs(), b.endNs(), 0.0);
    frame();
  }
  void draw() { view.frame(a, b, viewA, viewB); }
  void frame() {
    gui.frame([&] { draw(); });
  }
  void click(float x, float y) {
    gui.click(x, y, [&] { draw(); });
  }

  HeadlessImGui gui;
  TraceStore a, b;
  ViewState viewA, viewB;
  DiffView view;
};

TEST_F(DiffViewTest, TheSlowerCollectiveIsRankedFirst) {
  const analysis::RunDiff& d = view.diff();
  EXPECT_EQ(d.matchedCollectives, 3u);
  ASSERT_EQ(d.rows.size(), 3u);
  EXPECT_NE(d.rows[0].name.find("allreduce seq 1"), std::string::npos) << d.rows[0].name;
  EXPECT_EQ(d.rows[0].deltaNs, 3 * kMs);
  EXPECT_EQ(view.selectedRow(), -1);
  EXPECT_GT(view.rowY(0), 0.0f);  // drawn
  EXPECT_GT(view.rowY(1), view.rowY(0));
}

TEST_F(DiffViewTest, AClickOnARowShowsBothRunsThereAtOneScale) {
  click(view.rowX(), view.rowY(0));
  ASSERT_EQ(view.selectedRow(), 0);
  // Seq 1 begins at 20 ms in each run's clock: A's 20 ms, B's 1 s + 20 ms.
  const int64_t atA = 20 * kMs, atB = kClockB + 20 * kMs;
  // One width (the slower run's 4 ms) for both: the item in the middle third.
  EXPECT_EQ(viewA.time.span(), viewB.time.span());
  EXPECT_EQ(viewA.time.span(), 3 * 4 * kMs);
  EXPECT_EQ(viewA.time.t0, atA - 4 * kMs);
  EXPECT_EQ(viewB.time.t0, atB - 4 * kMs);
  // Each run's own extent of the collective is the selected range.
  ASSERT_TRUE(viewA.selection.hasRange);
  ASSERT_TRUE(viewB.selection.hasRange);
  EXPECT_EQ(viewA.selection.rangeBegin, atA);
  EXPECT_EQ(viewA.selection.rangeEnd, atA + 1 * kMs);
  EXPECT_EQ(viewB.selection.rangeBegin, atB);
  EXPECT_EQ(viewB.selection.rangeEnd, atB + 4 * kMs);
  // A second row: seq 0 or 2 (no change), each at its own place.
  click(view.rowX(), view.rowY(1));
  ASSERT_EQ(view.selectedRow(), 1);
  const int64_t seq = view.diff().rows[1].name.find("seq 0") != std::string::npos ? 0 : 2;
  EXPECT_EQ(viewA.selection.rangeBegin, (seq + 1) * 10 * kMs);
  EXPECT_EQ(viewB.selection.rangeBegin, kClockB + (seq + 1) * 10 * kMs);
}

TEST_F(DiffViewTest, ZoomingOneRunZoomsTheOtherToTheSameScale) {
  view.select(0, viewA, viewB);
  frame();
  const int64_t centreB = viewB.time.t0 + viewB.time.span() / 2;
  const int64_t spanBefore = viewA.time.span();
  // The wheel over run A's rows (the middle of its timeline).
  const TimelinePanel& timeline = view.timelineA();
  gui.mouse(timeline.plotX0() + timeline.plotWidth() / 2,
            (timeline.rulerY1() + timeline.rowsY1()) / 2);
  frame();
  gui.wheel(2);
  frame();
  ASSERT_LT(viewA.time.span(), spanBefore);
  EXPECT_EQ(viewB.time.span(), viewA.time.span());
  EXPECT_NEAR(double(viewB.time.t0 + viewB.time.span() / 2), double(centreB), 2.0);
  // Off: run B keeps its scale.
  view.setSameScale(false);
  const TimeView before = viewB.time;
  gui.wheel(2);
  frame();
  EXPECT_TRUE(viewB.time == before);
}

TEST_F(DiffViewTest, SelectingARowOutOfRangeSelectsNothing) {
  view.select(99, viewA, viewB);
  EXPECT_EQ(view.selectedRow(), -1);
  EXPECT_FALSE(viewA.selection.hasRange);
}

}  // namespace
}  // namespace ringx::viewer
