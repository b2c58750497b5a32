// The whole window: a menu bar (File: open a trace, attach to a job, recent
// files, save what a live job sent), a tool row (the search box; while
// attached, Follow and its window), the timeline, and a tab bar of panels below
// it (statistics, collectives, DDP, FSDP, what if, memory, live). The UI never loads or
// connects itself: it returns what the user asked for in UiActions and the app
// does it, so panels stay testable without I/O.
//
// Follow mode (attached only): each frame shows the newest
// settings.followWindowSeconds of the store; anything in the frame that moves
// the time axis (a pan, a zoom, a jump from a panel or the search box) turns it
// off, and the Follow box or the End key turns it back on.
#pragma once

#include <string>
#include <vector>

#include "trace/model/live_source.h"
#include "viewer/ui/collectives_panel.h"
#include "viewer/ui/ddp_panel.h"
#include "viewer/ui/fsdp_panel.h"
#include "viewer/ui/memory_panel.h"
#include "viewer/ui/search_bar.h"
#include "viewer/ui/stats_panel.h"
#include "viewer/ui/timeline_panel.h"
#include "viewer/ui/view_state.h"
#include "viewer/ui/whatif_panel.h"

namespace ringx::viewer {
// The viewer draws the trace model (trace/model/); its names are used unqualified here.
using namespace ringx::model;

// What the user asked for this frame (empty: nothing).
struct UiActions {
  std::string open;    // a trace path to open (replacing what is shown)
  std::string attach;  // HOST:PORT to attach to
  std::string attachToken;
  std::string saveDir;  // save what the live job sent to this directory
  bool detach = false;
  bool quit = false;
};

class ViewerUi {
 public:
  // Draws one frame covering the whole display. `live` is null when not attached.
  void frame(const TraceStore& store, ViewState& view, const LiveSource* live,
             const std::vector<std::string>& recent, UiActions& actions);
  // A line shown under the menu bar (load errors, "saved to ...").
  void setMessage(std::string message, bool error) {
    message_ = std::move(message);
    messageIsError_ = error;
  }
  // Fraction of the window's height given to the timeline.
  void setTimelineShare(float share) { timelineShare_ = share; }

  TimelinePanel& timeline() { return timeline_; }
  MemoryPanel& memory() { return memory_; }
  StatsPanel& stats() { return stats_; }
  CollectivesPanel& collectives() { return collectives_; }
  DdpPanel& ddp() { return ddp_; }
  FsdpPanel& fsdp() { return fsdp_; }
  WhatIfPanel& whatIf() { return whatIf_; }
  SearchBar& search() { return search_; }
  const TimelinePanel& timeline() const { return timeline_; }
  bool keyHelpOpen() const { return keyHelp_; }
  // The Ctrl+P finder: a track or rank by name, scrolled to.
  bool finderOpen() const { return finderOpen_; }
  // Its matches for `query` ("rank 3", "rank 3: comm:world"), at most `limit`.
  static std::vector<std::pair<std::string, TrackId>> finderMatches(const TraceStore& store,
                                                                    const std::string& query,
                                                                    size_t limit);

 private:
  void menuBar(const LiveSource* live, const std::vector<std::string>& recent, UiActions& actions);
  void popups(UiActions& actions);
  void livePanel(const LiveSource* live, ViewState& view, UiActions& actions);
  void toolRow(const TraceStore& store, ViewState& view, const LiveSource* live);
  void follow(const TraceStore& store, ViewState& view);

  TimelinePanel timeline_;
  MemoryPanel memory_;
  StatsPanel stats_;
  CollectivesPanel collectives_;
  DdpPanel ddp_;
  FsdpPanel fsdp_;
  WhatIfPanel whatIf_;
  SearchBar search_;
  float timelineShare_ = 0.58f;
  std::string message_;
  bool messageIsError_ = false;
  bool openPopup_ = false, attachPopup_ = false;
  char pathBuffer_[1024] = {};
  char attachBuffer_[256] = {};
  char tokenBuffer_[256] = {};
  char saveBuffer_[1024] = "ringx-live-trace";
  PanelId shownPanel_ = PanelId::kStats;
  bool firstFrame_ = true;
  bool followTurnedOn_ = false;  // this frame: its own view change is no user pan
  bool keyHelp_ = false;         // the "?" window (keys.h)
  void finder(const TraceStore& store, ViewState& view);
  bool finderOpen_ = false, finderFocus_ = false;
  char finderBuffer_[256] = {};
  char filterBuffer_[256] = {};
};

}  // namespace ringx::viewer
