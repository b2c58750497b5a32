// `ringx-trace summary` on synthetic jobs of many ranks (bench_make_scale_trace):
// the slow host and the slow rank come out as the stragglers, and the summary's
// peak memory does not grow with the trace's events (it reads one rank file per
// thread and keeps aggregates).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "analysis/summary.h"
#include "tests/cpp/trace/trace_fixture.h"
#include "tools/ringx_trace/summary_text.h"

namespace ringx::analysis {
namespace {

using trace::fixture::TempDir;

// Runs a program of the build to the end; its exit status, and its peak
// resident memory in KiB (getrusage of that child alone, through wait4).
int run(const std::vector<std::string>& args, long* maxRssKiB = nullptr) {
  const pid_t pid = fork();
  if (pid == 0) {
    // Quiet: the tests read files, not output.
    if (freopen("/dev/null", "w", stdout) == nullptr) _exit(127);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  struct rusage usage {};
  if (pid < 0 || wait4(pid, &status, 0, &usage) != pid) return -1;
  if (maxRssKiB) *maxRssKiB = usage.ru_maxrss;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

const std::string kBin = RINGX_BIN_DIR;

void makeTrace(const std::string& dir, int ranks, int64_t events, int slowHost, int slowRank) {
  ASSERT_EQ(run({kBin + "/bench_make_scale_trace", "--out", dir, "--ranks", std::to_string(ranks),
                 "--events", std::to_string(events), "--ranks-per-host", "8", "--slow-host",
                 std::to_string(slowHost), "--slow-rank", std::to_string(slowRank)}),
            0);
}

// 64 ranks on 8 hosts; node3's ranks (24-31) compute 15% slower, rank 45 40%.
TEST(SummaryScale, NamesTheSlowHostAndTheSlowRank) {
  TempDir dir;
  makeTrace(dir.path(), 64, 300000, 3, 45);
  const Summary s = summarizeTrace(dir.path(), 2);
  ASSERT_EQ(s.ranks.size(), 64u);
  ASSERT_EQ(s.hosts.size(), 8u);
  // node3 as a whole arrives latest; rank 45 alone is the one every collective waits for.
  EXPECT_EQ(s.hosts[0].host, "node3");
  EXPECT_EQ(s.hosts[0].ranks.front(), 24);
  EXPECT_EQ(s.hosts[0].ranks.back(), 31);
  EXPECT_EQ(s.skew.mostOftenLast, 45);
  EXPECT_EQ(s.skew.mostOftenLastCount, s.skew.matched);
  const RankStats* latest = &s.ranks[0];
  for (const RankStats& r : s.ranks)
    if (r.latenessMeanNs > latest->latenessMeanNs) latest = &r;
  EXPECT_EQ(latest->rank, 45);
  for (int r = 24; r < 32; ++r)
    EXPECT_GT(s.ranks[r].latenessMeanNs, s.ranks[0].latenessMeanNs + 100000) << r;

  SummaryFormat format;
  format.rankTableLimit = 32;  // as a 1,024-rank job prints
  const std::string text = formatSummary(s, format);
  EXPECT_NE(text.find("\n  node3            ranks 24-31"), std::string::npos) << text;
  EXPECT_NE(text.find("latest ranks: rank 45 (node5)"), std::string::npos) << text;
  EXPECT_EQ(text.find("Communication time per rank ("), std::string::npos) << text;
}

// Ten times the events in the same 256 ranks: the old summary grew by about
// 150 bytes per event (a store of everything); this one holds a rank file per
// thread, so its peak grows by the ranks' size, not the job's.
TEST(SummaryScale, PeakMemoryDoesNotGrowWithTheEvents) {
  TempDir small, large;
  constexpr int64_t kSmall = 300000, kLarge = 3000000;
  makeTrace(small.path(), 256, kSmall, 3, 100);
  makeTrace(large.path(), 256, kLarge, 3, 100);
  long smallKiB = 0, largeKiB = 0;
  ASSERT_EQ(run({kBin + "/ringx-trace", "summary", "-j", "2", small.path()}, &smallKiB), 0);
  ASSERT_EQ(run({kBin + "/ringx-trace", "summary", "-j", "2", large.path()}, &largeKiB), 0);
  // 8 bytes per extra event: a twentieth of what keeping the events costs.
  const long bound = smallKiB + (kLarge - kSmall) * 8 / 1024;
  EXPECT_LT(largeKiB, bound) << "peak " << smallKiB << " KiB for " << kSmall << " events, "
                             << largeKiB << " KiB for " << kLarge;
  std::printf("peak RSS: %ld KiB for %lld events, %ld KiB for %lld events\n", smallKiB,
              static_cast<long long>(kSmall), largeKiB, static_cast<long long>(kLarge));
}

}  // namespace
}  // namespace ringx::analysis
