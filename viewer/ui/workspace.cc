// The workspace beside a trace (workspace.h).
#include "viewer/ui/workspace.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace ringx::viewer {

std::string workspacePath(const std::vector<std::string>& inputs) {
  if (inputs.empty()) return "";
  std::error_code error;
  if (std::filesystem::is_directory(inputs.front(), error)) {
    return (std::filesystem::path(inputs.front()) / "ringx-workspace.json").string();
  }
  return inputs.front() + ".ringx-workspace.json";
}

std::string workspaceText(const ViewState& view, const TraceStore& store) {
  nlohmann::json j;
  auto list = [](const auto& tracks) {
    nlohmann::json out = nlohmann::json::array();
    for (const TrackId& t : tracks) out.push_back({{"rank", t.rank}, {"track", t.track}});
    return out;
  };
  j["pinned"] = list(view.tracks.pinned);
  j["hidden"] = list(view.tracks.hidden);
  j["filter"] = view.tracks.filter;
  j["rank_order"] = view.tracks.rankOrder;
  j["panel"] = panelName(view.panel);
  j["view_ns"] = {view.time.t0 - store.beginNs(), view.time.t1 - store.beginNs()};
  return j.dump(1) + "\n";
}

bool saveWorkspace(const std::string& path, const ViewState& view, const TraceStore& store) {
  if (path.empty()) return false;
  const std::string aside = path + ".tmp";
  {
    std::ofstream out(aside, std::ios::binary | std::ios::trunc);
    out << workspaceText(view, store);
    if (!out.flush()) return false;
  }
  std::error_code error;
  std::filesystem::rename(aside, path, error);
  return !error;
}

bool loadWorkspace(const std::string& path, ViewState& view, const TraceStore& store,
                   std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream text;
  text << in.rdbuf();
  try {
    const nlohmann::json j = nlohmann::json::parse(text.str());
    TrackArrangement tracks;
    for (const auto& t : j.value("pinned", nlohmann::json::array())) {
      tracks.pinned.push_back(
          TrackId{t.at("rank").get<int32_t>(), t.at("track").get<std::string>()});
    }
    for (const auto& t : j.value("hidden", nlohmann::json::array())) {
      tracks.hidden.insert(TrackId{t.at("rank").get<int32_t>(), t.at("track").get<std::string>()});
    }
    tracks.filter = j.value("filter", std::string());
    tracks.rankOrder = j.value("rank_order", std::vector<int32_t>());
    PanelId panel = view.panel;
    if (j.contains("panel") && !parsePanelName(j["panel"].get<std::string>(), &panel)) {
      panel = view.panel;
    }
    TimeView time = view.time;
    if (const auto v = j.find("view_ns"); v != j.end() && v->is_array() && v->size() == 2) {
      time.t0 = store.beginNs() + (*v)[0].get<int64_t>();
      time.t1 = store.beginNs() + (*v)[1].get<int64_t>();
      if (time.t1 <= time.t0) time = view.time;
    }
    view.tracks = std::move(tracks);
    view.panel = panel;
    view.panelRequested = true;
    view.time = time;
    return true;
  } catch (const std::exception& e) {
    if (error) *error = path + ": not a ringx-viewer workspace (" + e.what() + "); left alone";
    return false;
  }
}

}  // namespace ringx::viewer
