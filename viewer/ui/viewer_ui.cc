// The window layout, menus and the live panel (see viewer_ui.h).
#include "viewer/ui/viewer_ui.h"

#include <imgui.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "base/error.h"
#include "base/text.h"
#include "viewer/ui/keys.h"
#include "viewer/ui/style.h"

namespace ringx::viewer {

void ViewerUi::frame(const TraceStore& store, ViewState& view, const LiveSource* live,
                     const std::vector<std::string>& recent, UiActions& actions) {
  const ImGuiIO& io = ImGui::GetIO();
  ImGui::SetNextWindowPos(ImVec2(0, 0));
  ImGui::SetNextWindowSize(io.DisplaySize);
  ImGui::PushStyleVar(ImGuiStyleVar_WindowRounding, 0);
  ImGui::Begin("ringx-viewer", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove |
                   ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_MenuBar |
                   ImGuiWindowFlags_NoScrollWithMouse);
  ImGui::PopStyleVar();
  menuBar(live, recent, actions);
  popups(actions);
  if (!message_.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, messageIsError_ ? IM_COL32(255, 110, 100, 255)
                                                         : IM_COL32(160, 220, 160, 255));
    ImGui::TextWrapped("%s", message_.c_str());
    ImGui::PopStyleColor();
  }
  // Hover state is rebuilt every frame by whichever axis the mouse is over.
  view.hasCursor = false;
  if (live && view.settings.followLive) follow(store, view);
  const TimeView before = view.time;
  followTurnedOn_ = false;
  toolRow(store, view, live);
  whatIf_.prepare(store, view, live != nullptr);  // its critical path goes on the timeline
  const float timelineHeight = (ImGui::GetContentRegionAvail().y) * timelineShare_;
  ImGui::BeginChild("##timeline", ImVec2(0, timelineHeight), false,
                    ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  if (store.empty() && !live)
    ImGui::TextWrapped(
        "No trace open. File > Open trace... (a ringx trace directory, a .ringx "
        "file or a Chrome trace .json), or File > Attach to a running job.");
  else
    timeline_.draw(store, view);
  ImGui::EndChild();

  if (ImGui::BeginTabBar("##panels")) {
    for (PanelId id : kAllPanels) {
      static const char* kTitles[] = {"Statistics", "Collectives", "DDP",    "FSDP",
                                      "Memory",     "Live",        "What if"};  // by PanelId
      ImGuiTabItemFlags flags = 0;
      if ((firstFrame_ || view.panelRequested) && id == view.panel)
        flags |= ImGuiTabItemFlags_SetSelected;
      if (ImGui::BeginTabItem(kTitles[int(id)], nullptr, flags)) {
        shownPanel_ = id;
        switch (id) {
          case PanelId::kStats:
            stats_.draw(store, view);
            break;
          case PanelId::kCollectives:
            collectives_.draw(store, view);
            break;
          case PanelId::kDdp:
            ddp_.draw(store, view);
            break;
          case PanelId::kFsdp:
            fsdp_.draw(store, view);
            break;
          case PanelId::kWhatIf:
            whatIf_.draw(store, view);
            break;
          case PanelId::kMemory:
            memory_.draw(store, view);
            break;
          case PanelId::kLive:
            livePanel(live, view, actions);
            break;
        }
        ImGui::EndTabItem();
      }
    }
    ImGui::EndTabBar();
  }
  // The user moved the time axis: follow mode yields to them.
  if (live && !followTurnedOn_ && !(view.time == before)) view.settings.followLive = false;
  if (!view.panelRequested || shownPanel_ == view.panel) view.panelRequested = false;
  if (!firstFrame_ && !view.panelRequested) view.panel = shownPanel_;
  firstFrame_ = false;
  ImGui::End();
  // "?" (the character, whatever the keyboard layout) lists every key (keys.h).
  if (!io.WantTextInput) {
    for (int i = 0; i < io.InputQueueCharacters.Size; ++i)
      if (io.InputQueueCharacters[i] == '?') keyHelp_ = !keyHelp_;
  }
  drawKeyHelp(&keyHelp_);
  if (io.KeyCtrl && ImGui::IsKeyPressed('P', false)) {
    finderOpen_ = true;
    finderFocus_ = true;
    finderBuffer_[0] = '\0';
  }
  finder(store, view);
}

std::vector<std::pair<std::string, TrackId>> ViewerUi::finderMatches(const TraceStore& store,
                                                                     const std::string& query,
                                                                     size_t limit) {
  std::vector<std::pair<std::string, TrackId>> out;
  for (const RankData& rank : store.ranks()) {
    const std::string label = rank.host.empty() ? strCat("rank ", rank.rank)
                                                : strCat("rank ", rank.rank, " (", rank.host, ")");
    if (containsIgnoringCase(label, query)) out.push_back({label, TrackId{rank.rank, ""}});
    for (const Track& track : rank.tracks) {
      const std::string text = strCat("rank ", rank.rank, ": ", store.str(track.name));
      if (containsIgnoringCase(text, query)) {
        out.push_back({text, TrackId{rank.rank, std::string(store.str(track.name))}});
      }
      if (out.size() >= limit) return out;
    }
  }
  return out;
}

void ViewerUi::finder(const TraceStore& store, ViewState& view) {
  if (!finderOpen_) return;
  ImGui::SetNextWindowSize(ImVec2(480, 320), ImGuiCond_FirstUseEver);
  if (!ImGui::Begin("Find a track or rank (Ctrl+P)", &finderOpen_)) {
    ImGui::End();
    return;
  }
  if (finderFocus_) {
    ImGui::SetKeyboardFocusHere();
    finderFocus_ = false;
  }
  const bool enter =
      ImGui::InputTextWithHint("##finder", "rank 3, comm:world, bucket ...", finderBuffer_,
                               sizeof finderBuffer_, ImGuiInputTextFlags_EnterReturnsTrue);
  const auto matches = finderMatches(store, finderBuffer_, 200);
  auto go = [&](const TrackId& id) {
    view.revealTrack = id;
    finderOpen_ = false;
  };
  if (enter && !matches.empty()) go(matches.front().second);
  for (const auto& [text, id] : matches)
    if (ImGui::Selectable(text.c_str())) go(id);
  if (ImGui::IsKeyPressed(kKeyEscape, false)) finderOpen_ = false;
  ImGui::End();
}

void ViewerUi::follow(const TraceStore& store, ViewState& view) {
  view.time.follow(store.beginNs(), store.endNs(),
                   std::llround(double(view.settings.followWindowSeconds) * 1e9));
}

void ViewerUi::toolRow(const TraceStore& store, ViewState& view, const LiveSource* live) {
  search_.draw(store, view);
  // The tracks filter (a regular expression, or a substring where it is not one).
  ImGui::SameLine(0, 30);
  if (view.tracks.filter != filterBuffer_) {
    std::snprintf(filterBuffer_, sizeof filterBuffer_, "%s", view.tracks.filter.c_str());
  }
  ImGui::SetNextItemWidth(200);
  if (ImGui::InputTextWithHint("##trackFilter", "tracks: name or regex", filterBuffer_,
                               sizeof filterBuffer_)) {
    view.tracks.filter = filterBuffer_;
  }
  if (ImGui::IsItemHovered()) {
    ImGui::SetTooltip(
        "show only the tracks whose name matches (case-insensitive); right-click a track's "
        "name to pin or hide it; Ctrl+P finds a track or rank");
  }
  ImGui::SameLine(0, 30);
  ImGui::Checkbox("All arrows", &view.settings.allFlows);
  if (ImGui::IsItemHovered()) {
    ImGui::SetTooltip("draw every flow arrow in view; off: only the hovered or selected event's");
  }
  if (!live) return;
  ImGui::SameLine(0, 30);
  bool follow = view.settings.followLive;
  // End turns follow back on (as End goes to the end of a document), unless a
  // text field has the keyboard.
  const bool end =
      !ImGui::GetIO().WantTextInput && ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_End), false);
  if (ImGui::Checkbox("Follow", &follow) || end) {
    view.settings.followLive = follow || end;
    if (view.settings.followLive) {
      followTurnedOn_ = true;
      this->follow(store, view);
    }
  }
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("show the newest data as it arrives (End); a pan or zoom stops it");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(90);
  float seconds = view.settings.followWindowSeconds;
  if (ImGui::InputFloat("s window", &seconds, 1.0f, 10.0f, "%.1f"))
    view.settings.followWindowSeconds = std::clamp(seconds, 0.01f, 3600.0f);
}

void ViewerUi::menuBar(const LiveSource* live, const std::vector<std::string>& recent,
                       UiActions& actions) {
  if (!ImGui::BeginMenuBar()) return;
  if (ImGui::BeginMenu("File")) {
    if (ImGui::MenuItem("Open trace...")) openPopup_ = true;
    if (ImGui::MenuItem("Attach to a running job...")) attachPopup_ = true;
    if (ImGui::BeginMenu("Recent", !recent.empty())) {
      for (const std::string& r : recent) {
        if (ImGui::MenuItem(r.c_str())) {
          if (r.rfind("attach:", 0) == 0)
            actions.attach = r.substr(7);
          else
            actions.open = r;
        }
      }
      ImGui::EndMenu();
    }
    if (ImGui::MenuItem("Detach", nullptr, false, live != nullptr)) actions.detach = true;
    ImGui::Separator();
    if (ImGui::MenuItem("Quit")) actions.quit = true;
    ImGui::EndMenu();
  }
  if (live) ImGui::TextDisabled("  live: %s", live->stateText().c_str());
  ImGui::EndMenuBar();
}

void ViewerUi::popups(UiActions& actions) {
  if (openPopup_) {
    ImGui::OpenPopup("Open trace");
    openPopup_ = false;
  }
  if (attachPopup_) {
    ImGui::OpenPopup("Attach");
    attachPopup_ = false;
  }
  if (ImGui::BeginPopupModal("Open trace", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
    ImGui::TextUnformatted("A ringx trace directory, a rank-N.ringx file or a Chrome trace .json:");
    ImGui::SetNextItemWidth(520);
    const bool enter = ImGui::InputText("##path", pathBuffer_, sizeof pathBuffer_,
                                        ImGuiInputTextFlags_EnterReturnsTrue);
    if ((ImGui::Button("Open") || enter) && pathBuffer_[0]) {
      actions.open = pathBuffer_;
      ImGui::CloseCurrentPopup();
    }
    ImGui::SameLine();
    if (ImGui::Button("Cancel")) ImGui::CloseCurrentPopup();
    ImGui::EndPopup();
  }
  if (ImGui::BeginPopupModal("Attach", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
    ImGui::TextUnformatted("Rank 0's live trace address (RINGX_TRACE_LISTEN), HOST:PORT:");
    ImGui::SetNextItemWidth(300);
    ImGui::InputText("address", attachBuffer_, sizeof attachBuffer_);
    ImGui::SetNextItemWidth(300);
    ImGui::InputText("token", tokenBuffer_, sizeof tokenBuffer_, ImGuiInputTextFlags_Password);
    if (ImGui::Button("Attach") && attachBuffer_[0]) {
      actions.attach = attachBuffer_;
      actions.attachToken = tokenBuffer_;
      ImGui::CloseCurrentPopup();
    }
    ImGui::SameLine();
    if (ImGui::Button("Cancel")) ImGui::CloseCurrentPopup();
    ImGui::EndPopup();
  }
}

void ViewerUi::livePanel(const LiveSource* live, ViewState& view, UiActions& actions) {
  if (!live) {
    ImGui::TextWrapped(
        "Not attached. Start a job with RINGX_TRACE_LISTEN=HOST:PORT (and "
        "RINGX_TRACE_TOKEN), then File > Attach, or run ringx-viewer --attach "
        "HOST:PORT.");
    return;
  }
  ImGui::Text("%s: %s", live->hostPort().c_str(), live->stateText().c_str());
  ImGui::Checkbox("follow the newest data", &view.settings.followLive);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(260);
  ImGui::InputText("##save", saveBuffer_, sizeof saveBuffer_);
  ImGui::SameLine();
  if (ImGui::Button("Save received trace") && saveBuffer_[0]) actions.saveDir = saveBuffer_;
  if (!ImGui::BeginTable("##ranks", 7, ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders)) return;
  for (const char* h : {"rank", "endpoint", "state", "events", "bytes", "reconnects", "message"})
    ImGui::TableSetupColumn(h);
  ImGui::TableHeadersRow();
  for (const LiveRankStatus& r : live->status()) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::Text("%d", r.rank);
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(r.endpoint.c_str());
    ImGui::TableNextColumn();
    const ImU32 color = r.state == LiveRankStatus::kConnected    ? IM_COL32(120, 220, 120, 255)
                        : r.state == LiveRankStatus::kConnecting ? IM_COL32(230, 200, 90, 255)
                                                                 : IM_COL32(255, 110, 100, 255);
    ImGui::PushStyleColor(ImGuiCol_Text, color);
    ImGui::TextUnformatted(liveStateName(r.state));
    ImGui::PopStyleColor();
    if (r.summary) {
      ImGui::SameLine();
      ImGui::TextDisabled("(summary)");  // collectives and steps only
    }
    ImGui::TableNextColumn();
    ImGui::Text("%llu", (unsigned long long)r.events);
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(formatBytes(double(r.bytes)).c_str());
    ImGui::TableNextColumn();
    ImGui::Text("%d", r.reconnects);
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(r.message.c_str());
  }
  ImGui::EndTable();
}

}  // namespace ringx::viewer
