// The timeline panel (see timeline_panel.h).
//
// Rows are laid out every frame from the store (cheap: one entry per track
// level), then only rows inside the visible band are drawn. Vertical scrolling is
// our own offset rather than an ImGui child window's, because the mouse wheel
// belongs to zooming.
#include "viewer/ui/timeline_panel.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>
#include <regex>
#include <tuple>
#include <unordered_map>

#include "analysis/figures.h"
#include "base/error.h"
#include "base/text.h"
#include "viewer/ui/keys.h"
#include "viewer/ui/style.h"

namespace ringx::viewer {
namespace {

constexpr float kRulerHeight = 26.0f;
constexpr ImU32 kBackground = IM_COL32(30, 32, 36, 255);
constexpr ImU32 kRowStripe = IM_COL32(38, 41, 46, 255);
constexpr ImU32 kRankHeader = IM_COL32(52, 56, 64, 255);
constexpr ImU32 kTextColor = IM_COL32(220, 220, 220, 255);
constexpr ImU32 kSelectedOutline = IM_COL32(255, 235, 59, 255);
constexpr ImU32 kRangeFill = IM_COL32(255, 255, 255, 28);
// An area's rows over its range: a warmer tint than the range's, and an outline.
constexpr ImU32 kAreaFill = IM_COL32(255, 210, 90, 40);
// Pinned tracks: their labels, and the line under them over which the rest scroll.
constexpr ImU32 kPinnedLabel = IM_COL32(255, 220, 120, 255);
constexpr ImU32 kPinnedSeparator = IM_COL32(255, 220, 120, 140);
constexpr ImU32 kAreaOutline = IM_COL32(255, 210, 90, 160);
constexpr ImU32 kCursorLine = IM_COL32(255, 255, 255, 110);
constexpr size_t kMaxFlowsPerFrame = 20000;

// `color` mixed with the timeline's background: t = 1 is `color`, 0 the background.
ImU32 towardsBackground(ImU32 color, float t) {
  const auto ch = [&](int shift) {
    const float a = float((kBackground >> shift) & 0xff), b = float((color >> shift) & 0xff);
    return ImU32(a + (b - a) * t + 0.5f) << shift;
  };
  return ch(IM_COL32_R_SHIFT) | ch(IM_COL32_G_SHIFT) | ch(IM_COL32_B_SHIFT) | IM_COL32_A_MASK;
}

// A "nice" tick step (1, 2 or 5 x 10^k ns) giving at least minPixels between ticks.
int64_t tickStep(double nsPerPixel, float minPixels) {
  const double want = nsPerPixel * minPixels;
  double step = 1;
  while (step < want) {
    if (step * 2 >= want) return int64_t(step * 2);
    if (step * 5 >= want) return int64_t(step * 5);
    step *= 10;
  }
  return std::max<int64_t>(int64_t(step), 1);
}

// Text clipped to [x0, x1] (nothing when it cannot show a few characters).
void clippedText(ImDrawList* draw, float x0, float x1, float y, ImU32 color, const char* text) {
  if (x1 - x0 < 12) return;
  const ImVec4 clip(x0, y - 2, x1, y + ImGui::GetFontSize() + 2);
  draw->AddText(ImGui::GetFont(), ImGui::GetFontSize(), ImVec2(x0, y), color, text, nullptr, 0,
                &clip);
}

std::string rankLabel(const RankData& rank) {
  std::string label = "rank " + std::to_string(rank.rank);
  if (!rank.host.empty()) label += " (" + rank.host + ")";
  if (!rank.eventsLoaded) label += "  [loading]";
  if (rank.truncated) label += "  [cut off]";
  if (!rank.clockAligned) label += "  [clock not aligned]";
  if (rank.dropped) label += "  [" + std::to_string(rank.dropped) + " dropped]";
  return label;
}

}  // namespace

const TimelinePanel::Row* TimelinePanel::findRow(const TraceStore& store, int32_t rank,
                                                 std::string_view track, int level) const {
  const RankData* r = store.findRank(rank);
  if (!r) return nullptr;
  const int t = r->findTrack(store.strings().find(track));
  for (const Row& row : rows_)
    if (row.rank == rank && row.track == t && row.level == level) return &row;
  return nullptr;
}

void TimelinePanel::draw(const TraceStore& store, ViewState& view) {
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float width = std::max(avail.x, 50.0f);
  const float height = std::max(avail.y, 50.0f);
  plotX0_ = origin.x + view.settings.labelWidth;
  plotWidth_ = std::max(width - view.settings.labelWidth, 10.0f);
  rulerY0_ = origin.y;
  rulerY1_ = origin.y + kRulerHeight;
  rowsY0_ = rulerY1_;
  rowsY1_ = origin.y + height;
  itemsDrawn_ = 0;

  // One invisible button over the whole panel takes the mouse, so that dragging
  // here does not move the window.
  ImGui::InvisibleButton("##timeline", ImVec2(width, height),
                         ImGuiButtonFlags_MouseButtonLeft | ImGuiButtonFlags_MouseButtonRight);
  const bool hovered = ImGui::IsItemHovered();
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  rulerHovered_ = hovered && mouse.y < rulerY1_ && mouse.x >= plotX0_;
  rowsHovered_ = hovered && mouse.y >= rowsY0_ && mouse.x >= plotX0_;
  rowsBandHovered_ = hovered && mouse.y >= rowsY0_;
  if (hovered && mouse.x >= plotX0_) {
    view.hasCursor = true;
    view.cursorTime = view.time.toTime(mouse.x, plotX0_, plotWidth_);
  }

  ImDrawList* draw = ImGui::GetWindowDrawList();
  draw->AddRectFilled(origin, ImVec2(origin.x + width, origin.y + height), kBackground);
  drawRows(store, view);
  drawRuler(store, view, draw, origin, width);
  handleInput(store, view);
  if (hovered_.valid() && !panning_) tooltip(store);
  if (hoveredAggregate_ && !panning_) aggregateTooltip(store);
}

void TimelinePanel::drawRuler(const TraceStore& store, ViewState& view, ImDrawList* draw,
                              ImVec2 origin, float width) {
  draw->AddRectFilled(origin, ImVec2(origin.x + width, rulerY1_), kRankHeader);
  const double nsPerPixel = view.time.nsPerPixel(plotWidth_);
  const int64_t step = tickStep(nsPerPixel, 90);
  const int64_t base = store.beginNs();  // labels count from the trace's first event
  int64_t first = view.time.t0 - base;
  first = (first >= 0 ? first / step : (first - step + 1) / step) * step;
  draw->PushClipRect(ImVec2(plotX0_, rulerY0_), ImVec2(plotX0_ + plotWidth_, rowsY1_), true);
  for (int64_t t = first + base; t <= view.time.t1; t += step) {
    const float x = view.time.toX(t, plotX0_, plotWidth_);
    draw->AddLine(ImVec2(x, rulerY1_ - 8), ImVec2(x, rulerY1_), kTextColor);
    draw->AddLine(ImVec2(x, rulerY1_), ImVec2(x, rowsY1_), IM_COL32(255, 255, 255, 18));
    const std::string label = formatNs(t - base);
    draw->AddText(ImVec2(x + 3, rulerY0_ + 3), kTextColor, label.c_str());
  }
  if (view.selection.hasRange) {
    const float a = view.time.toX(view.selection.rangeBegin, plotX0_, plotWidth_);
    const float b = view.time.toX(view.selection.rangeEnd, plotX0_, plotWidth_);
    draw->AddRectFilled(ImVec2(a, rulerY0_), ImVec2(b, rowsY1_), kRangeFill);
    const std::string label = formatNs(view.selection.rangeEnd - view.selection.rangeBegin);
    draw->AddText(ImVec2(std::max(a, plotX0_) + 3, rulerY1_ + 2), kSelectedOutline, label.c_str());
  }
  if (view.hasCursor) {
    const float x = view.time.toX(view.cursorTime, plotX0_, plotWidth_);
    draw->AddLine(ImVec2(x, rulerY0_), ImVec2(x, rowsY1_), kCursorLine);
  }
  draw->PopClipRect();
  char span[64];
  std::snprintf(span, sizeof span, "view %s", formatNs(view.time.span()).c_str());
  draw->AddText(ImVec2(origin.x + 4, rulerY0_ + 3), kTextColor, span);
}

void TimelinePanel::drawRows(const TraceStore& store, ViewState& view) {
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const ViewerSettings& s = view.settings;
  rows_.clear();
  hovered_ = EventRef{};
  hover_ = Hover{};
  hoveredAggregate_ = nullptr;
  hoveredMark_ = -1;
  lanes_ = lanesFor(store, view);
  // The search match's rank comes out of its collapsed lane.
  if (lanes_ && view.revealSearchHit && view.searchHit.valid()) {
    const int g = lanes_->groupOf(view.searchHit.rank);
    if (g >= 0) view.expandedGroups.insert(lanes_->groups()[size_t(g)].label);
  }
  // Lay out every row; the scroll offset shifts them. Pinned tracks first, on top and not
  // scrolled; then every rank with its tracks that are neither pinned, hidden nor filtered out.
  const TrackArrangement& arrangement = view.tracks;
  if (arrangement.filter != filterText_) {
    filterText_ = arrangement.filter;
    filterIsRegex_ = false;
    try {
      filter_ = std::regex(filterText_, std::regex::icase | std::regex::ECMAScript);
      filterIsRegex_ = true;
    } catch (const std::regex_error&) {
    }
  }
  auto passesFilter = [&](std::string_view name) {
    if (filterText_.empty()) return true;
    if (filterIsRegex_) return std::regex_search(name.begin(), name.end(), filter_);
    return containsIgnoringCase(name, filterText_);
  };
  float y = 0;
  auto addTrack = [&](const RankData& rank, size_t t, bool pinned) {
    const Track& track = rank.tracks[t];
    const int levels =
        std::clamp(int(track.levels.size()), track.instants.empty() ? 0 : 1, s.maxLevelsPerTrack);
    for (int l = 0; l < std::max(levels, 1); ++l) {
      Row row{rank.rank, int32_t(t), l, y, y + s.laneHeight};
      row.pinned = pinned;
      rows_.push_back(row);
      y += s.laneHeight;
    }
  };
  for (const TrackId& id : arrangement.pinned) {
    const RankData* rank = store.findRank(id.rank);
    if (rank == nullptr) continue;
    const uint32_t name = store.strings().find(id.track);
    const int t = name ? rank->findTrack(name) : -1;
    if (t >= 0) addTrack(*rank, size_t(t), true);
  }
  pinnedHeight_ = y;
  y = 0;
  auto addRank = [&](const RankData& rank) {
    std::vector<size_t> shown;
    for (size_t t = 0; t < rank.tracks.size(); ++t) {
      const TrackId id{rank.rank, std::string(store.str(rank.tracks[t].name))};
      if (arrangement.hidden.count(id) || arrangement.isPinned(id) || !passesFilter(id.track)) {
        continue;
      }
      shown.push_back(t);
    }
    if (shown.empty() && (!filterText_.empty() || !rank.tracks.empty())) return;
    rows_.push_back(Row{rank.rank, -1, 0, y, y + s.rankHeaderHeight});
    y += s.rankHeaderHeight;
    for (size_t t : shown) addTrack(rank, t, false);
  };
  if (lanes_) {
    for (size_t g = 0; g < lanes_->groups().size(); ++g) {
      const RankGroup& group = lanes_->groups()[g];
      rows_.push_back(Row{-1, -1, 0, y, y + s.rankHeaderHeight, int32_t(g), Aggregate::kHeader});
      y += s.rankHeaderHeight;
      for (Aggregate what : {Aggregate::kCompute, Aggregate::kComm}) {
        rows_.push_back(Row{-1, -1, 0, y, y + s.laneHeight, int32_t(g), what});
        y += s.laneHeight;
      }
      if (view.expandedGroups.count(group.label))
        for (int32_t r : arrangement.arranged(group.ranks))
          if (const RankData* rank = store.findRank(r)) addRank(*rank);
    }
  } else if (arrangement.rankOrder.empty()) {
    for (const RankData& rank : store.ranks()) addRank(rank);
  } else {
    for (int32_t r : arrangement.arranged(store.rankNumbers())) addRank(*store.findRank(r));
  }
  contentHeight_ = y;
  const float visible = std::max(rowsY1_ - rowsY0_ - pinnedHeight_, 1.0f);
  if (view.revealTrack.rank >= 0) {
    // The finder's track (or rank): its first row a third from the top, if it is not pinned.
    for (const Row& row : rows_) {
      if (row.pinned || row.rank != view.revealTrack.rank || row.level != 0) continue;
      const bool header = view.revealTrack.track.empty();
      if (header ? row.track >= 0
                 : row.track < 0 ||
                       store.str(store.findRank(row.rank)->tracks[size_t(row.track)].name) !=
                           view.revealTrack.track) {
        continue;
      }
      scrollY_ = row.y0 - visible / 3;
      break;
    }
    view.revealTrack = TrackId{-1, ""};
  }
  if (view.revealSearchHit) {
    // Scroll the search match's row into view (a third from the top) if it is not.
    view.revealSearchHit = false;
    const EventRef& hit = view.searchHit;
    for (const Row& row : rows_) {
      if (row.rank != hit.rank || row.track != hit.track ||
          row.level != std::clamp(hit.level, 0, s.maxLevelsPerTrack - 1))
        continue;
      if (row.y0 < scrollY_ || row.y1 > scrollY_ + visible) scrollY_ = row.y0 - visible / 3;
      break;
    }
  }
  scrollY_ = std::clamp(scrollY_, 0.0f, std::max(0.0f, contentHeight_ - visible));
  for (Row& row : rows_) {
    const float shift = row.pinned ? rowsY0_ : rowsY0_ + pinnedHeight_ - scrollY_;
    row.y0 += shift;
    row.y1 += shift;
  }
  const float scrolledY0 = rowsY0_ + pinnedHeight_;  // where the scrolled rows begin

  draw->PushClipRect(ImVec2(plotX0_ - s.labelWidth, rowsY0_), ImVec2(plotX0_ + plotWidth_, rowsY1_),
                     true);
  int stripe = 0;
  for (const Row& row : rows_) {
    // Pinned rows over the scrolled ones' band, which they never scroll into.
    const float top = row.pinned ? rowsY0_ : scrolledY0;
    const float bottom = row.pinned ? scrolledY0 : rowsY1_;
    if (row.y1 < top || row.y0 > bottom) continue;  // culled
    draw->PushClipRect(ImVec2(plotX0_ - s.labelWidth, top), ImVec2(plotX0_ + plotWidth_, bottom),
                       true);
    drawRow(store, row, view, draw, stripe);
    draw->PopClipRect();
  }
  if (pinnedHeight_ > 0) {
    draw->AddLine(ImVec2(plotX0_ - s.labelWidth, scrolledY0),
                  ImVec2(plotX0_ + plotWidth_, scrolledY0), kPinnedSeparator, 2.0f);
  }
  drawBands(view, draw);
  drawArea(view, draw);
  drawHighlighted(store, view, draw);
  drawFlows(store, view, draw);
  drawSearchHit(store, view, draw);
  draw->PopClipRect();
  // A scroll bar hint when the rows do not fit.
  if (contentHeight_ > visible) {
    const float h = visible * visible / contentHeight_;
    const float top = scrolledY0 + (visible - h) * (scrollY_ / (contentHeight_ - visible));
    draw->AddRectFilled(ImVec2(plotX0_ + plotWidth_ - 5, top),
                        ImVec2(plotX0_ + plotWidth_, top + h), IM_COL32(255, 255, 255, 60));
  }
}

void TimelinePanel::drawRow(const TraceStore& store, const Row& row, ViewState& view,
                            ImDrawList* draw, int& stripe) {
  const ViewerSettings& s = view.settings;
  {
    if (row.aggregate != Aggregate::kNone) {
      drawAggregateRow(store, row, view, draw);
      return;
    }
    const RankData& rank = *store.findRank(row.rank);
    if (row.track < 0) {
      draw->AddRectFilled(ImVec2(plotX0_ - s.labelWidth, row.y0),
                          ImVec2(plotX0_ + plotWidth_, row.y1), kRankHeader);
      draw->AddText(ImVec2(plotX0_ - s.labelWidth + 4, row.y0 + 2), kTextColor,
                    rankLabel(rank).c_str());
      return;
    }
    const Track& track = rank.tracks[row.track];
    if (row.level == 0) ++stripe;
    if (stripe % 2 == 0)
      draw->AddRectFilled(ImVec2(plotX0_ - s.labelWidth, row.y0),
                          ImVec2(plotX0_ + plotWidth_, row.y1), kRowStripe);
    if (row.level == 0) {
      // A pinned track says whose it is: it is away from its rank's header.
      const std::string name = row.pinned ? strCat("r", rank.rank, " ", store.str(track.name))
                                          : std::string(store.str(track.name));
      clippedText(draw, plotX0_ - s.labelWidth + 12, plotX0_ - 4, row.y0 + 2,
                  row.pinned ? kPinnedLabel : kTextColor, name.c_str());
    }
    draw->PushClipRect(ImVec2(plotX0_, row.y0), ImVec2(plotX0_ + plotWidth_, row.y1), true);
    if (row.level < int(track.levels.size()))
      drawLevel(store, rank, row.track, row.level, view, draw, row.y0 + 1, row.y1 - 1);
    if (row.level == 0 && !track.instants.empty())
      drawInstants(store, rank, row.track, view, draw, row.y0 + 1, row.y1 - 1);
    draw->PopClipRect();
  }
}

// The store's lanes when the loader built them for it, else the panel's own,
// rebuilt at most once a second while the store changes (a live job's).
const AggregateLanes* TimelinePanel::lanesFor(const TraceStore& store, const ViewState& view) {
  if (store.ranks().size() <= view.settings.aggregateAboveRanks) return nullptr;
  if (const AggregateLanes* built = store.aggregates()) return built;
  const double now = ImGui::GetTime();
  if (!ownLanes_ ||
      (ownLanes_->generation() != store.generation() && now - ownLanesBuiltAt_ >= 1.0)) {
    ownLanes_ = std::make_shared<AggregateLanes>(store);
    ownLanesBuiltAt_ = now;
  }
  return ownLanes_.get();
}

const TimelinePanel::Row* TimelinePanel::findGroupRow(int32_t group, Aggregate what) const {
  for (const Row& row : rows_)
    if (row.group == group && row.aggregate == what) return &row;
  return nullptr;
}

// An aggregate lane's row: the header (click to expand), or a busy-share strip
// with the group's straggler marks on the comm row.
void TimelinePanel::drawAggregateRow(const TraceStore& store, const Row& row, ViewState& view,
                                     ImDrawList* draw) {
  const ViewerSettings& s = view.settings;
  const RankGroup& group = lanes_->groups()[size_t(row.group)];
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  const bool mouseIn = rowsHovered_ && mouse.y >= row.y0 && mouse.y < row.y1;
  if (row.aggregate == Aggregate::kHeader) {
    draw->AddRectFilled(ImVec2(plotX0_ - s.labelWidth, row.y0),
                        ImVec2(plotX0_ + plotWidth_, row.y1), kRankHeader);
    const bool expanded = view.expandedGroups.count(group.label) > 0;
    const std::string label = strCat(
        expanded ? "[-] " : "[+] ", group.label, "  ", group.ranks.size(),
        group.ranks.size() == 1 ? " rank" : " ranks",
        group.marks.empty() ? std::string()
                            : strCat("  last to arrive at ", group.marks.size(), " collectives"));
    draw->AddText(ImVec2(plotX0_ - s.labelWidth + 4, row.y0 + 2), kTextColor, label.c_str());
    if (mouseIn) hoveredAggregate_ = &row;
    return;
  }
  const bool comm = row.aggregate == Aggregate::kComm;
  // Live summaries bring no compute: say whose compute the share is of.
  const int computeRanks = lanes_->computeRanks(size_t(row.group));
  const std::string rowLabel = comm || computeRanks == int(group.ranks.size())
                                   ? std::string(comm ? "comm (busy)" : "compute (busy)")
                               : computeRanks == 0 ? std::string("compute (not streamed)")
                                                   : strCat("compute (busy, ", computeRanks, "/",
                                                            group.ranks.size(), " ranks)");
  clippedText(draw, plotX0_ - s.labelWidth + 12, plotX0_ - 4, row.y0 + 2, kTextColor,
              rowLabel.c_str());
  draw->PushClipRect(ImVec2(plotX0_, row.y0), ImVec2(plotX0_ + plotWidth_, row.y1), true);
  // Two pixels a column; runs of columns of one shade are one rectangle (under
  // llvmpipe each rectangle costs, and a zoomed-out lane is mostly one shade).
  const int columns = std::max(1, int(plotWidth_ / 2));
  shares_.resize(size_t(columns));
  lanes_->busyShares(size_t(row.group), comm ? AggregateLanes::kComm : AggregateLanes::kCompute,
                     view.time.t0, view.time.t1, columns, shares_.data());
  const ImU32 color = categoryColor(comm ? "collective" : "user");
  const float range = kFoldedMaxShade - kFoldedMinShade;
  constexpr int kShades = 24;
  const float columnWidth = plotWidth_ / float(columns);
  int c = 0;
  while (c < columns) {
    const int shade = int(std::lround(shares_[size_t(c)] * kShades));
    int end = c + 1;
    while (end < columns && int(std::lround(shares_[size_t(end)] * kShades)) == shade) ++end;
    if (shade > 0) {
      draw->AddRectFilled(ImVec2(plotX0_ + c * columnWidth, row.y0 + 1),
                          ImVec2(plotX0_ + end * columnWidth, row.y1 - 1),
                          towardsBackground(color, kFoldedMinShade + range * shade / kShades));
      ++itemsDrawn_;
    }
    c = end;
  }
  if (mouseIn && mouse.x >= plotX0_) {
    hoveredAggregate_ = &row;
    hoveredShare_ =
        shares_[size_t(std::clamp(int((mouse.x - plotX0_) / columnWidth), 0, columns - 1))];
  }
  if (comm) {
    // Straggler marks: a red tick down from the row's top, one per 3 pixels at most.
    const auto& marks = group.marks;
    auto it = std::lower_bound(marks.begin(), marks.end(), view.time.t0,
                               [](const StragglerMark& m, int64_t t) { return m.timeNs < t; });
    float lastX = -1e9f;
    for (; it != marks.end() && it->timeNs <= view.time.t1; ++it) {
      const float x = view.time.toX(it->timeNs, plotX0_, plotWidth_);
      if (x - lastX < 3) continue;
      lastX = x;
      draw->AddTriangleFilled(ImVec2(x - 4, row.y0 + 1), ImVec2(x + 4, row.y0 + 1),
                              ImVec2(x, row.y0 + 9), kStragglerColor);
      ++itemsDrawn_;
      if (mouseIn && std::fabs(mouse.x - x) <= 4) hoveredMark_ = int32_t(it - marks.begin());
    }
  }
  draw->PopClipRect();
}

// Each flow is a line from its start to its end, on the first row of each
// end's track, with a head at the end. Flows are sorted by start; those that
// start after the view cannot reach into it. Unless every arrow is asked for,
// only those of the focus are drawn: flows with an end on the hovered or the
// selected event, and, through shared ends, the rest of their chain (a
// collective's arrows run from each arriving rank to the next).
void TimelinePanel::drawFlows(const TraceStore& store, ViewState& view, ImDrawList* draw) {
  flowsDrawn_ = 0;
  if (store.flows().empty()) return;
  std::unordered_map<uint64_t, float> rowCenter;  // (rank, track name) -> y
  for (const Row& row : rows_) {
    if (row.track < 0 || row.level != 0) continue;
    const RankData& rank = *store.findRank(row.rank);
    const uint64_t key = (uint64_t(uint32_t(row.rank)) << 32) | rank.tracks[row.track].name;
    rowCenter.emplace(key, (row.y0 + row.y1) / 2);
  }
  auto yOf = [&](const FlowEnd& end, float* y) {
    auto it = rowCenter.find((uint64_t(uint32_t(end.rank)) << 32) | end.track);
    if (it == rowCenter.end()) return false;
    *y = it->second;
    return true;
  };
  const int64_t t0 = view.time.t0, t1 = view.time.t1;
  std::vector<const Flow*> inView;
  for (const Flow& flow : store.flows()) {
    if (flow.from.time > t1) break;
    if (std::max(flow.from.time, flow.to.time) < t0) continue;
    inView.push_back(&flow);
  }
  if (!view.settings.allFlows) inView = focusFlows(store, view, inView);
  for (const Flow* f : inView) {
    const Flow& flow = *f;
    float ya = 0, yb = 0;
    if (!yOf(flow.from, &ya) || !yOf(flow.to, &yb)) continue;
    if (std::max(ya, yb) < rowsY0_ || std::min(ya, yb) > rowsY1_) continue;
    const ImVec2 a(view.time.toX(flow.from.time, plotX0_, plotWidth_), ya);
    const ImVec2 b(view.time.toX(flow.to.time, plotX0_, plotWidth_), yb);
    draw->AddLine(a, b, kFlowColor, 1.5f);
    // The head: a small triangle pointing along the line, at its end.
    const float dx = b.x - a.x, dy = b.y - a.y;
    const float length = std::sqrt(dx * dx + dy * dy);
    if (length >= 1) {
      const float ux = dx / length, uy = dy / length, size = 7;
      draw->AddTriangleFilled(
          b, ImVec2(b.x - ux * size - uy * size / 2, b.y - uy * size + ux * size / 2),
          ImVec2(b.x - ux * size + uy * size / 2, b.y - uy * size - ux * size / 2), kFlowColor);
    }
    if (++flowsDrawn_ >= kMaxFlowsPerFrame) break;
  }
}

std::vector<const Flow*> TimelinePanel::focusFlows(const TraceStore& store, const ViewState& view,
                                                   const std::vector<const Flow*>& flows) const {
  // The focus events' extents: a flow end on one of them belongs to it.
  struct Extent {
    int32_t rank;
    uint32_t track;
    int64_t begin, end;
  };
  std::vector<Extent> focus;
  auto add = [&](const EventRef& e) {
    if (!e.valid()) return;
    const RankData* rank = store.findRank(e.rank);
    if (!rank || e.track >= int32_t(rank->tracks.size())) return;
    const Track& track = rank->tracks[size_t(e.track)];
    if (e.level < 0) {
      if (e.index >= int64_t(track.instants.size())) return;
      const int64_t t = track.instants[size_t(e.index)].time;
      focus.push_back({e.rank, track.name, t, t});
      return;
    }
    if (e.level >= int32_t(track.levels.size()) ||
        e.index >= int64_t(track.levels[size_t(e.level)].size()))
      return;
    const Span& s = track.levels[size_t(e.level)][size_t(e.index)];
    focus.push_back({e.rank, track.name, s.begin, s.end});
  };
  if (!hover_.folded) add(hovered_);
  add(view.selection.event);
  if (focus.empty()) return {};
  auto onFocus = [&](const FlowEnd& end) {
    for (const Extent& f : focus)
      if (end.rank == f.rank && end.track == f.track && end.time >= f.begin && end.time <= f.end)
        return true;
    return false;
  };
  // A chain's arrows share their ends exactly: walk them from the focus.
  auto keyOf = [](const FlowEnd& end) {
    return std::tuple<int32_t, uint32_t, int64_t>(end.rank, end.track, end.time);
  };
  std::map<std::tuple<int32_t, uint32_t, int64_t>, std::vector<size_t>> atEnd;
  for (size_t i = 0; i < flows.size(); ++i) {
    atEnd[keyOf(flows[i]->from)].push_back(i);
    atEnd[keyOf(flows[i]->to)].push_back(i);
  }
  std::vector<char> taken(flows.size(), 0);
  std::vector<size_t> todo;
  for (size_t i = 0; i < flows.size(); ++i) {
    if (onFocus(flows[i]->from) || onFocus(flows[i]->to)) {
      taken[i] = 1;
      todo.push_back(i);
    }
  }
  while (!todo.empty()) {
    const Flow* f = flows[todo.back()];
    todo.pop_back();
    for (const FlowEnd* end : {&f->from, &f->to})
      for (size_t j : atEnd[keyOf(*end)])
        if (!taken[j]) {
          taken[j] = 1;
          todo.push_back(j);
        }
  }
  std::vector<const Flow*> out;
  for (size_t i = 0; i < flows.size(); ++i)
    if (taken[i]) out.push_back(flows[i]);
  return out;
}

// Each band covers its rank's rows, from the header to the last track (or, when
// the rank is folded into an aggregate lane, that lane's rows): a tint, so the
// events under it stay readable, and a solid outline, its label in the header
// when it fits. Under the flows and the search match.
void TimelinePanel::drawBands(const ViewState& view, ImDrawList* draw) {
  bandsDrawn_ = 0;
  if (view.bands.empty()) return;
  std::unordered_map<int32_t, std::pair<float, float>> extent;  // rank -> rows' y0, y1
  auto widen = [&](int32_t key, const Row& row) {
    auto [it, fresh] = extent.emplace(key, std::pair{row.y0, row.y1});
    if (!fresh) {
      it->second.first = std::min(it->second.first, row.y0);
      it->second.second = std::max(it->second.second, row.y1);
    }
  };
  for (const Row& row : rows_) {
    if (row.aggregate == Aggregate::kNone) widen(row.rank, row);
  }
  for (const RankBand& band : view.bands) {
    auto it = extent.find(band.rank);
    std::pair<float, float> ys;
    if (it != extent.end()) {
      ys = it->second;
    } else {
      const int group = lanes_ ? lanes_->groupOf(band.rank) : -1;
      if (group < 0) continue;
      bool any = false;
      for (const Row& row : rows_) {
        if (row.group != group) continue;
        ys = any ? std::pair{std::min(ys.first, row.y0), std::max(ys.second, row.y1)}
                 : std::pair{row.y0, row.y1};
        any = true;
      }
      if (!any) continue;
    }
    if (ys.second < rowsY0_ || ys.first > rowsY1_) continue;
    float x0 = view.time.toX(band.beginNs, plotX0_, plotWidth_);
    float x1 = view.time.toX(band.endNs, plotX0_, plotWidth_);
    if (x1 < plotX0_ || x0 > plotX0_ + plotWidth_) continue;
    // Whole pixels: the outline is then a crisp line of its colour.
    x0 = std::round(std::max(x0, plotX0_));
    x1 = std::round(std::min(std::max(x1, x0 + 2), plotX0_ + plotWidth_));
    const ImU32 color = band.color | IM_COL32_A_MASK;
    draw->AddRectFilled(ImVec2(x0, ys.first), ImVec2(x1, ys.second),
                        (color & ~IM_COL32_A_MASK) | (ImU32(kBandFillAlpha) << IM_COL32_A_SHIFT));
    draw->AddRect(ImVec2(x0, std::round(ys.first) + 1), ImVec2(x1, std::round(ys.second) - 1),
                  color, 0, 0, 2.0f);
    if (!band.label.empty() && ImGui::CalcTextSize(band.label.c_str()).x <= x1 - x0 - 6)
      draw->AddText(ImVec2(x0 + 3, ys.first + 2), color, band.label.c_str());
    ++bandsDrawn_;
  }
}

// The search box's current match: a thick outline in its own colour around the
// event's extent (at least a few pixels, so an instant or a sliver shows), on
// top of whatever was drawn there, folded or not.
void TimelinePanel::drawSearchHit(const TraceStore& store, const ViewState& view,
                                  ImDrawList* draw) {
  searchHitDrawn_ = false;
  const EventRef& hit = view.searchHit;
  if (!hit.valid()) return;
  const RankData* rank = store.findRank(hit.rank);
  if (!rank || hit.track >= int32_t(rank->tracks.size())) return;
  const Track& track = rank->tracks[size_t(hit.track)];
  int64_t begin, end;
  if (hit.level >= 0) {
    if (hit.level >= int32_t(track.levels.size()) ||
        hit.index >= int64_t(track.levels[size_t(hit.level)].size()))
      return;
    const Span& s = track.levels[size_t(hit.level)][size_t(hit.index)];
    begin = s.begin, end = s.end;
  } else {
    if (hit.index >= int64_t(track.instants.size())) return;
    begin = end = track.instants[size_t(hit.index)].time;
  }
  const int level = std::clamp(hit.level, 0, view.settings.maxLevelsPerTrack - 1);
  for (const Row& row : rows_) {
    if (row.rank != hit.rank || row.track != hit.track || row.level != level) continue;
    if (row.y1 < rowsY0_ || row.y0 > rowsY1_) return;
    float x0 = view.time.toX(begin, plotX0_, plotWidth_);
    float x1 = view.time.toX(end, plotX0_, plotWidth_);
    if (x1 < plotX0_ - 4 || x0 > plotX0_ + plotWidth_ + 4) return;
    const float middle = (x0 + x1) / 2;
    x0 = std::max(std::min(x0, middle - 3), plotX0_ - 4);
    x1 = std::min(std::max(x1, middle + 3), plotX0_ + plotWidth_ + 4);
    draw->AddRect(ImVec2(x0 - 1, row.y0), ImVec2(x1 + 1, row.y1), kSearchHitColor, 0, 0, 3.0f);
    searchHitX_ = middle;
    searchHitY_ = (row.y0 + row.y1) / 2;
    searchHitDrawn_ = true;
    return;
  }
}

void TimelinePanel::drawLevel(const TraceStore& store, const RankData& rank, int32_t trackIndex,
                              int level, ViewState& view, ImDrawList* draw, float y0, float y1) {
  const Track& track = rank.tracks[trackIndex];
  const std::vector<Span>& spans = track.levels[level];
  const bool haveBusy = size_t(level) < track.busy.size() &&
                        track.busy[size_t(level)].size() == spans.size() / kBusyStride + 1;
  const double nsPerPixel = view.time.nsPerPixel(plotWidth_);
  const int64_t minNs = std::max<int64_t>(1, int64_t(nsPerPixel * view.settings.minEventPixels));
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  const bool mouseInRow = rowsHovered_ && mouse.y >= y0 && mouse.y < y1;
  const EventRef& selected = view.selection.event;
  const bool selectedHere =
      selected.rank == rank.rank && selected.track == trackIndex && selected.level == level;
  visitLevel(spans, view.time.t0, view.time.t1, minNs, [&](const LevelItem& item) {
    float x0 = view.time.toX(item.begin, plotX0_, plotWidth_);
    float x1 = view.time.toX(item.end, plotX0_, plotWidth_);
    x0 = std::max(x0, plotX0_ - 2);
    x1 = std::min(std::max(x1, x0 + 1), plotX0_ + plotWidth_ + 2);
    const Span& first = spans[item.first];
    const ImU32 color = categoryColor(store.categories()[first.category]);
    ++itemsDrawn_;
    if (item.count == 1) {
      // Wide enough: a one-pixel gap separates it from a neighbour that touches it.
      const float right = x1 - x0 > 4 ? x1 - 1 : x1;
      draw->AddRectFilled(ImVec2(x0, y0), ImVec2(right, y1),
                          first.flags & kSpanFailed ? IM_COL32(229, 57, 53, 255) : color);
      if (x1 - x0 > 30) {
        const std::string name(store.str(first.name));
        clippedText(draw, x0 + 3, x1 - 2, y0 + 1, textColorOn(color), name.c_str());
      }
    } else {
      // A folded run, shaded by the share of its time its spans cover (O(1)
      // from the level's busy prefix sums): a dense burst shows near the
      // category's colour, a run of sparse slivers fades towards the
      // background, so idle gaps and bursts read apart when zoomed out.
      const double extent = double(std::max<int64_t>(item.end - item.begin, 1));
      const double busy =
          haveBusy ? std::min(1.0, double(busyNs(track, size_t(level), item)) / extent) : 0.5;
      draw->AddRectFilled(
          ImVec2(x0, y0 + 2), ImVec2(x1, y1 - 2),
          towardsBackground(color,
                            float(kFoldedMinShade + (kFoldedMaxShade - kFoldedMinShade) * busy)));
      if (x1 - x0 > 50) {
        char label[48];
        std::snprintf(label, sizeof label, "%u events", item.count);
        clippedText(draw, x0 + 3, x1 - 2, y0 + 1, IM_COL32(230, 230, 230, 255), label);
      }
    }
    if (selectedHere && selected.index >= int64_t(item.first) &&
        selected.index < int64_t(item.first + item.count))
      draw->AddRect(ImVec2(x0, y0), ImVec2(x1, y1), kSelectedOutline, 0, 0, 2.0f);
    if (mouseInRow && mouse.x >= x0 - 1 && mouse.x <= x1 + 1) {
      hover_.item = item;
      hover_.folded = item.count > 1;
      hover_.event = EventRef{rank.rank, trackIndex, level, int64_t(item.first)};
      hovered_ = hover_.event;
    }
  });
}

void TimelinePanel::drawInstants(const TraceStore& store, const RankData& rank, int32_t trackIndex,
                                 ViewState& view, ImDrawList* draw, float y0, float y1) {
  const std::vector<Instant>& instants = rank.tracks[trackIndex].instants;
  const double nsPerPixel = view.time.nsPerPixel(plotWidth_);
  const int64_t minNs = std::max<int64_t>(1, int64_t(nsPerPixel * view.settings.minEventPixels));
  auto it = std::lower_bound(instants.begin(), instants.end(), view.time.t0,
                             [](const Instant& a, int64_t t) { return a.time < t; });
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  const bool mouseInRow = rowsHovered_ && mouse.y >= y0 && mouse.y < y1;
  while (it != instants.end() && it->time <= view.time.t1) {
    const float x = view.time.toX(it->time, plotX0_, plotWidth_);
    const ImU32 color = categoryColor(store.categories()[it->category]);
    draw->AddTriangleFilled(ImVec2(x - 4, y0), ImVec2(x + 4, y0), ImVec2(x, y1), color);
    ++itemsDrawn_;
    if (mouseInRow && std::fabs(mouse.x - x) <= 4) {
      hover_ = Hover{};
      hover_.event = EventRef{rank.rank, trackIndex, -1, int64_t(it - instants.begin())};
      hovered_ = hover_.event;
    }
    // Skip the instants that would land on the same few pixels.
    it = std::lower_bound(it + 1, instants.end(), it->time + minNs,
                          [](const Instant& a, int64_t t) { return a.time < t; });
  }
}

void TimelinePanel::handleInput(const TraceStore& store, ViewState& view) {
  ImGuiIO& io = ImGui::GetIO();
  const ImVec2 mouse = io.MousePos;
  const bool overPlot = (rowsHovered_ || rulerHovered_);
  // Zoom with the wheel at the cursor.
  if (overPlot && io.MouseWheel != 0) {
    const int64_t at = view.time.toTime(mouse.x, plotX0_, plotWidth_);
    view.time.zoomAt(at, std::pow(0.8, double(io.MouseWheel)));
  }
  // WASD: zoom in/out around the cursor (or the centre), pan left/right.
  // (Keys work whenever no text field has the keyboard, as in Tracy.)
  if (!io.WantTextInput) {
    const float dt = std::max(io.DeltaTime, 1.0f / 120);
    const int64_t centre = overPlot ? view.time.toTime(mouse.x, plotX0_, plotWidth_)
                                    : view.time.t0 + view.time.span() / 2;
    if (ImGui::IsKeyDown('W')) view.time.zoomAt(centre, std::pow(0.05, double(dt)));
    if (ImGui::IsKeyDown('S')) view.time.zoomAt(centre, std::pow(20.0, double(dt)));
    if (ImGui::IsKeyDown('A')) view.time.pan(-int64_t(double(view.time.span()) * dt));
    if (ImGui::IsKeyDown('D')) view.time.pan(int64_t(double(view.time.span()) * dt));
  }
  if (!io.WantTextInput && !io.KeyCtrl) keyboardMoves(store, view);
  trackMenu(store, view);
  if (areaInput(store, view)) return;
  // A press on the ruler starts a range; on the rows, a pan (or a click).
  if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) {
    dragDistance_ = 0;
    if (rulerHovered_) {
      rangeDragging_ = true;
      rangeAnchor_ = view.time.toTime(mouse.x, plotX0_, plotWidth_);
    } else if (rowsHovered_) {
      panning_ = true;
    }
  }
  if (ImGui::IsMouseDown(ImGuiMouseButton_Left) && (panning_ || rangeDragging_)) {
    const ImVec2 d = io.MouseDelta;
    dragDistance_ += std::fabs(d.x) + std::fabs(d.y);
    if (panning_ && dragDistance_ > 2) {
      view.time.pan(-int64_t(double(d.x) * view.time.nsPerPixel(plotWidth_)));
      scrollY_ -= d.y;
    }
    if (rangeDragging_) {
      const int64_t t = view.time.toTime(mouse.x, plotX0_, plotWidth_);
      view.selection.hasRange = dragDistance_ > 2;
      view.selection.rangeBegin = std::min(rangeAnchor_, t);
      view.selection.rangeEnd = std::max(rangeAnchor_, t);
    }
  }
  if (ImGui::IsMouseReleased(ImGuiMouseButton_Left)) {
    if (panning_ && dragDistance_ <= 2 && hoveredAggregate_ &&
        hoveredAggregate_->aggregate == Aggregate::kHeader) {
      // A click on an aggregate lane's header expands it into its ranks, or folds them.
      const std::string& label = lanes_->groups()[size_t(hoveredAggregate_->group)].label;
      if (!view.expandedGroups.erase(label)) view.expandedGroups.insert(label);
    } else if (panning_ && dragDistance_ <= 2) {
      // A click: select what is under the cursor (or clear the selection), and end an area.
      view.selection.areaTracks.clear();
      view.selection.event = hover_.folded ? EventRef{} : hovered_;
      view.selection.nameId = 0;
      if (hovered_.valid() && !hover_.folded) {
        const RankData& rank = *store.findRank(hovered_.rank);
        const Track& track = rank.tracks[hovered_.track];
        view.selection.nameId = hovered_.level >= 0
                                    ? track.levels[hovered_.level][hovered_.index].name
                                    : track.instants[hovered_.index].name;
      }
    }
    if (rangeDragging_ && dragDistance_ <= 2) view.selection.hasRange = false;
    panning_ = rangeDragging_ = false;
  }
  // Double click: zoom to the event (or to a folded block's extent).
  if (rowsHovered_ && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left) && hovered_.valid() &&
      hovered_.level >= 0)
    view.time.show(hover_.item.begin, hover_.item.end);
}

std::vector<std::pair<int32_t, uint32_t>> TimelinePanel::tracksBetween(const TraceStore& store,
                                                                       float y0, float y1) const {
  if (y1 < y0) std::swap(y0, y1);
  std::vector<std::pair<int32_t, uint32_t>> out;
  for (const Row& row : rows_) {
    if (row.aggregate != Aggregate::kNone || row.y1 <= y0 || row.y0 > y1) continue;
    if (row.track >= 0) {
      out.emplace_back(row.rank, uint32_t(row.track));
    } else if (const RankData* rank = store.findRank(row.rank)) {
      for (uint32_t t = 0; t < rank->tracks.size(); ++t) out.emplace_back(row.rank, t);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

bool TimelinePanel::areaInput(const TraceStore& store, ViewState& view) {
  ImGuiIO& io = ImGui::GetIO();
  Selection& selection = view.selection;
  if (io.KeyShift && ImGui::IsMouseClicked(ImGuiMouseButton_Left) && rowsBandHovered_) {
    areaDragging_ = true;
    dragDistance_ = 0;
    areaAnchorY_ = io.MousePos.y;
    rangeAnchor_ = view.time.toTime(std::max(io.MousePos.x, plotX0_), plotX0_, plotWidth_);
    return true;
  }
  if (!areaDragging_) return false;
  if (ImGui::IsMouseDown(ImGuiMouseButton_Left)) {
    dragDistance_ += std::fabs(io.MouseDelta.x) + std::fabs(io.MouseDelta.y);
    if (dragDistance_ > 2) {
      const int64_t t = view.time.toTime(std::max(io.MousePos.x, plotX0_), plotX0_, plotWidth_);
      selection.areaTracks = tracksBetween(store, areaAnchorY_, io.MousePos.y);
      selection.hasRange = t != rangeAnchor_;
      selection.rangeBegin = std::min(rangeAnchor_, t);
      selection.rangeEnd = std::max(rangeAnchor_, t);
      selection.event = EventRef{};
      selection.nameId = 0;
    }
    return true;
  }
  // Released without moving: a Shift+click, which on a rank's header adds (or removes) every
  // track of that rank.
  areaDragging_ = false;
  if (dragDistance_ > 2) return true;
  for (const Row& row : rows_) {
    if (row.track >= 0 || row.aggregate != Aggregate::kNone || io.MousePos.y < row.y0 ||
        io.MousePos.y >= row.y1) {
      continue;
    }
    const auto tracks = tracksBetween(store, row.y0, row.y0);
    auto& area = selection.areaTracks;
    const bool all = std::all_of(tracks.begin(), tracks.end(), [&](const auto& t) {
      return std::binary_search(area.begin(), area.end(), t);
    });
    if (all) {
      area.erase(std::remove_if(area.begin(), area.end(),
                                [&](const auto& t) {
                                  return std::binary_search(tracks.begin(), tracks.end(), t);
                                }),
                 area.end());
    } else {
      area.insert(area.end(), tracks.begin(), tracks.end());
      std::sort(area.begin(), area.end());
      area.erase(std::unique(area.begin(), area.end()), area.end());
    }
    selection.event = EventRef{};
    selection.nameId = 0;
  }
  return true;
}

void TimelinePanel::drawArea(const ViewState& view, ImDrawList* draw) {
  const Selection& selection = view.selection;
  if (selection.areaTracks.empty()) return;
  const float a = selection.hasRange
                      ? std::max(view.time.toX(selection.rangeBegin, plotX0_, plotWidth_), plotX0_)
                      : plotX0_;
  const float b =
      selection.hasRange
          ? std::min(view.time.toX(selection.rangeEnd, plotX0_, plotWidth_), plotX0_ + plotWidth_)
          : plotX0_ + plotWidth_;
  if (b <= a) return;
  for (const Row& row : rows_) {
    if (row.track < 0 || row.aggregate != Aggregate::kNone) continue;
    if (!std::binary_search(selection.areaTracks.begin(), selection.areaTracks.end(),
                            std::make_pair(row.rank, uint32_t(row.track)))) {
      continue;
    }
    draw->AddRectFilled(ImVec2(a, row.y0), ImVec2(b, row.y1), kAreaFill);
    draw->AddRect(ImVec2(a, row.y0), ImVec2(b, row.y1), kAreaOutline);
  }
}

void TimelinePanel::trackMenu(const TraceStore& store, ViewState& view) {
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  if (rowsBandHovered_ && mouse.x < plotX0_ && ImGui::IsMouseClicked(ImGuiMouseButton_Right)) {
    for (const Row& row : rows_) {
      if (row.aggregate != Aggregate::kNone || mouse.y < row.y0 || mouse.y >= row.y1) continue;
      // A track's label, or a rank's header (no track: the rank's menu).
      const RankData* rank = store.findRank(row.rank);
      menuTrack_ = TrackId{
          row.rank, row.track < 0 ? std::string()
                                  : std::string(store.str(rank->tracks[size_t(row.track)].name))};
      ImGui::OpenPopup("##trackMenu");
      break;
    }
  }
  if (!ImGui::BeginPopup("##trackMenu")) return;
  TrackArrangement& tracks = view.tracks;
  if (menuTrack_.track.empty()) {
    rankMenu(store, view);
    ImGui::EndPopup();
    return;
  }
  ImGui::TextDisabled("rank %d: %s", menuTrack_.rank, menuTrack_.track.c_str());
  const bool pinned = tracks.isPinned(menuTrack_);
  if (ImGui::MenuItem(pinned ? "Unpin" : "Pin to the top")) tracks.togglePin(menuTrack_);
  if (pinned && ImGui::MenuItem("Move up")) tracks.movePinned(menuTrack_, -1);
  if (pinned && ImGui::MenuItem("Move down")) tracks.movePinned(menuTrack_, +1);
  if (ImGui::MenuItem("Hide")) {
    if (pinned) tracks.togglePin(menuTrack_);
    tracks.hidden.insert(menuTrack_);
  }
  if (!tracks.hidden.empty() &&
      ImGui::MenuItem(strCat("Show the hidden tracks (", tracks.hidden.size(), ")").c_str())) {
    tracks.hidden.clear();
  }
  ImGui::EndPopup();
}

// A rank header's menu: where the rank goes among the others (the lane's, above 32 ranks).
void TimelinePanel::rankMenu(const TraceStore& store, ViewState& view) {
  TrackArrangement& tracks = view.tracks;
  const int32_t rank = menuTrack_.rank;
  std::vector<int32_t> among = store.rankNumbers();
  if (lanes_) {
    if (const int g = lanes_->groupOf(rank); g >= 0) among = lanes_->groups()[size_t(g)].ranks;
  }
  ImGui::TextDisabled("rank %d", rank);
  if (ImGui::MenuItem("Move rank to the top"))
    tracks.moveRank(rank, TrackArrangement::kToTop, among);
  if (ImGui::MenuItem("Move rank up")) tracks.moveRank(rank, -1, among);
  if (ImGui::MenuItem("Move rank down")) tracks.moveRank(rank, +1, among);
  if (!tracks.rankOrder.empty() && ImGui::MenuItem("Order ranks by number")) {
    tracks.rankOrder.clear();
  }
  if (ImGui::MenuItem("Hide the rank's tracks")) {
    if (const RankData* r = store.findRank(rank))
      for (const Track& t : r->tracks)
        tracks.hidden.insert(TrackId{rank, std::string(store.str(t.name))});
  }
}

void TimelinePanel::drawHighlighted(const TraceStore& store, const ViewState& view,
                                    ImDrawList* draw) {
  highlightsDrawn_ = 0;
  if (view.highlighted.empty()) return;
  // The rows by (rank, track, level), once per frame.
  std::map<std::tuple<int32_t, int32_t, int32_t>, const Row*> rowOf;
  for (const Row& row : rows_)
    if (row.track >= 0 && row.aggregate == Aggregate::kNone)
      rowOf[{row.rank, row.track, row.level}] = &row;
  for (const EventRef& e : view.highlighted) {
    if (e.level < 0) continue;
    auto row =
        rowOf.find({e.rank, e.track, std::min(e.level, view.settings.maxLevelsPerTrack - 1)});
    if (row == rowOf.end()) continue;
    const RankData* rank = store.findRank(e.rank);
    const Track& track = rank->tracks[size_t(e.track)];
    if (e.level >= int32_t(track.levels.size()) ||
        e.index >= int64_t(track.levels[size_t(e.level)].size())) {
      continue;
    }
    const Span& s = track.levels[size_t(e.level)][size_t(e.index)];
    if (s.end < view.time.t0 || s.begin > view.time.t1) continue;
    const float x0 = std::max(view.time.toX(s.begin, plotX0_, plotWidth_), plotX0_ - 2);
    const float x1 = std::min(std::max(view.time.toX(s.end, plotX0_, plotWidth_), x0 + 2),
                              plotX0_ + plotWidth_ + 2);
    draw->AddRect(ImVec2(x0 - 1, row->second->y0), ImVec2(x1 + 1, row->second->y1), kHighlightColor,
                  0, 0, 2.0f);
    ++highlightsDrawn_;
  }
}

void TimelinePanel::keyboardMoves(const TraceStore& store, ViewState& view) {
  Selection& selection = view.selection;
  const EventRef& e = selection.event;
  const RankData* rank = e.valid() ? store.findRank(e.rank) : nullptr;
  const Track* track = rank != nullptr && e.track < int32_t(rank->tracks.size())
                           ? &rank->tracks[size_t(e.track)]
                           : nullptr;
  // The selected event's extent, if it still exists.
  auto extent = [&](int64_t* begin, int64_t* end) {
    if (track == nullptr) return false;
    if (e.level < 0) {
      if (e.index >= int64_t(track->instants.size())) return false;
      *begin = *end = track->instants[size_t(e.index)].time;
      return true;
    }
    if (e.level >= int32_t(track->levels.size()) ||
        e.index >= int64_t(track->levels[size_t(e.level)].size())) {
      return false;
    }
    const Span& s = track->levels[size_t(e.level)][size_t(e.index)];
    *begin = s.begin;
    *end = s.end;
    return true;
  };
  // "." / ",": the next / previous event on the selected event's track (its level, or its
  // instants), brought into view when it is outside.
  const int step = ImGui::IsKeyPressed(kKeyPeriod) ? 1 : ImGui::IsKeyPressed(kKeyComma) ? -1 : 0;
  int64_t begin = 0, end = 0;
  if (step != 0 && extent(&begin, &end)) {
    const int64_t count = e.level < 0 ? int64_t(track->instants.size())
                                      : int64_t(track->levels[size_t(e.level)].size());
    const int64_t next = e.index + step;
    if (next >= 0 && next < count) {
      selection.event.index = next;
      extent(&begin, &end);
      selection.nameId = e.level < 0 ? track->instants[size_t(next)].name
                                     : track->levels[size_t(e.level)][size_t(next)].name;
      if (end < view.time.t0 || begin > view.time.t1) {
        view.time.pan((begin + end) / 2 - (view.time.t0 + view.time.span() / 2));
      }
    }
  }
  // F: focus the selected event, else the selected range.
  if (ImGui::IsKeyPressed('F', false)) {
    if (extent(&begin, &end)) {
      view.time.show(begin, end);
    } else if (selection.hasRange) {
      view.time.show(selection.rangeBegin, selection.rangeEnd);
    }
  }
  // M: the selected event's time becomes the selected range.
  if (ImGui::IsKeyPressed('M', false) && extent(&begin, &end)) {
    selection.hasRange = true;
    selection.rangeBegin = begin;
    selection.rangeEnd = end;
  }
}

void TimelinePanel::aggregateTooltip(const TraceStore& store) const {
  const RankGroup& group = lanes_->groups()[size_t(hoveredAggregate_->group)];
  ImGui::BeginTooltip();
  ImGui::Text("%s: %zu ranks (%s)", group.label.c_str(), group.ranks.size(),
              ringx::rankList(group.ranks).c_str());
  if (hoveredAggregate_->aggregate == Aggregate::kHeader) {
    ImGui::Text("click to %s", "show or hide its ranks");
  } else {
    ImGui::Text("%s busy %.0f%% of the group's rank-time here",
                hoveredAggregate_->aggregate == Aggregate::kComm ? "comm" : "compute",
                double(hoveredShare_) * 100);
    const int computeRanks = lanes_->computeRanks(size_t(hoveredAggregate_->group));
    if (hoveredAggregate_->aggregate == Aggregate::kCompute &&
        computeRanks < int(group.ranks.size())) {
      // Ranks followed through their live summary sent no compute events.
      ImGui::TextDisabled(
          "(of the %d ranks that stream their compute; the others send their "
          "collectives only)",
          computeRanks);
    }
  }
  if (hoveredMark_ >= 0) {
    const StragglerMark& m = group.marks[size_t(hoveredMark_)];
    ImGui::Separator();
    ImGui::Text("rank %d arrived last at %.*s seq %lld (group %.*s), %s after the first", m.rank,
                int(store.str(m.name).size()), store.str(m.name).data(),
                static_cast<long long>(m.seq), int(store.str(m.group).size()),
                store.str(m.group).data(), formatNs(m.skewNs).c_str());
  }
  ImGui::EndTooltip();
}

void TimelinePanel::tooltip(const TraceStore& store) const {
  const RankData* rank = store.findRank(hovered_.rank);
  if (!rank) return;
  const Track& track = rank->tracks[hovered_.track];
  ImGui::BeginTooltip();
  if (hover_.folded) {
    ImGui::Text("%u events (zoom in to see them)", hover_.item.count);
    ImGui::Text("from %s to %s", formatNs(hover_.item.begin - store.beginNs()).c_str(),
                formatNs(hover_.item.end - store.beginNs()).c_str());
    ImGui::Text("rank %d, %.*s", rank->rank, int(store.str(track.name).size()),
                store.str(track.name).data());
    ImGui::EndTooltip();
    return;
  }
  uint32_t name, firstArg;
  uint16_t argCount;
  int64_t begin, end;
  uint8_t category;
  if (hovered_.level >= 0) {
    const Span& s = track.levels[hovered_.level][hovered_.index];
    name = s.name, firstArg = s.firstArg, argCount = s.argCount, begin = s.begin, end = s.end,
    category = s.category;
  } else {
    const Instant& in = track.instants[hovered_.index];
    name = in.name, firstArg = in.firstArg, argCount = in.argCount, begin = end = in.time,
    category = in.category;
  }
  const std::string_view nameText = store.str(name), trackText = store.str(track.name);
  ImGui::Text("%.*s", int(nameText.size()), nameText.data());
  ImGui::Separator();
  ImGui::Text("rank %d  track %.*s  category %s", rank->rank, int(trackText.size()),
              trackText.data(), store.categories()[category].c_str());
  ImGui::Text("start %s", formatNs(begin - store.beginNs()).c_str());
  if (hovered_.level >= 0) ImGui::Text("duration %s", formatNs(end - begin).c_str());
  // Derived values: bus bandwidth (nccl-tests' convention) and queue wait.
  const ArgList args(*rank, firstArg, argCount);
  const ArgValue* bytes = args.find(store.strings().find("bytes"));
  const ArgValue* groupSize = args.find(store.strings().find("group_size"));
  if (bytes && bytes->kind == ArgKind::kInt && end > begin) {
    const double factor = analysis::busBandwidthFactor(
        nameText, groupSize && groupSize->kind == ArgKind::kInt ? groupSize->intValue : 1);
    ImGui::Text("busbw %s  (algbw %s)",
                formatBandwidth(double(bytes->intValue) / double(end - begin) * factor).c_str(),
                formatBandwidth(double(bytes->intValue) / double(end - begin)).c_str());
  }
  const ArgValue* enqueue = args.find(store.strings().find("enqueue_ns"));
  if (enqueue && enqueue->kind == ArgKind::kInt && enqueue->intValue > 0)
    ImGui::Text("queue wait %s", formatNs(begin - enqueue->intValue).c_str());
  if (argCount) ImGui::Separator();
  for (const ArgValue& a : args) {
    const std::string_view key = store.str(a.key);
    std::string value = store.argText(a);
    // Times in args are absolute aligned ns: show them relative to the event.
    if (a.kind == ArgKind::kInt && key.size() > 3 && key.substr(key.size() - 3) == "_ns" &&
        key != "exposed_ns" && a.intValue > store.beginNs() / 2)
      value = formatNs(a.intValue - begin) + " after start";
    else if (a.kind == ArgKind::kInt && key == "bytes")
      value += " (" + formatBytes(double(a.intValue)) + ")";
    else if (a.kind == ArgKind::kInt && key == "exposed_ns")
      value = formatNs(a.intValue);
    ImGui::Text("%.*s: %s", int(key.size()), key.data(), value.c_str());
  }
  ImGui::EndTooltip();
}

}  // namespace ringx::viewer
