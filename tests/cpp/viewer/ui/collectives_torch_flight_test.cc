// The collectives panel on torch's own Flight Recorder dumps, drawn headless: the list above the
// table is the hang report's (what `ringx-trace why` prints of the same dumps), per group the
// collective that did not finish and the ranks that did not reach it or called something else,
// each line a jump to the collective's row.
#include <gtest/gtest.h>

#include <string>

#include "analysis/hang_report.h"
#include "tests/cpp/shared_traces.h"
#include "tests/cpp/trace/torch_flight_fixture.h"
#include "tests/cpp/trace/trace_fixture.h"
#include "tests/cpp/viewer/ui/ui_harness.h"
#include "trace/model/loader.h"
#include "viewer/ui/collectives_panel.h"

namespace ringx::viewer {
// The viewer draws the trace model (trace/model/); its names are used unqualified here.
using namespace ringx::model;
namespace {

namespace fx = trace::fixture;

// The panel's list after one frame of it.
std::vector<HangLine> linesOf(const TraceStore& store, CollectivesPanel& panel) {
  testing::HeadlessImGui gui;
  ViewState view;
  gui.frame([&] { panel.draw(store, view); });
  return panel.hangLines();
}

bool hasLine(const std::vector<HangLine>& lines, const std::string& text) {
  for (const HangLine& h : lines)
    if (h.text == text) return true;
  return false;
}

// Every line the panel shows is one `why` prints of the same dumps.
void expectLinesOfTheReport(const TraceStore& store, const std::vector<HangLine>& lines) {
  const std::string report = trace::formatHangReport(trace::analyzeTorchHang(*store.torchFlight()));
  for (const HangLine& h : lines)
    EXPECT_NE(report.find(h.text + "\n"), std::string::npos) << h.text << "\nnot in:\n" << report;
}

// A 4-rank gloo job where rank 1 called all_gather at the seq the others all_reduce; its dumps
// list no members. The rows' last seqs say nothing is missing; the report names rank 1.
TEST(CollectivesPanelTorchFlight, TheRankThatCalledSomethingElseIsNamed) {
  fx::TempDir dir;
  for (int32_t rank = 0; rank < 4; ++rank) {
    std::vector<fx::GlooCall> calls = fx::worldCalls(3);
    calls.push_back(
        {"0", "0", "default_pg", 4, rank == 1 ? "gloo:all_gather" : "gloo:all_reduce", true});
    fx::writeFile(dir.file("fr_trace_rank_" + std::to_string(rank) + ".json"),
                  fx::glooDump(rank, 4, {{"0", 4}}, calls));
  }
  TraceStore store;
  loadTraces(store, {dir.path()});
  CollectivesPanel panel;
  const std::vector<HangLine> lines = linesOf(store, panel);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0].text,
            "group '0 (default_pg)' (4 ranks, 4 dumped): all_reduce seq 4 (1.0 KiB, Float) did "
            "not finish on every rank");
  EXPECT_TRUE(lines[0].culprit);
  EXPECT_TRUE(hasLine(lines, "  called something else: rank 1"));
  EXPECT_TRUE(hasLine(lines, "  failed: ranks 0, 2, 3"));
  EXPECT_TRUE(hasLine(lines, "  rank 1: called something else (all_gather 1.0 KiB Float)"));
  // Only the culprit gets a line of its own.
  EXPECT_FALSE(hasLine(lines,
                       "  rank 0: failed: retired without completing: timed out or failed "
                       "(the dump keeps no error)"));
  expectLinesOfTheReport(store, lines);
  // Each line leads to the collective's row.
  for (const HangLine& h : lines) {
    ASSERT_GE(h.row, 0) << h.text;
    EXPECT_EQ(panel.rows()[size_t(h.row)].group, "0 (default_pg)");
    EXPECT_EQ(panel.rows()[size_t(h.row)].seq, 4);
    EXPECT_TRUE(panel.rows()[size_t(h.row)].mismatch);
  }
}

// The shared Megatron job's gpu_error_1st run: rank 12 never enqueued group 74's all_to_all seq
// 20537 (the expected analysis's row), nor the next collective of its four other groups; those
// groups come first, each naming rank 12 as never arrived, as `why` names it.
TEST(CollectivesPanelTorchFlight, TheNcclRunsCulpritsGroupsComeFirst) {
  TraceStore store;
  loadTraces(store, {ringx::testing::sharedTrace("fr/nvrx_megatron16/gpu_error_1st")});
  CollectivesPanel panel;
  const std::vector<HangLine> lines = linesOf(store, panel);
  const std::string title =
      "group '74 (EXPERT_MODEL_PARALLEL_GROUP)' (4 ranks, 4 dumped): all_to_all seq 20537 "
      "(39.33 MiB, BFloat16) did not finish on every rank";
  const HangLine* found = nullptr;
  bool culpritsDone = false;  // past the last group with a culprit
  size_t culpritGroups = 0;
  for (const HangLine& h : lines) {
    if (h.text.rfind("group '", 0) != 0) continue;
    EXPECT_FALSE(h.culprit && culpritsDone) << h.text;
    culpritsDone |= !h.culprit;
    culpritGroups += h.culprit;
    if (h.text == title) found = &h;
  }
  EXPECT_EQ(culpritGroups, 5u);
  ASSERT_NE(found, nullptr);
  EXPECT_TRUE(found->culprit);
  ASSERT_GE(found->row, 0);
  EXPECT_EQ(panel.rows()[size_t(found->row)].seq, 20537);
  EXPECT_EQ(panel.rows()[size_t(found->row)].group, "74 (EXPERT_MODEL_PARALLEL_GROUP)");
  EXPECT_TRUE(hasLine(lines,
                      "  rank 0 (process rank 12): never arrived (its last collective was "
                      "nccl:all_to_all seq 20536, issued)"));
  expectLinesOfTheReport(store, lines);
}

}  // namespace
}  // namespace ringx::viewer
