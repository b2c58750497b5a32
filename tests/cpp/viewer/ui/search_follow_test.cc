// The search box and live follow mode, driven headless through ImGui input as a
// user drives them: Ctrl+F, typing, Enter / Shift+Enter / F3 / Shift+F3 move
// the timeline to each match and outline it ("k of N matches"), a match on a
// rank scrolled out of view brings its rows into view; attached to a live job,
// the view keeps the newest seconds, a drag stops that, End starts it again.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tests/cpp/trace/live_job.h"
#include "tests/cpp/trace/model/sample_store.h"
#include "tests/cpp/viewer/ui/ui_harness.h"
#include "viewer/ui/viewer_ui.h"

namespace ringx::viewer {
namespace {

using testing::HeadlessImGui;
using testing::kMs;

class Search : public ::testing::Test {
 protected:
  explicit Search(float height = 900) : gui(1600, height) {}
  void SetUp() override {
    testing::fillSampleStore(store);
    view.time.show(store.beginNs(), store.endNs(), 0.0);
    frame();
  }
  void frame() {
    gui.frame([&] {
      UiActions actions;
      ui.frame(store, view, nullptr, {}, actions);
    });
  }
  std::function<void()> build() {
    return [&] {
      UiActions actions;
      ui.frame(store, view, nullptr, {}, actions);
    };
  }
  // Ctrl+F, then the query typed into the box.
  void find(const char* text) {
    gui.press('F', build(), /*ctrl=*/true);
    frame();
    ASSERT_TRUE(ImGui::GetIO().WantTextInput) << "Ctrl+F did not focus the search box";
    gui.type(text, build());
  }
  // The span the search box shows.
  const Span& hitSpan() const {
    const EventRef& hit = view.searchHit;
    return store.findRank(hit.rank)->tracks[size_t(hit.track)].levels[size_t(hit.level)]
                                                                     [size_t(hit.index)];
  }
  int64_t middle() const { return view.time.t0 + view.time.span() / 2; }

  HeadlessImGui gui;
  TraceStore store;
  ViewState view;
  ViewerUi ui;
};

TEST_F(Search, EnterGoesToEachMatchInTurnCentringZoomingAndOutliningIt) {
  const TimeView all = view.time;
  find("allreduce");
  EXPECT_EQ(ui.search().statusText(), "16 matches");
  EXPECT_EQ(view.time, all);  // typing alone does not move the view
  gui.press(HeadlessImGui::kEnter, build());
  EXPECT_EQ(ui.search().statusText(), "1 of 16 matches");
  ASSERT_TRUE(view.searchHit.valid());
  // The first allreduce at or after the view's left edge: rank 0's bucket 0, [5, 6] ms.
  EXPECT_EQ(view.searchHit.rank, 0);
  EXPECT_EQ(hitSpan().begin, 5 * kMs);
  EXPECT_EQ(store.str(hitSpan().name), "allreduce");
  EXPECT_EQ(view.selection.event, view.searchHit);  // selected, as a click would
  // Centred, and zoomed in so that the 1 ms span is 1/20 to 1/3 of the view.
  EXPECT_NEAR(double(middle()), 5.5 * kMs, 1000);
  EXPECT_LE(view.time.span(), 20 * kMs);
  EXPECT_GE(view.time.span(), 3 * kMs);
  EXPECT_LT(view.time.span(), all.span());
  // Outlined in the search colour at the span's left edge, in its row.
  const TimelinePanel& timeline = ui.timeline();
  ASSERT_TRUE(timeline.searchHitDrawn());
  const auto* row = timeline.findRow(store, 0, "comm:world");
  ASSERT_NE(row, nullptr);
  const float left = view.time.toX(5 * kMs, timeline.plotX0(), timeline.plotWidth());
  EXPECT_TRUE(
      HeadlessImGui::colorAt(TimelinePanel::kSearchHitColor, left - 1, (row->y0 + row->y1) / 2));
  EXPECT_FALSE(
      HeadlessImGui::colorAt(TimelinePanel::kSearchHitColor, left - 40, (row->y0 + row->y1) / 2));

  // Enter again (the box keeps the keyboard): rank 1's, half a millisecond later.
  gui.press(HeadlessImGui::kEnter, build());
  EXPECT_EQ(ui.search().statusText(), "2 of 16 matches");
  EXPECT_EQ(view.searchHit.rank, 1);
  EXPECT_EQ(hitSpan().begin, 5 * kMs + kMs / 2);
  EXPECT_NEAR(double(middle()), 6.0 * kMs, 1000);
  // Shift+Enter goes back; F3 and Shift+F3 step too, wrapping around the ends.
  gui.press(HeadlessImGui::kEnter, build(), false, /*shift=*/true);
  EXPECT_EQ(ui.search().statusText(), "1 of 16 matches");
  gui.press(SearchBar::kKeyF3, build());
  EXPECT_EQ(ui.search().statusText(), "2 of 16 matches");
  gui.press(SearchBar::kKeyF3, build(), false, /*shift=*/true);
  gui.press(SearchBar::kKeyF3, build(), false, /*shift=*/true);
  EXPECT_EQ(ui.search().statusText(), "16 of 16 matches");
  EXPECT_EQ(hitSpan().begin, 30 * kMs + 6 * kMs + kMs / 2);  // rank 1's last, at 36.5 ms
  EXPECT_NEAR(double(middle()), 36.5 * kMs + kMs, 1000);
}

TEST_F(Search, KeyValueQueriesAndNoMatchesSaySo) {
  find("seq=5");
  gui.press(HeadlessImGui::kEnter, build());
  EXPECT_EQ(ui.search().statusText(), "1 of 2 matches");
  // seq 5 is iteration 2's second bucket: [26, 28] ms on rank 0.
  EXPECT_EQ(hitSpan().begin, 26 * kMs);
  // Editing the query starts over: no match, nothing outlined.
  gui.type("99", build());
  EXPECT_EQ(ui.search().statusText(), "no matches");
  EXPECT_FALSE(view.searchHit.valid());
  gui.press(HeadlessImGui::kEnter, build());
  EXPECT_FALSE(view.searchHit.valid());
}

class SearchInAShortWindow : public Search {
 protected:
  SearchInAShortWindow() : Search(300) {}
};

TEST_F(SearchInAShortWindow, AMatchOnARankScrolledOutOfViewBringsItsRowsIntoView) {
  const TimelinePanel& timeline = ui.timeline();
  const auto* before = timeline.findRow(store, 1, "comm:world");
  ASSERT_NE(before, nullptr);
  ASSERT_GT(before->y0, timeline.rowsY1()) << "the test wants rank 1 below the timeline";
  find("seq=7");
  gui.press(HeadlessImGui::kEnter, build());
  gui.press(HeadlessImGui::kEnter, build());  // the second: rank 1's
  ASSERT_EQ(view.searchHit.rank, 1);
  const auto* row = timeline.findRow(store, 1, "comm:world");
  ASSERT_NE(row, nullptr);
  EXPECT_GE(row->y0, timeline.rulerY1());
  EXPECT_LE(row->y1, timeline.rowsY1());
  EXPECT_TRUE(timeline.searchHitDrawn());
}

// ---- live follow ------------------------------------------------------------

class Follow : public ::testing::Test {
 protected:
  Follow() : source(job.address(), "") {
    view.settings.followWindowSeconds = 0.010f;  // 10 ms: the test's events span 200 ms
  }
  void frame() {
    gui.frame([&] {
      UiActions actions;
      ui.frame(store, view, &source, {}, actions);
    });
  }
  std::function<void()> build() {
    return [&] {
      UiActions actions;
      ui.frame(store, view, &source, {}, actions);
    };
  }
  // rank's allreduces at [from, from + n ms), then frames until the store has them.
  bool send(int rank, int64_t from, int n) {
    for (int i = 0; i < n; ++i)
      job.feeds[rank].span("comm:world", "allreduce", from + i * kMs, from + i * kMs + kMs / 2, 64);
    job.write(rank);
    expected += uint64_t(n);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      source.drainInto(store);
      frame();
      if (store.eventCount() >= expected) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  trace::testing::Job job;
  LiveSource source;
  HeadlessImGui gui;
  TraceStore store;
  ViewState view;
  ViewerUi ui;
  uint64_t expected = 0;
};

TEST_F(Follow, TheViewTracksTheNewestEventsUntilTheUserPansAndEndResumes) {
  ASSERT_TRUE(view.settings.followLive);  // on by default
  ASSERT_TRUE(send(0, 1 * kMs, 20)) << source.stateText();
  frame();
  // The newest 10 ms: rank 0's last allreduce ends at 20.5 ms.
  EXPECT_EQ(store.endNs(), 20 * kMs + kMs / 2);
  EXPECT_EQ(view.time.t0, store.endNs() - 10 * kMs);
  EXPECT_GT(view.time.t1, store.endNs());
  ASSERT_TRUE(send(1, 100 * kMs, 5)) << source.stateText();
  frame();
  EXPECT_EQ(view.time.t0, 104 * kMs + kMs / 2 - 10 * kMs);  // moved with the new data
  EXPECT_TRUE(view.settings.followLive);

  // A drag on the timeline pans: following stops.
  const TimelinePanel& timeline = ui.timeline();
  const auto* row = timeline.findRow(store, 1, "comm:world");
  ASSERT_NE(row, nullptr);
  const float x = timeline.plotX0() + 600, y = (row->y0 + row->y1) / 2;
  gui.mouse(x, y);
  frame();
  gui.button(true);
  frame();
  for (int i = 1; i <= 5; ++i) {
    gui.mouse(x + 30 * i, y);
    frame();
  }
  gui.button(false);
  frame();
  EXPECT_FALSE(view.settings.followLive);
  const TimeView panned = view.time;
  EXPECT_LT(panned.t0, 104 * kMs + kMs / 2 - 10 * kMs);
  ASSERT_TRUE(send(0, 200 * kMs, 3)) << source.stateText();
  frame();
  EXPECT_EQ(view.time, panned);  // new data does not move a view the user placed

  // End follows again: the newest 10 ms, ending at 202.5 ms.
  gui.mouse(10, 10);
  gui.press(HeadlessImGui::kEnd, build());
  EXPECT_TRUE(view.settings.followLive);
  EXPECT_EQ(view.time.t0, 202 * kMs + kMs / 2 - 10 * kMs);
  // So does a wheel zoom stop it.
  gui.mouse(x, y);
  gui.wheel(1);
  frame();
  EXPECT_FALSE(view.settings.followLive);
}

}  // namespace
}  // namespace ringx::viewer
