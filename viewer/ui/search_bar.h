// The search box over the timeline: find events by name or argument value
// (trace/model/event_search.h has the query forms) and step through them.
//
// Keys as in browsers and Perfetto: Ctrl+F focuses the box, Enter or F3 goes to
// the next match, Shift+Enter or Shift+F3 to the previous one ("k of N
// matches"). Going to a match centres the timeline on it, zooms so that it is
// between a twentieth and a third of the view (visible, not folded, with its
// neighbours around it), scrolls its rank's rows into view, selects it and has
// the timeline outline it. The first step goes to the first match at or after
// the view's left edge (or, backwards, the last before its right edge). "list" opens every
// match in a window, in time order, to go to any of them with a click.
//
// The scan runs a bounded number of events per frame while the user types; a
// step asked for before it is done finishes it first.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "trace/model/event_search.h"
#include "trace/model/trace_store.h"
#include "viewer/ui/view_state.h"

namespace ringx::viewer {
// The viewer draws the trace model (trace/model/); its names are used unqualified here.
using namespace ringx::model;

class SearchBar {
 public:
  // Events scanned per frame while a search runs (a few milliseconds).
  static constexpr size_t kScanPerFrame = 2000000;
  // io.KeysDown is indexed by GLFW's key codes (imgui_impl_glfw in 1.86 has no
  // ImGuiKey for F3): GLFW_KEY_F3.
  static constexpr int kKeyF3 = 292;

  // Draws the box, its buttons and the match count on the current line, and
  // handles the keys.
  void draw(const TraceStore& store, ViewState& view);
  // Puts `text` in the box and goes to its first match in the next draw (--search).
  void request(std::string_view text);

  // The results list (a window of every match, in time order; a click goes to it).
  bool listOpen() const { return listOpen_; }
  void setListOpen(bool open) { listOpen_ = open; }
  // Goes to match k of search().matches(), as a step would.
  void goTo(const TraceStore& store, ViewState& view, int64_t k);

  void next(const TraceStore& store, ViewState& view) { step(store, view, +1); }
  void previous(const TraceStore& store, ViewState& view) { step(store, view, -1); }

  const EventSearch& search() const { return search_; }
  // Index of the match shown (in search().matches()), or -1.
  int64_t current() const { return current_; }
  // "k of N matches", "N matches", "no matches", "searching ..." ("" without a query).
  std::string statusText() const;

 private:
  void step(const TraceStore& store, ViewState& view, int direction);
  void show(const TraceStore& store, ViewState& view) const;
  void relocate(ViewState& view);
  void drawList(const TraceStore& store, ViewState& view);

  char buffer_[256] = {};
  EventSearch search_;
  uint64_t seenRestarts_ = 0;
  int64_t current_ = -1;
  bool focusBox_ = false;
  bool listOpen_ = false;
  bool pendingNext_ = false;
};

}  // namespace ringx::viewer
