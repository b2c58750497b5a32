// The workspace beside a trace (viewer/ui/workspace.h): what a person arranged comes back.
#include "viewer/ui/workspace.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/cpp/trace/model/sample_store.h"

namespace ringx::viewer {
namespace {

TEST(Workspace, PinsHiddenFilterRankOrderPanelAndViewComeBack) {
  TraceStore store;
  model::testing::fillSampleStore(store);
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("ringx-workspace-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = workspacePath({dir.string()});
  EXPECT_EQ(path, (dir / "ringx-workspace.json").string());
  EXPECT_EQ(workspacePath({"/x/rank0.pt.trace.json"}),
            "/x/rank0.pt.trace.json.ringx-workspace.json");

  ViewState view;
  view.tracks.pinned = {TrackId{1, "comm:world"}, TrackId{0, "ddp:bucket1"}};
  view.tracks.hidden.insert(TrackId{0, "compute"});
  view.tracks.filter = "bucket|comm";
  view.tracks.rankOrder = {1, 0};
  view.panel = PanelId::kCollectives;
  view.time.t0 = store.beginNs() + 1000;
  view.time.t1 = store.beginNs() + 9000;
  ASSERT_TRUE(saveWorkspace(path, view, store));

  ViewState back;
  std::string error;
  ASSERT_TRUE(loadWorkspace(path, back, store, &error)) << error;
  EXPECT_EQ(back.tracks.pinned, view.tracks.pinned);  // in their order
  EXPECT_EQ(back.tracks.hidden, view.tracks.hidden);
  EXPECT_EQ(back.tracks.filter, view.tracks.filter);
  EXPECT_EQ(back.tracks.rankOrder, view.tracks.rankOrder);
  EXPECT_EQ(back.panel, PanelId::kCollectives);
  EXPECT_EQ(back.time, view.time);

  // A file that is not one is left alone, with what was wrong.
  std::ofstream(path) << "{not json";
  ViewState untouched;
  EXPECT_FALSE(loadWorkspace(path, untouched, store, &error));
  EXPECT_NE(error.find("not a ringx-viewer workspace"), std::string::npos) << error;
  EXPECT_TRUE(untouched.tracks.pinned.empty());
  EXPECT_FALSE(loadWorkspace((dir / "none.json").string(), untouched, store, &error));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ringx::viewer
