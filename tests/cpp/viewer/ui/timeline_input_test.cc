// The timeline and the panels driven headless through ImGui input: zoom at the
// cursor, drag to pan, WASD, click to select, double click to zoom to an event,
// a ruler drag to select a range; level of detail; every panel's content.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/cpp/trace/model/sample_store.h"
#include "tests/cpp/viewer/ui/ui_harness.h"
#include "viewer/ui/keys.h"
#include "viewer/ui/style.h"
#include "viewer/ui/viewer_ui.h"

namespace ringx::viewer {
namespace {

using testing::HeadlessImGui;
using testing::kMs;

class TimelineInput : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::fillSampleStore(store);
    view.time.show(store.beginNs(), store.endNs(), 0.0);
    frame();
  }
  void draw() {
    UiActions actions;
    ui.frame(store, view, nullptr, {}, actions);
  }
  void frame() {
    gui.frame([&] { draw(); });
  }
  const TimelinePanel& timeline() const { return ui.timeline(); }
  float xOf(int64_t t) const {
    return view.time.toX(t, timeline().plotX0(), timeline().plotWidth());
  }
  // A left-button drag at height y from time `from` to time `to` (Shift held: an area).
  void drag(int64_t from, int64_t to, float y, bool shift = false) {
    ImGui::GetIO().KeyShift = shift;
    gui.mouse(xOf(from), y);
    frame();
    gui.button(true);
    frame();
    gui.mouse(xOf(to), y);
    frame();
    gui.button(false);
    frame();
    ImGui::GetIO().KeyShift = false;
  }
  // Presses and releases the left button at (x, y) (a click: no movement).
  void click(float x, float y) {
    gui.click(x, y, [&] { draw(); });
  }

  HeadlessImGui gui;
  TraceStore store;
  ViewState view;
  ViewerUi ui;
};

TEST_F(TimelineInput, RowsExistForEveryRankAndTrackInDisplayOrder) {
  const auto* compute0 = timeline().findRow(store, 0, "compute");
  const auto* comm0 = timeline().findRow(store, 0, "comm:world");
  const auto* comm1 = timeline().findRow(store, 1, "comm:world");
  ASSERT_NE(compute0, nullptr);
  ASSERT_NE(comm0, nullptr);
  ASSERT_NE(comm1, nullptr);
  EXPECT_LT(compute0->y0, comm0->y0);  // compute before communication
  EXPECT_LT(comm0->y0, comm1->y0);     // rank 0 before rank 1
  // ddp has nested spans? no: forward/backward/optimizer are disjoint: one level.
  EXPECT_EQ(timeline().findRow(store, 0, "ddp", 1), nullptr);
}

TEST_F(TimelineInput, WheelZoomsInKeepingTheTimeUnderTheCursor) {
  const float x = timeline().plotX0() + timeline().plotWidth() * 0.3f;
  const float y = timeline().findRow(store, 0, "comm:world")->y0 + 5;
  const int64_t before = view.time.toTime(x, timeline().plotX0(), timeline().plotWidth());
  const int64_t span = view.time.span();
  gui.mouse(x, y);
  gui.wheel(2);
  frame();
  EXPECT_NEAR(double(view.time.span()), span * 0.64, span * 0.01);
  const int64_t after = view.time.toTime(x, timeline().plotX0(), timeline().plotWidth());
  EXPECT_NEAR(double(after), double(before), view.time.nsPerPixel(timeline().plotWidth()) * 1.5);
  gui.wheel(-2);
  frame();
  EXPECT_NEAR(double(view.time.span()), double(span), span * 0.01);
}

TEST_F(TimelineInput, DraggingPansTimeByTheMouseMovement) {
  const float y = timeline().findRow(store, 0, "compute")->y0 + 5;
  const float x = timeline().plotX0() + 400;
  const int64_t t0 = view.time.t0;
  const double nsPerPixel = view.time.nsPerPixel(timeline().plotWidth());
  gui.mouse(x, y);
  frame();
  gui.button(true);
  frame();
  for (int i = 1; i <= 10; ++i) {
    gui.mouse(x + 20 * i, y);
    frame();
  }
  gui.button(false);
  frame();
  // Dragged 200 px right: the view moved 200 px of time left (the first pixels of
  // a drag are the click threshold).
  EXPECT_NEAR(double(t0 - view.time.t0), 200 * nsPerPixel, 25 * nsPerPixel);
  EXPECT_FALSE(view.selection.event.valid());  // a drag is not a click
}

TEST_F(TimelineInput, ClickSelectsTheEventUnderTheCursorAndDoubleClickZoomsToIt) {
  // Rank 1's second allreduce of iteration 1: ready at 10+6 ms + 0.5 ms skew, 2 ms long.
  const int64_t begin = 16 * kMs + kMs / 2, end = begin + 2 * kMs;
  const auto* row = timeline().findRow(store, 1, "comm:world");
  ASSERT_NE(row, nullptr);
  click(xOf((begin + end) / 2), (row->y0 + row->y1) / 2);
  ASSERT_TRUE(view.selection.event.valid());
  EXPECT_EQ(view.selection.event.rank, 1);
  EXPECT_EQ(store.str(view.selection.nameId), "allreduce");
  const RankData& r = *store.findRank(1);
  const Span& s = r.tracks[view.selection.event.track].levels[0][view.selection.event.index];
  EXPECT_EQ(s.begin, begin);
  // The statistics panel now shows every allreduce: 2 ranks x 4 iterations x 2 buckets.
  ASSERT_EQ(ui.stats().rows().size(), 1u);
  EXPECT_EQ(ui.stats().rows()[0].count, 16u);
  EXPECT_EQ(ui.stats().rows()[0].perRank.size(), 2u);

  // Double click: the view shows the event with a small margin.
  const float x = xOf((begin + end) / 2), y = (row->y0 + row->y1) / 2;
  gui.mouse(x, y);
  frame();
  for (int i = 0; i < 2; ++i) {
    gui.button(true);
    frame();
    gui.button(false);
    frame();
  }
  EXPECT_LE(view.time.t0, begin);
  EXPECT_GE(view.time.t1, end);
  EXPECT_LT(view.time.span(), (end - begin) * 3 / 2);
}

// Perfetto's and Tracy's keys: "." and "," step through the selected event's track, F focuses
// the selection, M marks its time as the range, "?" lists every key.
TEST_F(TimelineInput, KeysStepThroughATrackFocusMarkAndListThemselves) {
  // Rank 1's first allreduce (iteration 0, ready at 6 ms + 0.5 ms skew), then the next ones.
  const auto* row = timeline().findRow(store, 1, "comm:world");
  ASSERT_NE(row, nullptr);
  click(xOf(6 * kMs + kMs / 2 + kMs), (row->y0 + row->y1) / 2);
  ASSERT_TRUE(view.selection.event.valid());
  const RankData& r = *store.findRank(1);
  const std::vector<Span>& level = r.tracks[view.selection.event.track].levels[0];
  const int64_t first = view.selection.event.index;
  auto draw = [&] { this->draw(); };
  gui.press(kKeyPeriod, draw);
  EXPECT_EQ(view.selection.event.index, first + 1);
  gui.press(kKeyPeriod, draw);
  EXPECT_EQ(view.selection.event.index, first + 2);
  gui.press(kKeyComma, draw);
  EXPECT_EQ(view.selection.event.index, first + 1);
  const Span& s = level[size_t(first + 1)];
  // F: the view shows the selected event, with a small margin.
  gui.press('F', draw);
  EXPECT_LE(view.time.t0, s.begin);
  EXPECT_GE(view.time.t1, s.end);
  EXPECT_LT(view.time.span(), s.duration() * 3 / 2);
  // M: its time is the selected range, which the statistics panel counts.
  gui.press('M', draw);
  EXPECT_TRUE(view.selection.hasRange);
  EXPECT_EQ(view.selection.rangeBegin, s.begin);
  EXPECT_EQ(view.selection.rangeEnd, s.end);
  // Stepping past the track's last event stays on it.
  for (size_t i = 0; i < level.size() + 2; ++i) gui.press(kKeyPeriod, draw);
  EXPECT_EQ(view.selection.event.index, int64_t(level.size()) - 1);
  // "?" opens the list of every key; Esc closes it.
  EXPECT_FALSE(ui.keyHelpOpen());
  gui.type("?", draw);
  EXPECT_TRUE(ui.keyHelpOpen());
  EXPECT_GE(keyBindings().size(), 10u);
  gui.press(kKeyEscape, draw);
  EXPECT_FALSE(ui.keyHelpOpen());
}

// A selected name's durations as a histogram: choosing a bin outlines its events on the
// timeline and lists them longest first. The sample's allreduces are 1 ms (bucket 0) and 2 ms
// (bucket 1), 8 of each over both ranks.
TEST_F(TimelineInput, ABinOfTheDurationHistogramOutlinesAndListsItsEvents) {
  const auto* row = timeline().findRow(store, 1, "comm:world");
  ASSERT_NE(row, nullptr);
  click(xOf(16 * kMs + kMs / 2 + kMs), (row->y0 + row->y1) / 2);
  ASSERT_EQ(store.str(view.selection.nameId), "allreduce");
  const analysis::DurationHistogram& h = ui.stats().histogram();
  ASSERT_FALSE(h.bins.empty());
  EXPECT_EQ(h.spans, 16u);
  EXPECT_EQ(h.minNs, kMs);
  EXPECT_EQ(h.maxNs, 2 * kMs);
  int twoMs = -1;
  for (size_t i = 0; i < h.bins.size(); ++i)
    if (h.bins[i].lowNs <= 2 * kMs && 2 * kMs < h.bins[i].highNs) twoMs = int(i);
  ASSERT_GE(twoMs, 0);
  EXPECT_EQ(h.bins[size_t(twoMs)].count, 8u);
  ui.stats().chooseBin(store, view, twoMs);
  EXPECT_EQ(view.highlighted.size(), 8u);
  EXPECT_EQ(ui.stats().binEvents().size(), 8u);
  view.time.show(store.beginNs(), store.endNs(), 0.0);
  frame();
  EXPECT_EQ(timeline().highlightsDrawn(), 8u);
  ui.stats().chooseBin(store, view, twoMs);  // again: none chosen
  EXPECT_TRUE(view.highlighted.empty());
}

// The search's results list: every match, and a click (goTo) goes to one.
TEST_F(TimelineInput, TheSearchResultsListGoesToAMatch) {
  ui.search().request("allreduce");
  frame();
  frame();
  ASSERT_EQ(ui.search().search().matches().size(), 16u);
  ui.search().setListOpen(true);
  frame();
  ui.search().goTo(store, view, 5);
  const auto& m = ui.search().search().matches()[5];
  EXPECT_EQ(view.searchHit.rank, m.rank);
  EXPECT_EQ(view.searchHit.index, int64_t(m.index));
  EXPECT_EQ(ui.search().current(), 5);
  EXPECT_TRUE(ui.search().listOpen());
}

// Pinned tracks stay on top while the rest scroll under them; hidden ones and those the filter
// leaves out are not drawn; the finder finds a track and scrolls to it.
TEST_F(TimelineInput, PinHideFilterAndFindTracks) {
  view.settings.laneHeight = 60;  // taller than the panel: the rows scroll
  view.tracks.togglePin(TrackId{1, "comm:world"});
  frame();
  ASSERT_FALSE(timeline().rows().empty());
  const TimelinePanel::Row first = timeline().rows().front();
  EXPECT_TRUE(first.pinned);
  EXPECT_EQ(first.rank, 1);
  EXPECT_FLOAT_EQ(first.y0, timeline().rulerY1());
  const auto* pinned = timeline().findRow(store, 1, "comm:world");
  ASSERT_NE(pinned, nullptr);
  EXPECT_TRUE(pinned->pinned);  // one row for the track: the pinned one
  // Dragging the rows up scrolls the others, not the pinned one.
  const auto* ddp0 = timeline().findRow(store, 0, "ddp");
  ASSERT_NE(ddp0, nullptr);
  const float ddpBefore = ddp0->y0;
  gui.mouse(xOf(5 * kMs), ddp0->y0 + 4);
  frame();
  gui.button(true);
  frame();
  for (int i = 0; i < 4; ++i) {
    gui.mouse(xOf(5 * kMs), ddp0->y0 + 4 - 40.0f * float(i + 1));
    frame();
  }
  gui.button(false);
  frame();
  EXPECT_LT(timeline().findRow(store, 0, "ddp")->y0, ddpBefore - 100);  // scrolled up
  EXPECT_FLOAT_EQ(timeline().rows().front().y0, timeline().rulerY1());  // the pinned one not

  // Hidden: not drawn; the filter: only matching tracks (a regular expression).
  view.tracks.hidden.insert(TrackId{0, "ddp"});
  frame();
  EXPECT_EQ(timeline().findRow(store, 0, "ddp"), nullptr);
  view.tracks.filter = "bucket[01]$";
  frame();
  for (const auto& row : timeline().rows()) {
    if (row.track < 0 || row.pinned) continue;
    const std::string name(store.str(store.findRank(row.rank)->tracks[size_t(row.track)].name));
    EXPECT_TRUE(name == "ddp:bucket0" || name == "ddp:bucket1") << name;
  }
  EXPECT_NE(timeline().findRow(store, 0, "ddp:bucket1"), nullptr);
  view.tracks.filter = "[";  // not a regular expression: a substring
  frame();
  EXPECT_EQ(timeline().findRow(store, 0, "ddp:bucket1"), nullptr);
  view.tracks.filter.clear();
  view.tracks.hidden.clear();
  view.tracks.togglePin(TrackId{1, "comm:world"});
  frame();
  EXPECT_FALSE(timeline().rows().front().pinned);

  // The finder: tracks and ranks by name; the chosen one is scrolled into view.
  const auto matches = ViewerUi::finderMatches(store, "COMM", 10);
  ASSERT_EQ(matches.size(), 2u);
  EXPECT_EQ(matches[0].first, "rank 0: comm:world");
  EXPECT_EQ(matches[1].second, (TrackId{1, "comm:world"}));
  view.revealTrack = TrackId{1, "ddp:bucket1"};
  frame();
  const auto* bucket = timeline().findRow(store, 1, "ddp:bucket1");
  ASSERT_NE(bucket, nullptr);
  EXPECT_GE(bucket->y0, timeline().rulerY1());
  EXPECT_LE(bucket->y1, timeline().rowsY1());
}

// Ranks in the order they were moved to (the rank header's menu): rank 1 to the top puts its
// header and tracks above rank 0's; "down" puts it back; a rank the store lacks is ignored.
TEST_F(TimelineInput, RanksGoWhereTheyAreMoved) {
  auto headers = [&] {
    std::vector<int32_t> out;
    for (const auto& row : timeline().rows())
      if (row.track < 0 && row.aggregate == TimelinePanel::Aggregate::kNone)
        out.push_back(row.rank);
    return out;
  };
  frame();
  EXPECT_EQ(headers(), (std::vector<int32_t>{0, 1}));
  view.tracks.moveRank(1, TrackArrangement::kToTop, store.rankNumbers());
  frame();
  EXPECT_EQ(headers(), (std::vector<int32_t>{1, 0}));
  EXPECT_LT(timeline().findRow(store, 1, "ddp")->y0, timeline().findRow(store, 0, "ddp")->y0);
  view.tracks.moveRank(1, +1, store.rankNumbers());
  frame();
  EXPECT_EQ(headers(), (std::vector<int32_t>{0, 1}));
  view.tracks.moveRank(1, +5, store.rankNumbers());  // already last: stays
  view.tracks.moveRank(7, -1, store.rankNumbers());  // no rank 7: nothing moves
  frame();
  EXPECT_EQ(headers(), (std::vector<int32_t>{0, 1}));
  // Ordered ranks a trace lacks for now keep their place for when they load.
  TrackArrangement a;
  a.moveRank(5, TrackArrangement::kToTop, {1, 3, 5});
  EXPECT_EQ(a.arranged({1, 3}), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(a.arranged({1, 3, 5, 9}), (std::vector<int32_t>{5, 1, 3, 9}));
}

TEST_F(TimelineInput, ClickingEmptySpaceClearsTheSelection) {
  const auto* row = timeline().findRow(store, 0, "comm:world");
  click(xOf(16 * kMs + kMs), (row->y0 + row->y1) / 2);
  ASSERT_TRUE(view.selection.event.valid());
  click(xOf(1 * kMs), (row->y0 + row->y1) / 2);  // no collective at 1 ms
  EXPECT_FALSE(view.selection.event.valid());
}

TEST_F(TimelineInput, WKeyZoomsInAndDKeyPansRight) {
  const int64_t span = view.time.span(), t0 = view.time.t0;
  gui.mouse(10, 10);  // away from the plot: zoom around the centre
  gui.key('W', true);
  for (int i = 0; i < 6; ++i) frame();
  gui.key('W', false);
  frame();
  EXPECT_LT(view.time.span(), span * 0.75);
  const int64_t zoomedT0 = view.time.t0;
  EXPECT_GT(zoomedT0, t0);
  gui.key('D', true);
  frame();
  gui.key('D', false);
  frame();
  EXPECT_GT(view.time.t0, zoomedT0);
}

TEST_F(TimelineInput, DraggingOnTheRulerSelectsARangeAndItsStatistics) {
  drag(10 * kMs, 20 * kMs, (timeline().rulerY0() + timeline().rulerY1()) / 2);
  ASSERT_TRUE(view.selection.hasRange);
  const double px = view.time.nsPerPixel(timeline().plotWidth());
  EXPECT_NEAR(double(view.selection.rangeBegin), 10.0 * kMs, 2 * px);
  EXPECT_NEAR(double(view.selection.rangeEnd), 20.0 * kMs, 2 * px);
  frame();
  // Every span name of the range, most total time first.
  ASSERT_FALSE(ui.stats().areaRows().empty());
  bool sawAllreduce = false;
  for (const auto& s : ui.stats().areaRows()) sawAllreduce |= s.key == "allreduce";
  EXPECT_TRUE(sawAllreduce);
  for (size_t i = 1; i < ui.stats().areaRows().size(); ++i)
    EXPECT_GE(ui.stats().areaRows()[i - 1].totalNs, ui.stats().areaRows()[i].totalNs);
}

// Shift+drag over rows selects an area: those rows' tracks over the dragged time. Rank 1's
// comm:world row from 10 to 20 ms holds its two allreduces of iteration 1 (1 and 2 ms). A
// Shift+click on rank 0's header adds all of rank 0's tracks; a second takes them away. The
// panel groups the area by rank, and copies it as CSV.
TEST_F(TimelineInput, ShiftDragSelectsAnAreaAndItsStatisticsGroupAndCopy) {
  const auto* comm1 = timeline().findRow(store, 1, "comm:world");
  ASSERT_NE(comm1, nullptr);
  drag(10 * kMs, 20 * kMs, (comm1->y0 + comm1->y1) / 2, /*shift=*/true);
  frame();
  const RankData& r1 = *store.findRank(1);
  ASSERT_EQ(view.selection.areaTracks.size(), 1u);
  EXPECT_EQ(view.selection.areaTracks[0].first, 1);
  EXPECT_EQ(store.str(r1.tracks[view.selection.areaTracks[0].second].name), "comm:world");
  ASSERT_EQ(ui.stats().areaRows().size(), 1u);
  EXPECT_EQ(ui.stats().areaRows()[0].key, "allreduce");
  EXPECT_EQ(ui.stats().areaRows()[0].count, 2u);
  EXPECT_EQ(ui.stats().areaRows()[0].totalNs, 3 * kMs);
  EXPECT_EQ(ui.stats().areaRows()[0].selfNs, 3 * kMs);  // nothing nested in them

  // Rank 0's header, Shift+clicked: all its tracks join the area, and leave it again.
  const TimelinePanel::Row* header = nullptr;
  for (const auto& row : timeline().rows())
    if (row.rank == 0 && row.track < 0) header = &row;
  ASSERT_NE(header, nullptr);
  const float hy = (header->y0 + header->y1) / 2;
  ImGui::GetIO().KeyShift = true;
  click(timeline().plotX0() / 2, hy);
  ImGui::GetIO().KeyShift = false;
  EXPECT_EQ(view.selection.areaTracks.size(), 1 + store.findRank(0)->tracks.size());
  ui.stats().setGroupBy(analysis::AreaGroupBy::kRank);
  frame();
  ASSERT_EQ(ui.stats().areaRows().size(), 2u);
  const std::string csv = ui.stats().areaText(Delimiter::kCsv);
  EXPECT_EQ(csv.rfind("rank,count,failed,total_ns,self_ns,", 0), 0u) << csv;
  EXPECT_NE(csv.find("\nrank 1,2,0,3000000,3000000,"), std::string::npos) << csv;
  ImGui::GetIO().KeyShift = true;
  click(timeline().plotX0() / 2, hy);
  ImGui::GetIO().KeyShift = false;
  EXPECT_EQ(view.selection.areaTracks.size(), 1u);
}

TEST_F(TimelineInput, AKnownEventIsDrawnInItsCategoryColourInsideItsRow) {
  const auto* row = timeline().findRow(store, 0, "comm:world");
  const int64_t begin = 5 * kMs, end = 6 * kMs;  // iteration 0, bucket 0's allreduce
  EXPECT_TRUE(HeadlessImGui::colorAt(categoryColor("collective"), xOf((begin + end) / 2),
                                     (row->y0 + row->y1) / 2));
  // ... and nothing of that colour where the row has no event.
  EXPECT_FALSE(
      HeadlessImGui::colorAt(categoryColor("collective"), xOf(2 * kMs), (row->y0 + row->y1) / 2));
}

TEST_F(TimelineInput, AFlowIsAnArrowFromItsStartRowToItsEndRow) {
  Flow flow;
  flow.from = FlowEnd{0, store.strings().intern("comm:world"), 5 * kMs};
  flow.to = FlowEnd{1, store.strings().intern("ddp"), 8 * kMs};
  flow.name = store.strings().intern("launch");
  store.addFlow(flow);
  store.finalize();
  view.settings.allFlows = true;
  frame();
  EXPECT_EQ(timeline().flowsDrawn(), 1u);
  const auto* from = timeline().findRow(store, 0, "comm:world");
  const auto* to = timeline().findRow(store, 1, "ddp");
  ASSERT_TRUE(from != nullptr && to != nullptr);
  // The head sits just before the end, on the end's row; the start has none.
  const float yTo = (to->y0 + to->y1) / 2, yFrom = (from->y0 + from->y1) / 2;
  const float dx = xOf(8 * kMs) - xOf(5 * kMs), dy = yTo - yFrom;
  const float length = std::sqrt(dx * dx + dy * dy);
  EXPECT_TRUE(HeadlessImGui::colorAt(TimelinePanel::kFlowColor, xOf(8 * kMs) - 3 * dx / length,
                                     yTo - 3 * dy / length));
  EXPECT_FALSE(HeadlessImGui::colorAt(TimelinePanel::kFlowColor, xOf(5 * kMs) - 20, yFrom));
  // Out of view, nothing is drawn.
  view.time.show(20 * kMs, 30 * kMs, 0.0);
  frame();
  EXPECT_EQ(timeline().flowsDrawn(), 0u);
}

// By default only the focus's arrows are drawn: those with an end on the selected (or hovered)
// event, and the rest of their chain through shared ends; "All arrows" draws every one.
TEST_F(TimelineInput, ArrowsAreDrawnForTheSelectedEventsChainUnlessAllAreAsked) {
  const uint32_t comm = store.strings().intern("comm:world"), ddp = store.strings().intern("ddp");
  const uint32_t name = store.strings().intern("allreduce");
  store.addFlow(Flow{FlowEnd{0, comm, 5 * kMs}, FlowEnd{1, ddp, 8 * kMs}, name});
  store.addFlow(Flow{FlowEnd{1, ddp, 8 * kMs}, FlowEnd{0, ddp, 9 * kMs}, name});  // its chain
  store.addFlow(Flow{FlowEnd{1, comm, 15 * kMs}, FlowEnd{0, comm, 16 * kMs}, name});
  store.finalize();
  frame();
  EXPECT_EQ(timeline().flowsDrawn(), 0u);  // nothing hovered or selected
  // Select rank 0's allreduce at 5 ms.
  const RankData& rank0 = *store.findRank(0);
  const int track = rank0.findTrack(comm);
  ASSERT_GE(track, 0);
  const auto& level = rank0.tracks[size_t(track)].levels[0];
  int64_t index = -1;
  for (size_t i = 0; i < level.size(); ++i)
    if (level[i].begin <= 5 * kMs && level[i].end >= 5 * kMs) index = int64_t(i);
  ASSERT_GE(index, 0);
  view.selection.event = EventRef{0, track, 0, index};
  frame();
  EXPECT_EQ(timeline().flowsDrawn(), 2u);
  view.settings.allFlows = true;
  frame();
  EXPECT_EQ(timeline().flowsDrawn(), 3u);
}

TEST(TimelineLevelOfDetail, AMillionNarrowEventsDrawAsFewFoldedBlocks) {
  HeadlessImGui gui;
  TraceStore store;
  RankData& r = store.rank(0);
  const uint32_t track = store.track(r, "comm:world");
  const uint8_t cat = store.category("collective");
  for (int i = 0; i < 1000000; ++i) {
    Span s;
    s.begin = int64_t(i) * 1000;
    s.end = s.begin + 600;
    s.category = cat;
    store.addSpan(r, track, s);
  }
  store.finalize();
  ViewState view;
  view.time.show(store.beginNs(), store.endNs(), 0);
  ViewerUi ui;
  gui.frame([&] {
    UiActions a;
    ui.frame(store, view, nullptr, {}, a);
  });
  EXPECT_LT(ui.timeline().itemsDrawn(), 1000u);  // folded, not a million rectangles
  // Zoomed in to 100 events: each is its own rectangle.
  view.time.t0 = 500000 * int64_t(1000);
  view.time.t1 = view.time.t0 + 100 * 1000 - 1;
  gui.frame([&] {
    UiActions a;
    ui.frame(store, view, nullptr, {}, a);
  });
  EXPECT_GE(ui.timeline().itemsDrawn(), 100u);
  EXPECT_LE(ui.timeline().itemsDrawn(), 102u);
}

TEST_F(TimelineInput, EveryPanelShowsItsContent) {
  for (PanelId id : kAllPanels) {
    view.panel = id;
    view.panelRequested = true;
    for (int i = 0; i < 3; ++i) frame();
    EXPECT_EQ(view.panel, id) << panelName(id);
  }
  // Collectives: 8 matched across 2 ranks, none missing; rank 1 arrives last.
  ASSERT_EQ(ui.collectives().rows().size(), 8u);
  for (const auto& row : ui.collectives().rows()) {
    EXPECT_EQ(row.ranks.size(), 2u);
    EXPECT_EQ(row.lastArrivalRank, 1);
    EXPECT_EQ(row.arrivalSkewNs, kMs / 2);
  }
  EXPECT_EQ(ui.ddp().analysis().iterations.size(), 8u);  // 2 ranks x 4
  EXPECT_EQ(ui.ddp().analysis().buckets.size(), 2u);
  ASSERT_EQ(ui.fsdp().analysis().units.size(), 1u);
  EXPECT_EQ(ui.fsdp().analysis().units[0].unit, "layers.0");
  // Memory: one chart per rank and counter; the bucket-bytes peak (8 MiB in
  // iteration 2) is marked at its time.
  ASSERT_EQ(ui.memory().charts().size(), 4u);
  for (const auto& c : ui.memory().charts()) {
    if (store.str(c.counter) != "ddp.bucket_bytes") continue;
    const int64_t peakAt = 2 * 10 * kMs + c.rank * kMs / 2 + 6 * kMs;
    EXPECT_NEAR(c.peakX, view.time.toX(peakAt, c.x0, c.x1 - c.x0), 1.0);
  }
}

TEST_F(TimelineInput, CollectivesSortAndAClickJumpsTheTimeline) {
  view.panel = PanelId::kCollectives;
  view.panelRequested = true;
  for (int i = 0; i < 3; ++i) frame();
  ui.collectives().sortBy(CollectivesPanel::Column::kSeq, false);
  const auto& order = ui.collectives().order();
  ASSERT_EQ(order.size(), 8u);
  EXPECT_GT(ui.collectives().rows()[order.front()].seq, ui.collectives().rows()[order.back()].seq);
}

}  // namespace
}  // namespace ringx::viewer

namespace ringx::viewer {
namespace {

// Forty ranks on five hosts: above ViewerSettings::aggregateAboveRanks, so one
// lane per host, which a click on its header expands into its ranks and folds.
TEST(AggregateLanesInput, AClickOnALanesHeaderShowsItsRanksAndASecondHidesThem) {
  HeadlessImGui gui;
  TraceStore store;
  testing::fillHostsStore(store, 5, 8, 13);
  ViewState view;
  view.time.show(store.beginNs(), store.endNs(), 0.0);
  ViewerUi ui;
  auto draw = [&] {
    UiActions actions;
    ui.frame(store, view, nullptr, {}, actions);
  };
  gui.frame(draw);
  const TimelinePanel& timeline = ui.timeline();
  ASSERT_NE(timeline.aggregates(), nullptr);
  using A = TimelinePanel::Aggregate;
  const auto* header = timeline.findGroupRow(1, A::kHeader);
  ASSERT_NE(header, nullptr);
  ASSERT_NE(timeline.findGroupRow(1, A::kComm), nullptr);
  EXPECT_EQ(timeline.findRow(store, 8, "compute"), nullptr);  // folded
  gui.click(timeline.plotX0() + 100, (header->y0 + header->y1) / 2, draw);
  gui.frame(draw);
  EXPECT_EQ(view.expandedGroups.count("host1"), 1u);
  for (int32_t rank = 8; rank < 16; ++rank)
    EXPECT_NE(timeline.findRow(store, rank, "comm:world"), nullptr) << rank;
  EXPECT_EQ(timeline.findRow(store, 16, "comm:world"), nullptr);  // host2 stays folded
  // Host1's ranks sit between its lane and host2's.
  EXPECT_LT(timeline.findGroupRow(1, A::kComm)->y0, timeline.findRow(store, 8, "compute")->y0);
  EXPECT_LT(timeline.findRow(store, 15, "comm:world")->y0,
            timeline.findGroupRow(2, A::kHeader)->y0);
  header = timeline.findGroupRow(1, A::kHeader);
  gui.click(timeline.plotX0() + 100, (header->y0 + header->y1) / 2, draw);
  gui.frame(draw);
  EXPECT_TRUE(view.expandedGroups.empty());
  EXPECT_EQ(timeline.findRow(store, 8, "compute"), nullptr);
}

}  // namespace
}  // namespace ringx::viewer
