// The collectives panel on an NCCL job's profiler traces (8 ranks of DLRM, from
// ../shared/traces/nccl/): its kernels are collectives matched across ranks, drawn headless with
// their skew and last arrival, where the panel had said there were none.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "tests/cpp/shared_traces.h"
#include "tests/cpp/viewer/ui/ui_harness.h"
#include "trace/model/loader.h"
#include "viewer/ui/collectives_panel.h"

namespace ringx::viewer {
using namespace ringx::model;
namespace {

TEST(CollectivesPanelNccl, AnNcclJobsProfilerTracesFillThePanel) {
  std::vector<std::string> files;
  for (const auto& e :
       std::filesystem::directory_iterator(ringx::testing::sharedTrace("nccl/param_dlrm_8rank"))) {
    files.push_back(e.path().string());
  }
  TraceStore store;
  loadTraces(store, files);
  testing::HeadlessImGui gui;
  CollectivesPanel panel;
  ViewState view;
  gui.frame([&] { panel.draw(store, view); });
  ASSERT_EQ(panel.rows().size(), 8u);
  const auto worst = std::max_element(
      panel.rows().begin(), panel.rows().end(),
      [](const auto& a, const auto& b) { return a.arrivalSkewNs < b.arrivalSkewNs; });
  EXPECT_EQ(worst->arrivalSkewNs, 7'624'000);  // the first all-to-all: rank 7 arrived 7.6 ms late
  EXPECT_EQ(worst->lastArrivalRank, 7);
  EXPECT_EQ(worst->op, "alltoall");
  EXPECT_TRUE(panel.overview().hangSuspects.empty());
}

}  // namespace
}  // namespace ringx::viewer
