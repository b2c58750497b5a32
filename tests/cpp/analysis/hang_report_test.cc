// Flight recorder dumps and the hang report over hand-made dumps: a rank that
// never arrived, a stuck one, a rank with no dump, one that arrived after the
// others gave up, a mismatch, files of another job or cut short, no dumps at
// all; and `ringx-trace why` on them.
#include "analysis/hang_report.h"

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>

#include "tests/cpp/trace/trace_fixture.h"

namespace ringx::trace {
namespace {

using fixture::TempDir;

constexpr int64_t kMs = 1'000'000;

// One rank's dump of group "world" (and its job), its clock at 1000 s.
FlightDump dumpOf(int32_t rank, int32_t size, const std::string& job = "job1") {
  FlightDump d;
  d.job = job;
  d.rank = rank;
  d.worldSize = size;
  d.host = "h";
  d.pid = 100 + rank;
  d.reason = "test";
  d.steadyNs = 1000'000 * kMs;
  d.wallNs = 1'700'000'000'000 * kMs;
  FlightGroup g;
  g.name = "world";
  g.id = job;
  g.rank = rank;
  g.size = size;
  g.capacity = 2048;
  d.groups.push_back(g);
  return d;
}

FlightEntry entry(int64_t seq, FlightState state, const std::string& op = "allreduce",
                  uint64_t bytes = 4096, int64_t startMs = 0) {
  FlightEntry e;
  e.id = static_cast<uint64_t>(seq) + 1;
  e.seq = seq;
  e.op = op;
  e.state = state;
  e.bytes = bytes;
  if (state != FlightState::kIssued) e.dtype = "float32";
  if (op == "allreduce") e.reduceOp = "sum";
  e.issueNs = (900'000 + seq * 10 + startMs) * kMs;
  if (state != FlightState::kIssued) e.startNs = e.issueNs + kMs;
  if (state == FlightState::kFinished || state == FlightState::kFailed)
    e.endNs = e.startNs + 2 * kMs;
  if (state == FlightState::kFailed)
    e.error = "ringx: allreduce #" + std::to_string(seq) + " failed";
  return e;
}

// Appends finished seqs [0, count).
void finished(FlightDump& d, int64_t count) {
  for (int64_t seq = 0; seq < count; ++seq)
    d.groups[0].entries.push_back(entry(seq, FlightState::kFinished));
}

FlightDumpSet roundTrip(const TempDir& dir, const std::vector<FlightDump>& dumps) {
  for (const FlightDump& d : dumps) writeFlightDump(d, dir.file(flightDumpFileName(d.rank)));
  return readFlightDumps(dir.path());
}

const HangRank& rankIn(const GroupHang& g, int32_t groupRank) {
  return g.ranks.at(static_cast<size_t>(groupRank));
}

TEST(FlightDump, WritesAndReadsBackEveryField) {
  TempDir dir;
  FlightDump d = dumpOf(1, 2);
  FlightEntry e = entry(7, FlightState::kFailed, "broadcast", 123);
  e.root = 1;
  e.algorithm = "chain";
  e.error = "a \"quoted\" error\nwith a newline";
  d.groups[0].entries.push_back(e);
  d.groups[0].recorded = 8;
  d.groups[0].nextSeq = 8;
  const FlightDumpSet set = roundTrip(dir, {d});
  ASSERT_EQ(set.dumps.size(), 1u);
  const FlightDump& back = set.dumps[0];
  EXPECT_EQ(back.rank, 1);
  EXPECT_EQ(back.worldSize, 2);
  EXPECT_EQ(back.pid, 101);
  EXPECT_EQ(back.wallNsOf(back.steadyNs), back.wallNs);
  ASSERT_EQ(back.groups.size(), 1u);
  EXPECT_EQ(back.groups[0].recorded, 8u);
  ASSERT_EQ(back.groups[0].entries.size(), 1u);
  const FlightEntry& x = back.groups[0].entries[0];
  EXPECT_EQ(x.seq, 7);
  EXPECT_EQ(x.op, "broadcast");
  EXPECT_EQ(x.state, FlightState::kFailed);
  EXPECT_EQ(x.bytes, 123u);
  EXPECT_EQ(x.root, 1);
  EXPECT_EQ(x.algorithm, "chain");
  EXPECT_EQ(x.error, e.error);
  EXPECT_EQ(x.startNs, e.startNs);
  // Nothing but the dump is left behind (the temporary file was renamed).
  int files = 0;
  for (const auto& item : std::filesystem::directory_iterator(dir.path())) {
    (void)item;
    ++files;
  }
  EXPECT_EQ(files, 1);
  EXPECT_TRUE(looksLikeFlightDump(formatFlightDump(d).substr(0, 64)));
}

TEST(HangReport, NamesTheRankThatNeverArrived) {
  TempDir dir;
  std::vector<FlightDump> dumps;
  for (int r = 0; r < 3; ++r) {
    dumps.push_back(dumpOf(r, 3));
    finished(dumps.back(), 5);
  }
  dumps[0].groups[0].entries.push_back(entry(5, FlightState::kFailed));
  dumps[1].groups[0].entries.push_back(entry(5, FlightState::kFailed));
  const HangReport report = analyzeHang(roundTrip(dir, dumps));
  ASSERT_EQ(report.groups.size(), 1u);
  const GroupHang& g = report.groups[0];
  EXPECT_FALSE(g.complete);
  EXPECT_EQ(g.seq, 5);
  EXPECT_EQ(g.op, "allreduce");
  EXPECT_EQ(g.bytes, 4096u);
  EXPECT_EQ(rankIn(g, 0).verdict, HangVerdict::kFailed);
  EXPECT_EQ(rankIn(g, 0).error, "ringx: allreduce #5 failed");
  EXPECT_EQ(rankIn(g, 0).elapsedNs, 2 * kMs);
  EXPECT_EQ(rankIn(g, 2).verdict, HangVerdict::kNeverArrived);
  EXPECT_EQ(rankIn(g, 2).lastSeq, 4);
  EXPECT_TRUE(report.missingRanks.empty());
  const std::string text = formatHangReport(report);
  EXPECT_NE(text.find("allreduce seq 5 (4.0 KiB, float32, sum) did not finish"), std::string::npos)
      << text;
  EXPECT_NE(text.find("never arrived: rank 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("failed: ranks 0, 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("its last collective was allreduce seq 4, finished"), std::string::npos)
      << text;
}

TEST(HangReport, NamesAStuckRankAndTheCallsQueuedBehindIt) {
  TempDir dir;
  std::vector<FlightDump> dumps;
  for (int r = 0; r < 3; ++r) {
    dumps.push_back(dumpOf(r, 3));
    finished(dumps.back(), 2);
  }
  for (int r : {0, 1}) {
    dumps[r].groups[0].entries.push_back(entry(2, FlightState::kFinished));
    dumps[r].groups[0].entries.push_back(entry(3, FlightState::kStarted));
  }
  dumps[2].groups[0].entries.push_back(entry(2, FlightState::kStarted, "allreduce", 4096));
  dumps[2].groups[0].entries.push_back(entry(3, FlightState::kIssued));
  const HangReport report = analyzeHang(roundTrip(dir, dumps));
  const GroupHang& g = report.groups.at(0);
  EXPECT_EQ(g.seq, 2);
  EXPECT_EQ(rankIn(g, 0).verdict, HangVerdict::kFinished);
  EXPECT_EQ(rankIn(g, 2).verdict, HangVerdict::kStuck);
  // Started at 900020 ms + 1 ms, dumped at 1000000 ms.
  EXPECT_EQ(rankIn(g, 2).elapsedNs, (1000'000 - 900'021) * kMs);
  const std::string text = formatHangReport(report);
  EXPECT_NE(text.find("stuck: rank 2\n"), std::string::npos) << text;
}

TEST(HangReport, ARankWithoutADumpIsNamedAndTheOthersStillReport) {
  TempDir dir;
  std::vector<FlightDump> dumps;
  for (int r = 0; r < 2; ++r) {
    dumps.push_back(dumpOf(r, 3));
    finished(dumps.back(), 1);
    dumps.back().groups[0].entries.push_back(entry(1, FlightState::kFailed));
  }
  const HangReport report = analyzeHang(roundTrip(dir, dumps));
  EXPECT_EQ(report.worldSize, 3);
  EXPECT_EQ(report.missingRanks, std::vector<int32_t>{2});
  const GroupHang& g = report.groups.at(0);
  EXPECT_EQ(g.seq, 1);
  EXPECT_EQ(g.dumped, 2);
  EXPECT_EQ(rankIn(g, 2).verdict, HangVerdict::kNoDump);
  const std::string text = formatHangReport(report);
  EXPECT_NE(text.find("2 of 3 ranks dumped"), std::string::npos) << text;
  EXPECT_NE(text.find("no dump: rank 2\n"), std::string::npos) << text;
}

TEST(HangReport, ARankThatStartedAfterTheOthersGaveUpIsLate) {
  TempDir dir;
  std::vector<FlightDump> dumps = {dumpOf(0, 2), dumpOf(1, 2)};
  dumps[0].groups[0].entries.push_back(entry(0, FlightState::kFailed));
  // Rank 1 slept: it issued and started 4 s after rank 0, long after rank 0 failed.
  dumps[1].groups[0].entries.push_back(
      entry(0, FlightState::kFailed, "allreduce", 4096, /*startMs=*/4000));
  const HangReport report = analyzeHang(roundTrip(dir, dumps));
  const GroupHang& g = report.groups.at(0);
  EXPECT_EQ(rankIn(g, 0).lateNs, 0);
  EXPECT_EQ(rankIn(g, 1).lateAfter, 0);
  EXPECT_EQ(rankIn(g, 1).lateNs, (4000 - 2) * kMs);
  EXPECT_NE(formatHangReport(report).find("arrived late: rank 1"), std::string::npos);
}

TEST(HangReport, FindsRanksThatDisagreeOnACollective) {
  TempDir dir;
  std::vector<FlightDump> dumps = {dumpOf(0, 3), dumpOf(1, 3), dumpOf(2, 3)};
  for (auto& d : dumps) finished(d, 1);
  dumps[0].groups[0].entries.push_back(entry(1, FlightState::kFailed, "allreduce", 4096));
  dumps[1].groups[0].entries.push_back(entry(1, FlightState::kFailed, "allreduce", 4096));
  dumps[2].groups[0].entries.push_back(entry(1, FlightState::kFailed, "allreduce", 8192));
  const HangReport report = analyzeHang(roundTrip(dir, dumps));
  const GroupHang& g = report.groups.at(0);
  ASSERT_EQ(g.mismatches.size(), 1u);
  EXPECT_EQ(g.mismatches[0].seq, 1);
  ASSERT_EQ(g.mismatches[0].calls.size(), 2u);
  EXPECT_EQ(g.mismatches[0].calls[0].second, (std::vector<int32_t>{0, 1}));
  const std::string text = formatHangReport(report);
  EXPECT_NE(text.find("mismatch at seq 1: allreduce 4.0 KiB float32 sum (ranks 0, 1); allreduce "
                      "8.0 KiB float32 sum (rank 2)"),
            std::string::npos)
      << text;
}

// FSDP2's reduce-scatters ask PREMUL_SUM(factor) or AVG, which ringx runs as a SUM: the
// report names the op asked, with its factor, and ranks that asked different ones disagree.
TEST(HangReport, NamesTheReduceOpAsAskedWithItsFactor) {
  TempDir dir;
  std::vector<FlightDump> dumps = {dumpOf(0, 3), dumpOf(1, 3), dumpOf(2, 3)};
  for (auto& d : dumps) finished(d, 1);
  for (int r = 0; r < 3; ++r) {
    FlightEntry e = entry(1, FlightState::kFailed, "reduce_scatter", 4096);
    e.reduceOp = r == 2 ? "AVG" : "PREMUL_SUM";
    e.premulFactor = r == 2 ? 0 : 0.5;
    dumps[r].groups[0].entries.push_back(e);
  }
  const HangReport report = analyzeHang(roundTrip(dir, dumps));
  const GroupHang& g = report.groups.at(0);
  EXPECT_EQ(g.reduceOp, "PREMUL_SUM(0.5)");
  const std::string text = formatHangReport(report);
  EXPECT_NE(text.find("reduce_scatter seq 1 (4.0 KiB, float32, PREMUL_SUM(0.5)) did not finish"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("mismatch at seq 1: reduce_scatter 4.0 KiB float32 PREMUL_SUM(0.5) (ranks "
                      "0, 1); reduce_scatter 4.0 KiB float32 AVG (rank 2)"),
            std::string::npos)
      << text;
}

TEST(HangReport, AJobThatFinishedEverythingSaysSo) {
  TempDir dir;
  std::vector<FlightDump> dumps = {dumpOf(0, 2), dumpOf(1, 2)};
  for (auto& d : dumps) finished(d, 4);
  const HangReport report = analyzeHang(roundTrip(dir, dumps));
  EXPECT_TRUE(report.groups.at(0).complete);
  EXPECT_EQ(report.groups.at(0).lastSeq, 3);
  EXPECT_NE(formatHangReport(report).find("every collective finished on every rank that dumped "
                                          "(last seq 3)"),
            std::string::npos);
}

TEST(HangReport, EntriesThatLeftTheRingCountAsFinished) {
  TempDir dir;
  std::vector<FlightDump> dumps = {dumpOf(0, 2), dumpOf(1, 2)};
  finished(dumps[0], 10);
  // Rank 1's ring holds only seqs 8 and 9 (it is small, or rank 1 did more since).
  dumps[1].groups[0].entries.push_back(entry(8, FlightState::kFinished));
  dumps[1].groups[0].entries.push_back(entry(9, FlightState::kStarted));
  const GroupHang g = analyzeHang(roundTrip(dir, dumps)).groups.at(0);
  EXPECT_EQ(g.seq, 9);
  EXPECT_EQ(rankIn(g, 1).verdict, HangVerdict::kStuck);
}

TEST(HangReport, DumpsOfAnotherJobAndBrokenFilesAreLeftOutWithAWarning) {
  TempDir dir;
  FlightDump old = dumpOf(2, 3, "old-job");
  old.wallNs -= 3600'000 * kMs;  // an hour earlier
  FlightDump now0 = dumpOf(0, 2), now1 = dumpOf(1, 2);
  finished(now0, 1);
  finished(now1, 1);
  const FlightDumpSet set = roundTrip(dir, {old, now0, now1});
  fixture::writeFile(dir.file("flight-rank-7.json"), "{\"format\": \"ringx-flight-recorder\", ");
  const FlightDumpSet again = readFlightDumps(dir.path());
  ASSERT_EQ(again.dumps.size(), 2u);
  ASSERT_EQ(again.warnings.size(), 2u);
  std::string all = again.warnings[0] + "\n" + again.warnings[1];
  EXPECT_NE(all.find("flight-rank-7.json"), std::string::npos) << all;
  EXPECT_NE(all.find("another job"), std::string::npos) << all;
  EXPECT_EQ(set.dumps.size(), 2u);
}

TEST(HangReport, AnEmptyDirectoryHasNoDumps) {
  TempDir dir;
  EXPECT_TRUE(readFlightDumps(dir.path()).dumps.empty());
  EXPECT_THROW(readFlightDumps(dir.file("missing")), IoError);
}

// ---- ringx-trace why, as a user runs it -------------------------------------------------------

std::string toolPath() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : (self.parent_path() / "ringx-trace").string();
}

std::pair<int, std::string> runTool(const std::string& arguments) {
  std::string output;
  FILE* pipe = popen((toolPath() + " " + arguments + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {-1, ""};
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) output.append(buffer.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

TEST(RingxTraceWhy, PrintsTheReportAndExitsZeroOrOneWithNothingToRead) {
  if (!std::filesystem::exists(toolPath())) GTEST_SKIP() << "ringx-trace is not built";
  TempDir dir;
  std::vector<FlightDump> dumps = {dumpOf(0, 2), dumpOf(1, 2)};
  finished(dumps[0], 3);
  finished(dumps[1], 2);
  dumps[0].groups[0].entries.push_back(entry(3, FlightState::kFailed));
  roundTrip(dir, dumps);
  auto [status, output] = runTool("why " + dir.path());
  EXPECT_EQ(status, 0) << output;
  EXPECT_NE(output.find("allreduce seq 2"), std::string::npos) << output;
  EXPECT_NE(output.find("never arrived: rank 1"), std::string::npos) << output;

  TempDir empty;
  std::tie(status, output) = runTool("why " + empty.path());
  EXPECT_EQ(status, 1) << output;
  EXPECT_NE(output.find("no flight recorder dump in"), std::string::npos) << output;
  std::tie(status, output) = runTool("why");
  EXPECT_EQ(status, 2) << output;
}

}  // namespace
}  // namespace ringx::trace
