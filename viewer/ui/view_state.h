// What every panel shares: the visible time range (one axis for the timeline
// and the memory charts), the cursor, the selection, and the viewer's settings.
// Plain structs, so tests can set them up and check them without a window.
#pragma once

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "trace/model/aggregate_lanes.h"

namespace ringx::viewer {
// The viewer draws the trace model (trace/model/); its names are used unqualified here.
using namespace ringx::model;

struct ViewerSettings {
  float laneHeight = 18.0f;  // pixels per level of a track
  float rankHeaderHeight = 20.0f;
  float labelWidth = 150.0f;    // the left column with rank and track names
  float minEventPixels = 3.0f;  // narrower events fold into "N events" blocks
  int maxLevelsPerTrack = 4;    // deeper nesting is not drawn (the tooltip still lists it)
  // Follow mode while attached: the view shows the newest followWindowSeconds
  // and moves with new data; panning or zooming turns it off, End turns it on.
  bool followLive = true;
  float followWindowSeconds = 5.0f;
  // Above this many ranks, ranks are grouped into aggregate lanes (per host)
  // that expand on a click (aggregate_lanes.h).
  size_t aggregateAboveRanks = kAggregateAboveRanks;
  // Flow arrows (collectives' arrival chains, profiler launches): every one in view, or (the
  // default, as Perfetto does) only those of the hovered or selected event, following a chain
  // through every rank it joins. Every arrow at once buries an FSDP timeline under lines.
  bool allFlows = false;
};

// The visible time range [t0, t1] in aligned ns, mapped onto [x0, x0 + width].
struct TimeView {
  int64_t t0 = 0;
  int64_t t1 = 1;

  int64_t span() const { return std::max<int64_t>(t1 - t0, 1); }
  double nsPerPixel(float width) const { return double(span()) / std::max(width, 1.0f); }
  float toX(int64_t t, float x0, float width) const {
    return x0 + float(double(t - t0) / double(span()) * width);
  }
  int64_t toTime(float x, float x0, float width) const {
    return t0 + int64_t(double(x - x0) / std::max(width, 1.0f) * double(span()));
  }
  // Zooms by `factor` (< 1 zooms in) keeping time `at` where it is on screen.
  void zoomAt(int64_t at, double factor) {
    const double newSpan = std::clamp(double(span()) * factor, 100.0, 1e15);
    const double f = double(at - t0) / double(span());
    t0 = at - int64_t(f * newSpan);
    t1 = t0 + int64_t(newSpan);
  }
  void pan(int64_t ns) {
    t0 += ns;
    t1 += ns;
  }
  // Shows [begin, end] with a margin of `margin` of the span on each side.
  void show(int64_t begin, int64_t end, double margin = 0.05) {
    const int64_t s = std::max<int64_t>(end - begin, 100);
    t0 = begin - int64_t(s * margin);
    t1 = end + int64_t(s * margin);
  }
  // Follow mode: the last `windowNs` of a trace spanning [begin, end] (all of it
  // while it is shorter), its newest event a fiftieth of the view from the right.
  void follow(int64_t begin, int64_t end, int64_t windowNs) {
    const int64_t window =
        std::clamp<int64_t>(end - begin, 1000, std::max<int64_t>(windowNs, 1000));
    t0 = end - window;
    t1 = end + window / 50;
  }
  bool operator==(const TimeView& o) const { return t0 == o.t0 && t1 == o.t1; }
};

// One span or instant, addressed inside the store.
struct EventRef {
  int32_t rank = -1;  // RankData::rank
  int32_t track = -1;
  int32_t level = -1;  // -1: an instant
  int64_t index = -1;
  bool valid() const { return rank >= 0 && track >= 0 && index >= 0; }
  bool operator==(const EventRef& o) const {
    return rank == o.rank && track == o.track && level == o.level && index == o.index;
  }
};

struct Selection {
  EventRef event;         // clicked event
  uint32_t nameId = 0;    // its name: the statistics panel shows every event of this name
  bool hasRange = false;  // a range dragged on the ruler (or over the rows, with Shift)
  int64_t rangeBegin = 0;
  int64_t rangeEnd = 0;
  // An area: these tracks, (rank, index in RankData::tracks), over the range (all of the time
  // without one). Shift+drag over the rows picks the rows' tracks; Shift+click on a rank's
  // header adds or removes all of its tracks. Empty: no area (every track).
  std::vector<std::pair<int32_t, uint32_t>> areaTracks;
};

// Panels below the timeline; kAllPanels is the tab order. --panel NAME picks one.
enum class PanelId { kStats, kCollectives, kDdp, kFsdp, kMemory, kLive, kWhatIf };
inline constexpr PanelId kAllPanels[] = {PanelId::kStats, PanelId::kCollectives, PanelId::kDdp,
                                         PanelId::kFsdp,  PanelId::kWhatIf,      PanelId::kMemory,
                                         PanelId::kLive};
const char* panelName(PanelId id);  // "stats", "collectives", ...
bool parsePanelName(const std::string& name, PanelId* out);

// A stretch of time marked over one rank's rows of the timeline (the What-if panel's
// critical path): a tinted band with an outline in `color`.
struct RankBand {
  int32_t rank = 0;
  int64_t beginNs = 0, endNs = 0;
  uint32_t color = 0;  // ImU32
  std::string label;
};

// A track by what names it across loads: its rank and its name.
struct TrackId {
  int32_t rank = 0;
  std::string track;
  bool operator<(const TrackId& o) const {
    return rank != o.rank ? rank < o.rank : track < o.track;
  }
  bool operator==(const TrackId& o) const { return rank == o.rank && track == o.track; }
};

// How the person arranged the timeline's tracks (saved in the workspace beside the trace):
// pinned ones stay on top, in this order, while the rest scroll; hidden ones are not drawn;
// with a filter, only the tracks whose name matches it (a case-insensitive regular expression,
// or a substring where it is not one) and their ranks' headers are; ranks in the order they
// were moved to (within a host's lane, above 32 ranks).
struct TrackArrangement {
  std::vector<TrackId> pinned;
  std::set<TrackId> hidden;
  std::string filter;
  // Ranks as the person ordered them (empty: by rank); ranks it lacks follow, by rank.
  std::vector<int32_t> rankOrder;
  // `ranks` in the arranged order.
  std::vector<int32_t> arranged(std::vector<int32_t> ranks) const;
  // Moves `rank` by `by` places among `ranks` (negative: up), or to the top (kToTop).
  static constexpr int kToTop = -(1 << 30);
  void moveRank(int32_t rank, int by, const std::vector<int32_t>& ranks);
  bool isPinned(const TrackId& id) const {
    return std::find(pinned.begin(), pinned.end(), id) != pinned.end();
  }
  void togglePin(const TrackId& id) {
    auto it = std::find(pinned.begin(), pinned.end(), id);
    if (it == pinned.end()) {
      pinned.push_back(id);
    } else {
      pinned.erase(it);
    }
  }
  // Moves a pinned track up (-1) or down (+1) among the pinned.
  void movePinned(const TrackId& id, int by) {
    auto it = std::find(pinned.begin(), pinned.end(), id);
    if (it == pinned.end()) return;
    const auto at = it - pinned.begin();
    const auto to = std::clamp<std::ptrdiff_t>(at + by, 0, std::ptrdiff_t(pinned.size()) - 1);
    std::swap(pinned[size_t(at)], pinned[size_t(to)]);
  }
};

// Shared by the panels during one frame.
struct ViewState {
  TimeView time;
  Selection selection;
  ViewerSettings settings;
  PanelId panel = PanelId::kStats;
  bool hasCursor = false;       // the mouse is over a time axis
  int64_t cursorTime = 0;       // ... at this time: the other panels draw a line there
  bool panelRequested = false;  // a panel asked to be brought to front (jump links)
  bool timeRangeInitialised = false;
  // The search box's current match: the timeline outlines it, and scrolls its
  // rows to it once when revealSearchHit is set.
  EventRef searchHit;
  bool revealSearchHit = false;
  // Aggregate lanes shown expanded into their ranks, by label (the host).
  std::set<std::string> expandedGroups;
  // Drawn over the timeline's rows (the What-if panel's critical path; empty: none).
  std::vector<RankBand> bands;
  // Events outlined on the timeline (a duration histogram's chosen bin; empty: none).
  std::vector<EventRef> highlighted;
  TrackArrangement tracks;
  // Scroll the timeline's rows to this track once (the Ctrl+P finder); rank -1: none. Its
  // track name empty: the rank's header.
  TrackId revealTrack{-1, ""};
};

}  // namespace ringx::viewer
