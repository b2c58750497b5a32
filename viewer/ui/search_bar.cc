// The search box (see search_bar.h).
#include "viewer/ui/search_bar.h"

#include <imgui.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "viewer/ui/style.h"

namespace ringx::viewer {

void SearchBar::request(std::string_view text) {
  const size_t n = std::min(text.size(), sizeof buffer_ - 1);
  std::memcpy(buffer_, text.data(), n);
  buffer_[n] = '\0';
  pendingNext_ = true;
}

std::string SearchBar::statusText() const {
  if (!search_.active()) return "";
  char text[96];
  if (!search_.done()) {
    std::snprintf(text, sizeof text, "searching... %zu so far", search_.matches().size());
  } else if (search_.matches().empty()) {
    return "no matches";
  } else if (current_ < 0) {
    std::snprintf(text, sizeof text, "%zu matches", search_.matches().size());
  } else {
    std::snprintf(text, sizeof text, "%lld of %zu matches", static_cast<long long>(current_ + 1),
                  search_.matches().size());
  }
  return text;
}

void SearchBar::draw(const TraceStore& store, ViewState& view) {
  const ImGuiIO& io = ImGui::GetIO();
  if (io.KeyCtrl && ImGui::IsKeyPressed('F', false)) focusBox_ = true;
  if (focusBox_) {
    ImGui::SetKeyboardFocusHere();
    focusBox_ = false;
  }
  ImGui::SetNextItemWidth(320);
  const bool enter =
      ImGui::InputTextWithHint("##search", "find (Ctrl+F): name, arg value, key=value", buffer_,
                               sizeof buffer_, ImGuiInputTextFlags_EnterReturnsTrue);
  // Typing restarts the search; every frame scans a bounded slice of it.
  if (search_.text() != buffer_) {
    search_.start(store, buffer_);
    view.searchHit = EventRef{};
  }
  search_.advance(store, kScanPerFrame);
  relocate(view);
  bool forward = false, backward = false;
  if (enter) {
    (io.KeyShift ? backward : forward) = true;
    // Enter leaves the box: take it back at once (the request lands next
    // frame), so the next Enter steps again.
    ImGui::SetKeyboardFocusHere(-1);
  }
  if (ImGui::IsKeyPressed(kKeyF3)) (io.KeyShift ? backward : forward) = true;
  ImGui::SameLine();
  if (ImGui::ArrowButton("##previous", ImGuiDir_Left)) backward = true;
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("previous match (Shift+Enter, Shift+F3)");
  ImGui::SameLine();
  if (ImGui::ArrowButton("##next", ImGuiDir_Right)) forward = true;
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("next match (Enter, F3)");
  if (pendingNext_) {
    forward = true;
    pendingNext_ = false;
  }
  if (forward) next(store, view);
  if (backward) previous(store, view);
  const std::string status = statusText();
  if (!status.empty()) {
    ImGui::SameLine();
    if (search_.done() && search_.matches().empty())
      ImGui::TextColored(ImVec4(1.0f, 0.45f, 0.4f, 1.0f), "%s", status.c_str());
    else
      ImGui::TextUnformatted(status.c_str());
    ImGui::SameLine();
    if (ImGui::SmallButton(listOpen_ ? "hide list" : "list")) listOpen_ = !listOpen_;
  }
  if (listOpen_) drawList(store, view);
}

void SearchBar::goTo(const TraceStore& store, ViewState& view, int64_t k) {
  search_.finish(store);
  relocate(view);
  if (k < 0 || k >= int64_t(search_.matches().size())) return;
  current_ = k;
  show(store, view);
}

void SearchBar::drawList(const TraceStore& store, ViewState& view) {
  ImGui::SetNextWindowSize(ImVec2(640, 360), ImGuiCond_FirstUseEver);
  if (!ImGui::Begin("Search results", &listOpen_)) {
    ImGui::End();
    return;
  }
  ImGui::Text("%s for \"%s\"", statusText().c_str(), buffer_);
  const auto& matches = search_.matches();
  if (ImGui::BeginTable(
          "##results", 5,
          ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_Resizable)) {
    ImGui::TableSetupScrollFreeze(0, 1);
    for (const char* h : {"at", "duration", "rank", "track", "name"}) ImGui::TableSetupColumn(h);
    ImGui::TableHeadersRow();
    ImGuiListClipper clipper;
    clipper.Begin(int(matches.size()));
    while (clipper.Step()) {
      for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
        const SearchMatch& m = matches[size_t(i)];
        const RankData* rank = store.findRank(m.rank);
        if (rank == nullptr || m.track >= int32_t(rank->tracks.size())) continue;
        const Track& track = rank->tracks[size_t(m.track)];
        const uint32_t name = m.level >= 0 ? track.levels[size_t(m.level)][m.index].name
                                           : track.instants[m.index].name;
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::PushID(i);
        if (ImGui::Selectable(formatNs(m.begin - store.beginNs()).c_str(), i == current_,
                              ImGuiSelectableFlags_SpanAllColumns)) {
          goTo(store, view, i);
        }
        ImGui::PopID();
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(formatNs(m.end - m.begin).c_str());
        ImGui::TableNextColumn();
        ImGui::Text("%d", m.rank);
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(std::string(store.str(track.name)).c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(std::string(store.str(name)).c_str());
      }
    }
    ImGui::EndTable();
  }
  ImGui::End();
}

void SearchBar::step(const TraceStore& store, ViewState& view, int direction) {
  if (!search_.active()) return;
  search_.finish(store);
  relocate(view);
  const int64_t n = static_cast<int64_t>(search_.matches().size());
  if (n == 0) return;
  if (current_ < 0 || current_ >= n)
    current_ =
        direction > 0 ? search_.firstAtOrAfter(view.time.t0) : search_.lastAtOrBefore(view.time.t1);
  else
    current_ = (current_ + direction + n) % n;
  show(store, view);
}

// Matches start over with a new query and whenever a live store changed under
// the search; the match shown keeps its place in the second case once found again.
void SearchBar::relocate(ViewState& view) {
  if (search_.restarts() != seenRestarts_) {
    seenRestarts_ = search_.restarts();
    current_ = -1;
  }
  if (current_ >= 0 || !search_.done() || !view.searchHit.valid()) return;
  const EventRef& hit = view.searchHit;
  const auto& matches = search_.matches();
  for (size_t i = 0; i < matches.size(); ++i) {
    const SearchMatch& m = matches[i];
    if (m.rank == hit.rank && m.track == hit.track && m.level == hit.level &&
        int64_t(m.index) == hit.index) {
      current_ = int64_t(i);
      return;
    }
  }
  view.searchHit = EventRef{};  // no longer a match
}

void SearchBar::show(const TraceStore& store, ViewState& view) const {
  const SearchMatch& m = search_.matches()[static_cast<size_t>(current_)];
  // Zoom so that the match is between a twentieth and a third of the view:
  // wide enough not to fold into a block, narrow enough to show what is around
  // it. An instant keeps the zoom, up to a millisecond.
  const int64_t duration = m.end - m.begin;
  int64_t span = view.time.span();
  span = duration > 0 ? std::clamp(span, 3 * duration, 20 * duration)
                      : std::min<int64_t>(span, 1000000);
  span = std::max<int64_t>(span, 1000);
  const int64_t middle = m.begin + duration / 2;
  view.time.t0 = middle - span / 2;
  view.time.t1 = view.time.t0 + span;
  view.searchHit = EventRef{m.rank, m.track, m.level, int64_t(m.index)};
  view.revealSearchHit = true;
  // Selected as a click would: the statistics panel shows its name.
  view.selection.event = view.searchHit;
  const RankData* rank = store.findRank(m.rank);
  if (rank && m.track < int32_t(rank->tracks.size())) {
    const Track& track = rank->tracks[size_t(m.track)];
    view.selection.nameId =
        m.level >= 0 ? track.levels[size_t(m.level)][m.index].name : track.instants[m.index].name;
  }
}

}  // namespace ringx::viewer
