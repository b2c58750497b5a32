// The timeline: every rank's tracks on one aligned time axis.
//
// One group per rank (a header row, then its tracks; a track is as many rows as
// it has nesting levels), a time ruler on top. Drawing walks only what is
// visible: rows outside the scrolled region are skipped, and within a row
// visitLevel() folds runs of spans narrower than a few pixels into one "N
// events" block (Tracy's approach), so a frame costs O(pixels), not O(events).
// A block is shaded by how much of its time its spans cover (the store keeps
// busy-time prefix sums per level, so that is O(1) per block): a dense burst
// looks nearly solid, a sparse run faint. Collectives are joined across ranks
// by flow arrows (from the first rank to arrive to the last), the search box's
// match is outlined in its own colour, and ViewState::bands (the What-if
// panel's critical path) are tinted bands over their ranks' rows.
//
// Input (like Tracy and Perfetto; every binding is in keys.h): the mouse wheel zooms at the
// cursor, a left drag pans time and scrolls the rows, W/S zoom and A/D pan, a click selects the
// event under the cursor, a double click zooms to it, a drag on the ruler selects a time range,
// "." and "," step through the selected event's track, F focuses the selection and M marks the
// selected event's time as the range; Shift+drag over the rows selects an area (those rows'
// tracks over the dragged time) and Shift+click on a rank's header adds or removes its tracks.
// Hovering shows every argument plus derived values (duration, bus bandwidth, queue wait).
#pragma once

#include <imgui.h>

#include <cstdint>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "trace/model/trace_store.h"
#include "viewer/ui/view_state.h"

namespace ringx::viewer {
// The viewer draws the trace model (trace/model/); its names are used unqualified here.
using namespace ringx::model;

class TimelinePanel {
 public:
  // What an aggregate lane's row shows (kNone: a rank's row).
  enum class Aggregate : uint8_t { kNone, kHeader, kCompute, kComm };
  // One drawn row (screen coordinates of the last frame): a level of a track,
  // or a row of an aggregate lane (rank -1, group set).
  struct Row {
    int32_t rank = 0;    // RankData::rank
    int32_t track = -1;  // index in RankData::tracks; -1: the rank's header row
    int32_t level = 0;
    float y0 = 0, y1 = 0;
    int32_t group = -1;  // AggregateLanes::groups() index
    Aggregate aggregate = Aggregate::kNone;
    bool pinned = false;  // on top, not scrolled (ViewState::tracks)
  };
  // Straggler marks on an aggregate lane's comm row.
  static constexpr ImU32 kStragglerColor = IM_COL32(255, 82, 82, 255);

  // Flow arrows (a profiler's launch links, a trace's "s"/"f" events): light,
  // so that the spans under them stay readable.
  static constexpr ImU32 kFlowColor = IM_COL32(130, 210, 255, 255);
  // A folded block's colour goes from kFoldedMinShade (no span time in it) to
  // kFoldedMaxShade (spans cover all of it) of the way from the background to
  // its category's colour; a single event is drawn at full colour.
  static constexpr float kFoldedMinShade = 0.18f;
  static constexpr float kFoldedMaxShade = 0.9f;
  // The search match's outline: a colour no category uses.
  static constexpr ImU32 kSearchHitColor = IM_COL32(255, 64, 200, 255);

  // Draws into the current window, filling its remaining content region.
  void draw(const TraceStore& store, ViewState& view);

  // Layout and counters of the last frame, for tests, screenshots and --print-stats.
  const std::vector<Row>& rows() const { return rows_; }
  // The row showing `level` of the track named `track` on `rank`, or nullptr.
  const Row* findRow(const TraceStore& store, int32_t rank, std::string_view track,
                     int level = 0) const;
  // The row of aggregate lane `group` showing `what`, or nullptr.
  const Row* findGroupRow(int32_t group, Aggregate what) const;
  // The lanes drawn in the last frame (null: ranks drawn one by one).
  const AggregateLanes* aggregates() const { return lanes_; }
  float plotX0() const { return plotX0_; }
  float plotWidth() const { return plotWidth_; }
  float rulerY0() const { return rulerY0_; }
  float rulerY1() const { return rulerY1_; }
  float rowsY1() const { return rowsY1_; }             // the bottom of the rows' band
  uint64_t itemsDrawn() const { return itemsDrawn_; }  // rectangles of the last frame
  uint64_t flowsDrawn() const { return flowsDrawn_; }  // flow arrows of the last frame
  const EventRef& hovered() const { return hovered_; }
  // Where the search match's outline was drawn in the last frame (its middle).
  bool searchHitDrawn() const { return searchHitDrawn_; }
  float searchHitX() const { return searchHitX_; }
  float searchHitY() const { return searchHitY_; }
  // ViewState::bands drawn in the last frame (on screen, over a rank's rows or its lane).
  size_t bandsDrawn() const { return bandsDrawn_; }
  // ViewState::highlighted outlined in the last frame (those in view).
  size_t highlightsDrawn() const { return highlightsDrawn_; }
  static constexpr ImU32 kHighlightColor = IM_COL32(255, 236, 64, 255);
  // A band's tint: its colour at this alpha, under its solid outline.
  static constexpr int kBandFillAlpha = 48;

 private:
  struct Hover {
    EventRef event;
    LevelItem item;  // the drawn item (count > 1: a folded block)
    bool folded = false;
  };

  void drawRuler(const TraceStore& store, ViewState& view, ImDrawList* draw, ImVec2 origin,
                 float width);
  void drawRows(const TraceStore& store, ViewState& view);
  void drawRow(const TraceStore& store, const Row& row, ViewState& view, ImDrawList* draw,
               int& stripe);
  // Right-click on a track's label: pin, hide, move (ViewState::tracks).
  void trackMenu(const TraceStore& store, ViewState& view);
  void rankMenu(const TraceStore& store, ViewState& view);
  void drawLevel(const TraceStore& store, const RankData& rank, int32_t trackIndex, int level,
                 ViewState& view, ImDrawList* draw, float y0, float y1);
  void drawAggregateRow(const TraceStore& store, const Row& row, ViewState& view, ImDrawList* draw);
  const AggregateLanes* lanesFor(const TraceStore& store, const ViewState& view);
  void drawInstants(const TraceStore& store, const RankData& rank, int32_t trackIndex,
                    ViewState& view, ImDrawList* draw, float y0, float y1);
  void drawFlows(const TraceStore& store, ViewState& view, ImDrawList* draw);
  // Of `flows`, those of the hovered or selected event and their chains (drawFlows).
  std::vector<const Flow*> focusFlows(const TraceStore& store, const ViewState& view,
                                      const std::vector<const Flow*>& flows) const;
  void drawSearchHit(const TraceStore& store, const ViewState& view, ImDrawList* draw);
  void drawBands(const ViewState& view, ImDrawList* draw);
  void handleInput(const TraceStore& store, ViewState& view);
  // ".", ",", F, M (keys.h).
  void keyboardMoves(const TraceStore& store, ViewState& view);
  // Shift+drag over the rows, Shift+click on a rank's header: the area (Selection::areaTracks).
  bool areaInput(const TraceStore& store, ViewState& view);
  // The tracks of the rows between two heights (a rank's header row: all of its tracks).
  std::vector<std::pair<int32_t, uint32_t>> tracksBetween(const TraceStore& store, float y0,
                                                          float y1) const;
  void drawArea(const ViewState& view, ImDrawList* draw);
  void drawHighlighted(const TraceStore& store, const ViewState& view, ImDrawList* draw);
  void tooltip(const TraceStore& store) const;
  void aggregateTooltip(const TraceStore& store) const;

  std::vector<Row> rows_;
  const AggregateLanes* lanes_ = nullptr;
  // Lanes the panel built itself (a live job's store, a store built in a test).
  std::shared_ptr<const AggregateLanes> ownLanes_;
  double ownLanesBuiltAt_ = -1e9;  // ImGui time of the last build
  std::vector<float> shares_;      // one frame's busy shares of one row
  // The aggregate row under the mouse: its tooltip.
  const Row* hoveredAggregate_ = nullptr;
  int32_t hoveredMark_ = -1;  // index in the group's marks, or -1
  float hoveredShare_ = 0;
  float plotX0_ = 0, plotWidth_ = 1;
  float rulerY0_ = 0, rulerY1_ = 0;
  float rowsY0_ = 0, rowsY1_ = 0;
  uint64_t itemsDrawn_ = 0;
  uint64_t flowsDrawn_ = 0;
  EventRef hovered_;
  Hover hover_;
  bool searchHitDrawn_ = false;
  float searchHitX_ = 0, searchHitY_ = 0;
  size_t bandsDrawn_ = 0;
  size_t highlightsDrawn_ = 0;
  bool rowsHovered_ = false;
  bool rulerHovered_ = false;
  // Drag state: panning (from the rows) or selecting a range (from the ruler).
  bool panning_ = false;
  bool rangeDragging_ = false;
  bool areaDragging_ = false;  // Shift+drag over the rows
  float areaAnchorY_ = 0;
  bool rowsBandHovered_ = false;  // over the rows, the label column included
  float dragDistance_ = 0;
  int64_t rangeAnchor_ = 0;
  float scrollY_ = 0;
  float contentHeight_ = 0;
  float pinnedHeight_ = 0;  // the pinned rows' band at the top
  std::string filterText_;  // ViewState::tracks.filter, compiled
  std::regex filter_;
  bool filterIsRegex_ = false;
  TrackId menuTrack_{-1, ""};  // the track the context menu is for
};

}  // namespace ringx::viewer
