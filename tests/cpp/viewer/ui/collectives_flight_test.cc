// The collectives panel on flight recorder dumps: rows say which ranks were
// stuck in a collective or had it queued, and the panel draws them headless.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "tests/cpp/viewer/ui/ui_harness.h"
#include "trace/model/flight_ingest.h"
#include "viewer/ui/collectives_panel.h"

namespace ringx::viewer {
// The viewer draws the trace model (trace/model/); its names are used unqualified here.
using namespace ringx::model;
namespace {

using trace::FlightState;

trace::FlightEntry entry(int64_t seq, FlightState state) {
  trace::FlightEntry e;
  e.id = static_cast<uint64_t>(seq) + 1;
  e.seq = seq;
  e.op = "allreduce";
  e.state = state;
  e.bytes = 64;
  e.issueNs = 1000 * (seq + 1);
  if (state != FlightState::kIssued) e.startNs = e.issueNs + 10;
  if (state == FlightState::kFinished) e.endNs = e.startNs + 100;
  return e;
}

// Two ranks finished seq 0; rank 0 is stuck in seq 1 with seq 2 queued behind,
// rank 1 is stuck in seq 1 too.
TraceStore hungStore() {
  trace::FlightDumpSet set;
  for (int32_t r = 0; r < 2; ++r) {
    trace::FlightDump d;
    d.rank = r;
    d.worldSize = 2;
    d.steadyNs = 1'000'000;
    d.wallNs = 5'000'000;
    trace::FlightGroup g;
    g.name = "world";
    g.rank = r;
    g.size = 2;
    g.entries = {entry(0, FlightState::kFinished), entry(1, FlightState::kStarted)};
    if (r == 0) g.entries.push_back(entry(2, FlightState::kIssued));
    d.groups.push_back(g);
    set.dumps.push_back(d);
  }
  TraceStore store;
  ingestFlightDumps(store, set);
  store.finalize();
  return store;
}

TEST(CollectivesPanelFlight, RowsSayWhichRanksWereStuckOrQueued) {
  const TraceStore store = hungStore();
  const std::vector<analysis::CollectiveRow> rows = analysis::matchCollectives(store);
  ASSERT_EQ(rows.size(), 3u);
  std::map<int64_t, std::string> status;
  for (const analysis::CollectiveRow& r : rows) status[r.seq] = flightStatus(store, r);
  EXPECT_EQ(status[0], "");
  EXPECT_EQ(status[1], "stuck: ranks 0 1");
  EXPECT_EQ(status[2], "queued: rank 0");

  testing::HeadlessImGui gui;
  CollectivesPanel panel;
  ViewState view;
  gui.frame([&] { panel.draw(store, view); });
  EXPECT_EQ(panel.rows().size(), 3u);
  // Rank 1 never issued seq 2: the hang suspect.
  ASSERT_EQ(panel.overview().hangSuspects.size(), 1u);
  EXPECT_EQ(panel.overview().hangSuspects[0].rank, 1);
  EXPECT_EQ(panel.overview().hangSuspects[0].missingSeq, 2);
  // The list above the table is the suspects' (torch's dumps have the hang report's instead).
  ASSERT_EQ(panel.hangLines().size(), 1u);
  EXPECT_EQ(panel.hangLines()[0].text, panel.overview().hangSuspects[0].description);
  EXPECT_EQ(panel.hangLines()[0].row, panel.overview().hangSuspects[0].row);
}

TEST(CollectivesPanelFlight, TracedCollectivesHaveNoFlightStatus) {
  TraceStore store;
  analysis::CollectiveRow row;
  EXPECT_EQ(flightStatus(store, row), "");
}

}  // namespace
}  // namespace ringx::viewer
