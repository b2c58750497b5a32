// Screenshot tests: the real application (GLFW window, OpenGL3, llvmpipe under
// Xvfb) renders each panel; the pixels read back must not be blank, and known
// content must be where the layout says: a known event's colour inside its row,
// the DDP breakdown's colours, the FSDP wait bars, the memory peak mark, folded
// blocks shaded by how busy they are, the --search match outlined, the What-if
// panel's table, its critical path over the ranks it names and a row's predicted step.
// Run by ctest on a virtual display of its own (tests/python/virtual_display.py, from
// CMakeLists.txt); each test also writes its PNG to $RINGX_SCREENSHOT_DIR (default: the
// working directory) for a person to look at.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include "tests/cpp/trace/live_job.h"
#include "tests/cpp/trace/model/sample_store.h"
#include "tests/cpp/trace/trace_fixture.h"
#include "tests/cpp/viewer/whatif_store.h"
#include "viewer/app/app.h"
#include "viewer/ui/style.h"

namespace ringx::viewer {
namespace {

using testing::kMs;

struct Image {
  int width = 0, height = 0;
  std::vector<unsigned char> rgba;
  ImU32 at(float x, float y) const {
    const int ix = std::clamp(int(x), 0, width - 1), iy = std::clamp(int(y), 0, height - 1);
    const unsigned char* p = &rgba[(size_t(iy) * size_t(width) + size_t(ix)) * 4];
    return IM_COL32(p[0], p[1], p[2], 255);
  }
  // Distinct colours in a rectangle: a blank region has one or two.
  size_t distinctColors(float x0, float y0, float x1, float y1) const {
    std::set<ImU32> colors;
    for (int y = int(y0); y < int(y1); y += 2)
      for (int x = int(x0); x < int(x1); x += 2) colors.insert(at(float(x), float(y)));
    return colors.size();
  }
  // Pixels of the rectangle that differ from its most common colour: text and
  // shapes on a background; 0 for a blank region.
  size_t contentPixels(float x0, float y0, float x1, float y1) const {
    std::map<ImU32, size_t> counts;
    size_t total = 0;
    for (int y = int(y0); y < int(y1); ++y)
      for (int x = int(x0); x < int(x1); ++x, ++total) ++counts[at(float(x), float(y))];
    size_t most = 0;
    for (const auto& [color, n] : counts) most = std::max(most, n);
    return total - most;
  }
  // Whether some pixel in the rectangle is within `tolerance` of `color`.
  bool has(ImU32 color, float x0, float y0, float x1, float y1, int tolerance = 12) const {
    for (int y = int(y0); y <= int(y1); ++y)
      for (int x = int(x0); x <= int(x1); ++x)
        if (close(at(float(x), float(y)), color, tolerance)) return true;
    return false;
  }
  static bool close(ImU32 a, ImU32 b, int tolerance) {
    for (int shift : {IM_COL32_R_SHIFT, IM_COL32_G_SHIFT, IM_COL32_B_SHIFT})
      if (std::abs(int((a >> shift) & 0xff) - int((b >> shift) & 0xff)) > tolerance) return false;
    return true;
  }
};

class Screen : public ::testing::Test {
 protected:
  static std::unique_ptr<TraceStore> sample() {
    auto store = std::make_unique<TraceStore>();
    testing::fillSampleStore(*store);
    // A collective rank 1 never arrived at: the collectives panel flags it.
    testing::addSpan(*store, 0, "comm:world", "collective", "allreduce", 40 * kMs, 41 * kMs,
                     {{"bytes", 1024}, {"seq", 16}, {"group_rank", 0}, {"group_size", 2}},
                     {{"group", "world"}});
    store->finalize();
    return store;
  }
  // Renders a few frames of `panel` and returns the last one's pixels.
  Image render(const std::string& panel) {
    AppOptions options;
    options.panel = panel;
    options.frames = 4;
    App app(options, sample());
    Image image;
    for (int i = 0; i < 4; ++i) {
      app.frame();
      if (i == 3) {
        image.width = app.window().framebufferWidth();
        image.height = app.window().framebufferHeight();
        image.rgba = app.window().readPixels();
        const char* dir = std::getenv("RINGX_SCREENSHOT_DIR");
        app.window().screenshot(std::string(dir ? dir : ".") + "/screen-" + panel + ".png");
        timeline_ = app.ui().timeline();
        memory_ = app.ui().memory();
        view_ = app.view();
        store_ = sample();
      }
      app.present();
    }
    return image;
  }
  float xOf(int64_t t) const {
    return view_.time.toX(t, timeline_.plotX0(), timeline_.plotWidth());
  }

  TimelinePanel timeline_;
  MemoryPanel memory_;
  ViewState view_;
  std::unique_ptr<TraceStore> store_;
};

TEST_F(Screen, TimelineDrawsAKnownEventInItsRowInItsCategoryColour) {
  const Image image = render("stats");
  ASSERT_EQ(image.width, 1600);
  ASSERT_EQ(image.height, 900);
  EXPECT_GT(image.distinctColors(0, 0, 1600, 900), 20u);
  // Rank 1's first allreduce: [5.5, 6.5] ms, in rank 1's comm:world row.
  const auto* row = timeline_.findRow(*store_, 1, "comm:world");
  ASSERT_NE(row, nullptr);
  const float y = (row->y0 + row->y1) / 2;
  EXPECT_TRUE(
      image.has(categoryColor("collective"), xOf(6 * kMs) - 1, y - 1, xOf(6 * kMs) + 1, y + 1));
  // Between rank 1's iterations (at 9.6 ms) its comm row is empty.
  EXPECT_FALSE(image.has(categoryColor("collective"), xOf(9 * kMs + 6 * kMs / 10), y - 1,
                         xOf(9 * kMs + 6 * kMs / 10) + 1, y + 1));
  // The ddp row has forward spans in DDP green at 1 ms.
  const auto* ddp = timeline_.findRow(*store_, 0, "ddp");
  ASSERT_NE(ddp, nullptr);
  EXPECT_TRUE(image.has(categoryColor("ddp"), xOf(1 * kMs), (ddp->y0 + ddp->y1) / 2 - 1,
                        xOf(1 * kMs) + 1, (ddp->y0 + ddp->y1) / 2 + 1));
}

TEST_F(Screen, CollectivesPanelHighlightsTheCollectiveARankNeverReached) {
  const Image image = render("collectives");
  // The lower part (the panel) is not blank, and the hang line is drawn in red text.
  EXPECT_GT(image.distinctColors(0, 560, 1600, 900), 10u);
  EXPECT_TRUE(image.has(IM_COL32(255, 110, 100, 255), 0, 540, 1600, 900, 40));
}

TEST_F(Screen, DdpPanelDrawsTheIterationBreakdown) {
  const Image image = render("ddp");
  EXPECT_GT(image.distinctColors(0, 560, 1600, 900), 10u);
  // forward green, backward blue, exposed red, optimizer grey bars in the panel.
  EXPECT_TRUE(image.has(IM_COL32(52, 168, 83, 255), 0, 580, 800, 900, 4));
  EXPECT_TRUE(image.has(IM_COL32(66, 133, 244, 255), 0, 580, 800, 900, 4));
  EXPECT_TRUE(image.has(IM_COL32(229, 57, 53, 255), 0, 580, 800, 900, 4));
}

TEST_F(Screen, FsdpPanelDrawsTheUnitsWaitBars) {
  const Image image = render("fsdp");
  EXPECT_GT(image.contentPixels(0, 560, 1600, 900), 2000u);
  EXPECT_TRUE(image.has(IM_COL32(255, 167, 38, 255), 0, 560, 1600, 900, 4));  // gather wire
  EXPECT_TRUE(image.has(IM_COL32(229, 57, 53, 255), 0, 560, 1600, 900, 4));   // waited
}

TEST_F(Screen, MemoryPanelMarksThePeakWhereTheLayoutSays) {
  const Image image = render("memory");
  ASSERT_FALSE(memory_.charts().empty());
  bool checked = false;
  for (const auto& c : memory_.charts()) {
    if (c.y1 > 900 || c.peakX < c.x0) continue;  // scrolled out of view
    EXPECT_TRUE(image.has(IM_COL32(229, 57, 53, 255), c.peakX - 2, c.peakY - 2, c.peakX + 2,
                          c.peakY + 2, 10))
        << "peak mark at " << c.peakX << "," << c.peakY;
    checked = true;
  }
  EXPECT_TRUE(checked);
}

TEST_F(Screen, StatsPanelIsNotBlank) {
  const Image image = render("stats");
  // Its hint text at least (a line of text is some 2000 pixels).
  EXPECT_GT(image.contentPixels(0, 560, 1600, 900), 2000u);
}

// The last frame of `frames` rendered by `app`, saved as screen-<name>.png.
Image lastFrame(App& app, int frames, const std::string& name) {
  Image image;
  for (int i = 0; i < frames; ++i) {
    app.frame();
    if (i == frames - 1) {
      image.width = app.window().framebufferWidth();
      image.height = app.window().framebufferHeight();
      image.rgba = app.window().readPixels();
      const char* dir = std::getenv("RINGX_SCREENSHOT_DIR");
      app.window().screenshot(std::string(dir ? dir : ".") + "/screen-" + name + ".png");
    }
    app.present();
  }
  return image;
}

// `color` mixed with the timeline's background (30, 32, 36) by t, as the
// timeline shades folded blocks.
ImU32 shaded(ImU32 color, float t) {
  const auto ch = [&](int shift, float background) {
    return ImU32(background + (float((color >> shift) & 0xff) - background) * t + 0.5f) << shift;
  };
  return ch(IM_COL32_R_SHIFT, 30) | ch(IM_COL32_G_SHIFT, 32) | ch(IM_COL32_B_SHIFT, 36) |
         IM_COL32_A_MASK;
}

TEST_F(Screen, FoldedBlocksAreShadedByHowBusyTheyAre) {
  // One lane: a dense burst (9 us spans, 1 us gaps: 90% busy) over [0, 20] ms,
  // and sparse slivers (1 us every 100 us: 1% busy) over [40, 60] ms. Zoomed
  // out, each folds into one block.
  auto store = std::make_unique<TraceStore>();
  for (int i = 0; i < 2000; ++i)
    testing::addSpan(*store, 0, "compute", "user", "op", i * 10000, i * 10000 + 9000);
  for (int i = 0; i < 200; ++i)
    testing::addSpan(*store, 0, "compute", "user", "op", 40 * kMs + i * 100000,
                     40 * kMs + i * 100000 + 1000);
  store->finalize();
  AppOptions options;
  App app(options, std::move(store));
  const Image image = lastFrame(app, 3, "folded-shading");
  const TimelinePanel& timeline = app.ui().timeline();
  const auto* row = timeline.findRow(app.store(), 0, "compute");
  ASSERT_NE(row, nullptr);
  auto xOf = [&](int64_t t) {
    return app.view().time.toX(t, timeline.plotX0(), timeline.plotWidth());
  };
  ASSERT_LT(timeline.itemsDrawn(), 10u) << "both runs should fold";
  // Sampled well into each block (its "N events" label is on the left), off the
  // ruler's tick lines, and low in the row (below the label's glyphs).
  const float y = row->y1 - 5;
  const ImU32 dense = image.at(xOf(13 * kMs + 300000), y);
  const ImU32 sparse = image.at(xOf(53 * kMs + 300000), y);
  const ImU32 user = categoryColor("user");
  const float range = TimelinePanel::kFoldedMaxShade - TimelinePanel::kFoldedMinShade;
  EXPECT_TRUE(Image::close(dense, shaded(user, TimelinePanel::kFoldedMinShade + range * 0.9f), 6))
      << std::hex << dense;
  EXPECT_TRUE(Image::close(sparse, shaded(user, TimelinePanel::kFoldedMinShade + range * 0.01f), 6))
      << std::hex << sparse;
  EXPECT_FALSE(Image::close(dense, sparse, 40));
  // Between the runs the lane is empty: neither shade.
  const ImU32 gap = image.at(xOf(31 * kMs + 300000), y);
  EXPECT_FALSE(Image::close(gap, dense, 12));
  EXPECT_FALSE(Image::close(gap, sparse, 4));
}

TEST_F(Screen, WindowOpensAtOnceAndShowsTheLoadsProgressUntilTheTraceIsIn) {
  // Four rank files, read on one thread that is held before the third: the
  // window is up, its bar half full; released, the timeline shows the ranks.
  trace::fixture::TempDir dir;
  for (int r = 0; r < 4; ++r) {
    trace::fixture::RankStream s(r, 4);
    for (int i = 0; i < 50; ++i)
      s.span(trace::Category::kUser, "compute", "op", i * kMs, i * kMs + kMs / 2);
    s.writeTo(dir.file("rank-" + std::to_string(r) + ".ringx"));
  }
  AppOptions options;
  options.inputs = {dir.path()};
  options.loadThreads = 1;
  options.holdLoadAtFile = 2;
  App app(options);
  ASSERT_NE(app.loading(), nullptr);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (app.loading()->progress().filesDone.load() < 2 &&
         std::chrono::steady_clock::now() < deadline)
    lastFrame(app, 1, "loading");
  const Image loading = lastFrame(app, 2, "loading");
  const LoadProgressView& bar = app.loadProgress();
  EXPECT_FLOAT_EQ(bar.fraction(), 0.5f);
  const float quarter = bar.barX0() + (bar.barX1() - bar.barX0()) * 0.25f;
  const float threeQuarters = bar.barX0() + (bar.barX1() - bar.barX0()) * 0.75f;
  EXPECT_TRUE(Image::close(loading.at(quarter, bar.barY()), LoadProgressView::kBarColor, 6));
  EXPECT_TRUE(
      Image::close(loading.at(threeQuarters, bar.barY()), LoadProgressView::kBarBackground, 6));
  // The line under the bar ("2 of 4 files, ...") is drawn.
  EXPECT_GT(loading.contentPixels(bar.barX0(), bar.barY() + 12, bar.barX1(), bar.barY() + 40),
            200u);
  EXPECT_TRUE(app.store().empty());
  app.loading()->release();
  while (app.loading() != nullptr && std::chrono::steady_clock::now() < deadline)
    lastFrame(app, 1, "loaded");
  ASSERT_EQ(app.loading(), nullptr);
  const Image loaded = lastFrame(app, 2, "loaded");
  EXPECT_EQ(app.store().ranks().size(), 4u);
  const TimelinePanel& timeline = app.ui().timeline();
  const auto* row = timeline.findRow(app.store(), 3, "compute");
  ASSERT_NE(row, nullptr);
  const float x = app.view().time.toX(10 * kMs + kMs / 4, timeline.plotX0(), timeline.plotWidth());
  EXPECT_TRUE(loaded.has(categoryColor("user"), x - 1, (row->y0 + row->y1) / 2 - 1, x + 1,
                         (row->y0 + row->y1) / 2 + 1));
}

TEST_F(Screen, AggregateLanesShadeHowBusyEachHostWasAndMarkItsStragglers) {
  // Forty ranks on five hosts; rank 13 (host1) is the last to every allreduce.
  auto store = std::make_unique<TraceStore>();
  testing::fillHostsStore(*store, 5, 8, /*straggler=*/13);
  AppOptions options;
  App app(options, std::move(store));
  app.view().time.show(20 * kMs, 40 * kMs, 0.0);  // two steps
  const Image folded = lastFrame(app, 3, "aggregate-lanes");
  const TimelinePanel& timeline = app.ui().timeline();
  using A = TimelinePanel::Aggregate;
  auto xOf = [&](int64_t t) {
    return app.view().time.toX(t, timeline.plotX0(), timeline.plotWidth());
  };
  // host0's compute row is fully busy at 22.3 ms (off the ruler's 22 ms line),
  // empty at 25.5 ms.
  const auto* compute = timeline.findGroupRow(0, A::kCompute);
  ASSERT_NE(compute, nullptr);
  const float cy = compute->y1 - 4;
  const int64_t busyAt = 22 * kMs + 3 * kMs / 10;
  EXPECT_TRUE(Image::close(folded.at(xOf(busyAt), cy),
                           shaded(categoryColor("user"), TimelinePanel::kFoldedMaxShade), 6))
      << std::hex << folded.at(xOf(busyAt), cy);
  EXPECT_FALSE(Image::close(folded.at(xOf(25 * kMs + kMs / 2), cy),
                            shaded(categoryColor("user"), TimelinePanel::kFoldedMinShade), 20));
  // host1's comm row: every rank in its allreduce at 27.5 ms.
  const auto* comm = timeline.findGroupRow(1, A::kComm);
  ASSERT_NE(comm, nullptr);
  EXPECT_TRUE(Image::close(folded.at(xOf(27 * kMs + kMs / 2), comm->y1 - 4),
                           shaded(categoryColor("collective"), TimelinePanel::kFoldedMaxShade), 6));
  // Straggler marks: at host1's rank 13's arrivals (27 ms, 37 ms), nowhere on host0.
  for (int64_t at : {27 * kMs, 37 * kMs})
    EXPECT_TRUE(folded.has(TimelinePanel::kStragglerColor, xOf(at) - 1, comm->y0 + 2, xOf(at) + 1,
                           comm->y0 + 4, 10))
        << at;
  const auto* comm0 = timeline.findGroupRow(0, A::kComm);
  EXPECT_FALSE(folded.has(TimelinePanel::kStragglerColor, timeline.plotX0(), comm0->y0,
                          timeline.plotX0() + timeline.plotWidth(), comm0->y1, 10));
  // Expanded, host1's ranks are drawn below its lane: rank 13's allreduce at 27.5 ms.
  app.view().expandedGroups.insert("host1");
  const Image expanded = lastFrame(app, 2, "aggregate-lanes-expanded");
  const auto* rank13 = timeline.findRow(app.store(), 13, "comm:world");
  ASSERT_NE(rank13, nullptr);
  EXPECT_GT(rank13->y0, timeline.findGroupRow(1, A::kComm)->y1 - 1);
  EXPECT_TRUE(expanded.has(categoryColor("collective"), xOf(27 * kMs + kMs / 2) - 1,
                           (rank13->y0 + rank13->y1) / 2 - 1, xOf(27 * kMs + kMs / 2) + 1,
                           (rank13->y0 + rank13->y1) / 2 + 1));
}

TEST_F(Screen, ATraceOpenedAsAnIndexLoadsALanesRanksWhenItIsExpanded) {
  // Forty ranks, four per host; --index-above 0 opens them as an index (whose
  // file goes to a directory of the test's own).
  trace::fixture::TempDir dir, cache;
  ::setenv("RINGX_VIEWER_CACHE_DIR", cache.path().c_str(), 1);
  for (int r = 0; r < 40; ++r) {
    trace::fixture::RankStream s(r, 40, "node" + std::to_string(r / 4));
    for (int i = 0; i < 20; ++i)
      s.span(trace::Category::kUser, "compute", "op", i * kMs, i * kMs + kMs / 2);
    s.writeTo(dir.file("rank-" + std::to_string(r) + ".ringx"));
  }
  AppOptions options;
  options.inputs = {dir.path()};
  options.indexAboveMb = 0;
  App app(options);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (app.loading() != nullptr && std::chrono::steady_clock::now() < deadline)
    lastFrame(app, 1, "index");
  ASSERT_EQ(app.loading(), nullptr);
  ASSERT_EQ(app.store().ranks().size(), 40u);
  EXPECT_FALSE(app.store().findRank(5)->eventsLoaded);
  const Image folded = lastFrame(app, 2, "index");
  const TimelinePanel& timeline = app.ui().timeline();
  using A = TimelinePanel::Aggregate;
  const auto* compute = timeline.findGroupRow(1, A::kCompute);
  ASSERT_NE(compute, nullptr);
  auto xOf = [&](int64_t t) {
    return app.view().time.toX(t, timeline.plotX0(), timeline.plotWidth());
  };
  // From the index alone, node1's compute lane is drawn (half busy: a folded shade).
  EXPECT_FALSE(Image::close(folded.at(xOf(10 * kMs + kMs / 4), compute->y1 - 4),
                            IM_COL32(30, 32, 36, 255), 8));
  app.view().expandedGroups.insert("node1");
  while ((app.loadingRanks() || !app.store().findRank(5)->eventsLoaded) &&
         std::chrono::steady_clock::now() < deadline)
    lastFrame(app, 1, "index-expanded");
  ASSERT_TRUE(app.store().findRank(5)->eventsLoaded);
  EXPECT_FALSE(app.store().findRank(8)->eventsLoaded);  // node2 stays folded and unread
  const Image expanded = lastFrame(app, 2, "index-expanded");
  const auto* row = timeline.findRow(app.store(), 5, "compute");
  ASSERT_NE(row, nullptr);
  const float x = xOf(10 * kMs + kMs / 4);
  EXPECT_TRUE(expanded.has(categoryColor("user"), x - 1, (row->y0 + row->y1) / 2 - 1, x + 1,
                           (row->y0 + row->y1) / 2 + 1));
  ::unsetenv("RINGX_VIEWER_CACHE_DIR");
}

TEST_F(Screen, SearchOptionGoesToTheMatchAndOutlinesIt) {
  AppOptions options;
  options.search = "seq=5";  // iteration 2's second bucket: [26, 28] ms on rank 0
  App app(options, sample());
  const Image image = lastFrame(app, 3, "search");
  const ViewState& view = app.view();
  ASSERT_TRUE(view.searchHit.valid());
  EXPECT_EQ(view.searchHit.rank, 0);
  EXPECT_EQ(app.ui().search().statusText(), "1 of 2 matches");
  EXPECT_NEAR(double(view.time.t0 + view.time.span() / 2), 27.0 * kMs, 1000);
  EXPECT_LE(view.time.span(), 40 * kMs);
  const TimelinePanel& timeline = app.ui().timeline();
  ASSERT_TRUE(timeline.searchHitDrawn());
  const auto* row = timeline.findRow(app.store(), 0, "comm:world");
  ASSERT_NE(row, nullptr);
  const float left = view.time.toX(26 * kMs, timeline.plotX0(), timeline.plotWidth());
  EXPECT_TRUE(
      image.has(TimelinePanel::kSearchHitColor, left - 3, row->y0 + 4, left + 1, row->y1 - 4, 10));
  // Rank 1's row (the other seq 5) is not outlined.
  const auto* other = timeline.findRow(app.store(), 1, "comm:world");
  ASSERT_NE(other, nullptr);
  EXPECT_FALSE(image.has(TimelinePanel::kSearchHitColor, timeline.plotX0(), other->y0 + 2,
                         timeline.plotX0() + timeline.plotWidth(), other->y1 - 2, 10));
}

TEST_F(Screen, DiffViewShowsBothRunsAtTheRankedRow) {
  // Run B's seq 1 takes 3 ms more; --diff-row 1 selects it (the largest regression).
  auto a = std::make_unique<TraceStore>(), b = std::make_unique<TraceStore>();
  testing::fillDiffRun(*a, 0);
  testing::fillDiffRun(*b, 1000 * kMs, /*slowerSeq1=*/3);
  AppOptions options;
  options.diffRow = 1;
  App app(options, std::move(a), std::move(b));
  ASSERT_TRUE(app.diffMode());
  const Image image = lastFrame(app, 3, "diff");
  const DiffView& diff = app.diffView();
  ASSERT_EQ(diff.selectedRow(), 0);
  const ImU32 collective = categoryColor("collective");
  // Each timeline shows its run's seq 1 in rank 1's comm row: 1 ms long in A
  // (from 20 ms), 4 ms long in B (from 1.02 s); so at 2.5 ms into it, B's row
  // is still the collective's colour and A's is not.
  struct Run {
    const TimelinePanel& timeline;
    const TraceStore& store;
    const ViewState& view;
    int64_t at;
  };
  for (const Run& run : {Run{diff.timelineA(), app.store(), app.view(), 20 * kMs},
                         Run{diff.timelineB(), app.storeB(), app.viewB(), 1020 * kMs}}) {
    const auto* row = run.timeline.findRow(run.store, 1, "comm:world");
    ASSERT_NE(row, nullptr);
    const float y = (row->y0 + row->y1) / 2;
    auto x = [&](int64_t t) {
      return run.view.time.toX(t, run.timeline.plotX0(), run.timeline.plotWidth());
    };
    EXPECT_TRUE(
        image.has(collective, x(run.at + kMs / 2) - 1, y - 1, x(run.at + kMs / 2) + 1, y + 1, 24));
    const bool slower = &run.store == &app.storeB();
    EXPECT_EQ(image.has(collective, x(run.at + 5 * kMs / 2) - 1, y - 1, x(run.at + 5 * kMs / 2) + 1,
                        y + 1, 24),
              slower);
  }
  // One scale: the same collective begins at the same x in both timelines.
  EXPECT_EQ(app.view().time.span(), app.viewB().time.span());
  // The ranked rows: the regressions' text is in the regression colour.
  EXPECT_TRUE(
      image.has(DiffView::kRegressionColor, 0, diff.rowY(0) - 6, 1600, diff.rowY(0) + 6, 40));
  EXPECT_GT(image.contentPixels(0, diff.rowY(0) - 6, 1600, diff.rowY(2) + 6), 300u);
}

TEST_F(Screen, LivePanelShowsEveryRankConnectedAndTheTimelineTheirEvents) {
  trace::testing::Job job;
  for (int r = 0; r < 2; ++r) {
    for (int i = 0; i < 20; ++i)
      job.feeds[r].span("comm:world", "allreduce", 1000000 + i * 1000000, 1500000 + i * 1000000,
                        4096);
    job.write(r);
  }
  AppOptions options;
  options.attach = job.address();
  options.panel = "live";
  options.frames = 1;
  App app(options);
  // Frames until both ranks' events have arrived (bounded: 20 s).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  bool connected = false;
  Image image;
  while (std::chrono::steady_clock::now() < deadline) {
    app.frame();
    connected = app.store().eventCount() >= 40 && app.live()->state() == LiveRankStatus::kConnected;
    if (connected) {
      app.present();
      app.frame();  // one more with everything in
      image.width = app.window().framebufferWidth();
      image.height = app.window().framebufferHeight();
      image.rgba = app.window().readPixels();
      const char* dir = std::getenv("RINGX_SCREENSHOT_DIR");
      app.window().screenshot(std::string(dir ? dir : ".") + "/screen-live.png");
    }
    app.present();
    if (connected) break;
  }
  ASSERT_TRUE(connected) << app.live()->stateText();
  // "connected" in green in the panel's table, and collectives in the timeline.
  EXPECT_TRUE(image.has(IM_COL32(120, 220, 120, 255), 0, 540, 1600, 900, 30));
  const auto* row = app.ui().timeline().findRow(app.store(), 1, "comm:world");
  ASSERT_NE(row, nullptr);
  EXPECT_TRUE(image.has(categoryColor("collective"), app.ui().timeline().plotX0(), row->y0 + 2,
                        app.ui().timeline().plotX0() + app.ui().timeline().plotWidth(),
                        row->y1 - 2));
}

TEST_F(Screen, WhatIfPanelDrawsItsTableThePathOverItsRanksAndARowsPredictedStep) {
  // A DDP job that what-if replays (whatif_store.h): its path runs over rank 1's forward,
  // backward, allreduces, last copy back and optimizer (rank 1 is the one rank 0 waits for), so
  // every stretch is drawn in rank 1's rows and none in rank 0's.
  auto store = std::make_unique<TraceStore>();
  testing::fillWhatIfStore(*store);
  AppOptions options;
  options.panel = "whatif";
  App app(options, std::move(store));
  const Image image = lastFrame(app, 3, "whatif");
  WhatIfPanel& panel = app.ui().whatIf();
  ASSERT_TRUE(panel.report().ok()) << panel.report().error;
  const int rows = int(panel.report().rows.size());
  ASSERT_GT(rows, 2);
  // The table: the recorded plan's row and one per change, with text in them.
  ASSERT_GT(panel.rowY(-1), 0.0f);
  ASSERT_GT(panel.rowY(rows - 1), panel.rowY(-1));
  EXPECT_GT(image.contentPixels(0, panel.rowY(-1) - 8, 700, panel.rowY(rows - 1) + 8), 2000u);
  // The critical path over the timeline: each stretch's outline, in its kind's colour, at its
  // left edge within the rows of the rank it names, and not within the other rank's rows.
  const TimelinePanel& timeline = app.ui().timeline();
  const std::vector<RankBand>& bands = app.view().bands;
  ASSERT_EQ(bands.size(), panel.report().baseline.path.size());
  EXPECT_EQ(timeline.bandsDrawn(), bands.size());
  auto rowsOf = [&](int32_t rank) {
    std::pair<float, float> ys{1e9f, -1e9f};
    for (const auto& row : timeline.rows())
      if (row.rank == rank) ys = {std::min(ys.first, row.y0), std::max(ys.second, row.y1)};
    return ys;
  };
  auto xOf = [&](int64_t t) {
    return app.view().time.toX(t, timeline.plotX0(), timeline.plotWidth());
  };
  std::set<int32_t> named;
  for (const RankBand& band : bands) {
    named.insert(band.rank);
    const auto [y0, y1] = rowsOf(band.rank);
    const auto [o0, o1] = rowsOf(1 - band.rank);
    const float x = std::round(xOf(band.beginNs));
    EXPECT_TRUE(image.has(band.color, x - 1, y0 + 4, x + 1, y1 - 4, 12)) << band.label;
    EXPECT_FALSE(image.has(band.color, x - 1, o0 + 4, x + 1, o1 - 4, 12)) << band.label;
  }
  EXPECT_EQ(named, (std::set<int32_t>{1}));
  // No row chosen: only the recorded plan's predicted step.
  for (const WhatIfPanel::Lane& lane : panel.lanes()) EXPECT_FALSE(lane.alternative);
  // The fastest plan chosen: its predicted step under the recorded plan's, the ring's
  // allreduces on the critical path in the path's colour.
  const int best = [&] {
    for (int i = 0; i < rows; ++i)
      if (panel.report().rows[size_t(i)].best) return i;
    return -1;
  }();
  ASSERT_GE(best, 0);
  panel.select(best);
  const Image chosen = lastFrame(app, 2, "whatif-row");
  const WhatIfRowView& row = panel.report().rows[size_t(best)];
  int checked = 0;
  for (const WhatIfPanel::Lane& lane : panel.lanes()) {
    if (!lane.alternative || lane.lane != PredictedItem::kRing) continue;
    ASSERT_LT(lane.y1, 900.0f);
    for (const PredictedItem& i : row.items) {
      if (i.lane != PredictedItem::kRing || !i.onPath) continue;
      const float x = panel.ganttX((i.beginNs + i.endNs) / 2), y = (lane.y0 + lane.y1) / 2;
      EXPECT_TRUE(chosen.has(i.color, x - 1, y - 1, x + 1, y + 1, 12)) << i.index;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace ringx::viewer
