// The DDP and FSDP panels on CPU jobs' torch.profiler traces (hand-made, with known answers:
// tests/cpp/profiled_ddp_trace.h, profiled_fsdp_trace.h): the buckets and units recovered
// from the profile fill them, where the panels had said the trace held no engine.
#include <gtest/gtest.h>

#include "tests/cpp/profiled_fsdp_trace.h"
#include "tests/cpp/viewer/ui/ui_harness.h"
#include "viewer/ui/ddp_panel.h"
#include "viewer/ui/fsdp_panel.h"

namespace ringx::viewer {
namespace {

TEST(EnginePanelsProfiled, TorchDdpsBucketsFillTheDdpPanel) {
  const TraceStore store = ringx::testing::storeOf(ringx::testing::profiledDdpJob());
  testing::HeadlessImGui gui;
  DdpPanel panel;
  ViewState view;
  gui.frame([&] { panel.draw(store, view); });
  EXPECT_EQ(panel.analysis().iterations.size(), 6u);  // three steps of two ranks
  ASSERT_EQ(panel.analysis().buckets.size(), 2u);
  EXPECT_EQ(panel.analysis().buckets[1].exposedMeanNs, 960'000);
  // The iterations' breakdown bars: forward green, backward blue, exposed red.
  EXPECT_TRUE(gui.drew(IM_COL32(52, 168, 83, 255)));
  EXPECT_TRUE(gui.drew(IM_COL32(66, 133, 244, 255)));
  EXPECT_TRUE(gui.drew(IM_COL32(229, 57, 53, 255)));
}

TEST(EnginePanelsProfiled, AProfileWithoutShapesSaysWhatToTurnOn) {
  const TraceStore store = ringx::testing::storeOf(ringx::testing::profiledDdpJob(false));
  testing::HeadlessImGui gui;
  DdpPanel panel;
  ViewState view;
  gui.frame([&] { panel.draw(store, view); });
  EXPECT_EQ(panel.analysis().iterations.size(), 0u);
  EXPECT_NE(panel.notRecovered().find("record_shapes=True"), std::string::npos)
      << panel.notRecovered();
}

TEST(EnginePanelsProfiled, Fsdp2sUnitsFillTheFsdpPanel) {
  const TraceStore store = ringx::testing::storeOf(ringx::testing::profiledFsdpJob());
  testing::HeadlessImGui gui;
  FsdpPanel panel;
  ViewState view;
  gui.frame([&] { panel.draw(store, view); });
  ASSERT_EQ(panel.analysis().units.size(), 3u);
  EXPECT_EQ(panel.analysis().units[1].unit, "layers.0");
  EXPECT_EQ(panel.analysis().iterations.size(), 6u);
  // Each unit's gather wire (orange) and the compute's wait for it (red).
  EXPECT_TRUE(gui.drew(IM_COL32(255, 167, 38, 255)));
  EXPECT_TRUE(gui.drew(IM_COL32(229, 57, 53, 255)));
}

}  // namespace
}  // namespace ringx::viewer
