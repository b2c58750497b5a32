// The ringx-trace program end to end: exit status 0 for success, 1 for bad
// input, 2 for a bad command line, and what it prints. It runs the binary built
// beside this test (build/bin/ringx-trace); the test is skipped when that target
// was not built.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/cpp/trace/trace_fixture.h"

namespace ringx::trace {
namespace {

using fixture::RankStream;
using fixture::TempDir;

std::string toolPath() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : (self.parent_path() / "ringx-trace").string();
}

struct ToolRun {
  int status = -1;
  std::string output;  // stdout and stderr together
};

ToolRun run(const std::string& arguments) {
  ToolRun r;
  FILE* pipe = popen((toolPath() + " " + arguments + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) r.output.append(buffer.data(), n);
  const int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

class RingxTraceCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(toolPath())) {
      GTEST_SKIP() << "ringx-trace is not built beside the tests (" << toolPath() << ")";
    }
    for (int r = 0; r < 2; ++r) {
      RankStream s(r, 2);
      if (r == 1) s.clockSync(0, -1000, 100);
      s.collective("allreduce", 0, 1000 + r * 1000, 5000 + r * 1000, 1 << 20)
          .writeTo(dir_.file("rank-" + std::to_string(r) + ".ringx"));
    }
  }
  TempDir dir_;
};

TEST_F(RingxTraceCli, ExportWritesChromeJson) {
  const std::string out = dir_.file("out.json");
  const ToolRun r = run("export " + dir_.path() + " -o " + out);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("wrote 2 events of 2 ranks"), std::string::npos) << r.output;
  std::ifstream in(out);
  const nlohmann::json doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc["otherData"]["world_size"], 2);

  const ToolRun toStdout = run("export " + dir_.file("rank-0.ringx") + " -o -");
  EXPECT_EQ(toStdout.status, 0);
  EXPECT_NE(toStdout.output.find("\"traceEvents\""), std::string::npos);
}

TEST_F(RingxTraceCli, SummaryPrintsTables) {
  const ToolRun r = run("summary " + dir_.path());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("1 MiB-4 MiB"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Arrival skew"), std::string::npos) << r.output;
}

TEST_F(RingxTraceCli, SummaryMergesAProfilerTraceOfTheSameJob) {
  // A Chrome trace (as torch.profiler writes) for rank 1 beside the ringx trace:
  // one summary over both, as the viewer would merge them.
  fixture::writeFile(dir_.file("rank1.pt.trace.json"),
                     R"({"traceEvents": [{"ph": "X", "name": "allreduce", "cat": "collective",
                         "pid": 1, "tid": 7, "ts": 10, "dur": 4, "args": {"bytes": 64}}],
                         "distributedInfo": {"rank": 1}})");
  const ToolRun r = run("summary " + dir_.path() + " " + dir_.file("rank1.pt.trace.json"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("2 of 2 ranks, 3 events"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" + "), std::string::npos) << r.output;  // both sources named
}

TEST_F(RingxTraceCli, DiffRanksTheSlowerCollectiveFirst) {
  TempDir slower;
  for (int r = 0; r < 2; ++r) {
    RankStream s(r, 2);
    s.collective("allreduce", 0, 1000 + r * 1000, 905000 + r * 1000, 1 << 20)
        .writeTo(slower.file("rank-" + std::to_string(r) + ".ringx"));
  }
  const ToolRun r = run("diff " + dir_.path() + " " + slower.path());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Collectives matched by (group, seq): 1"), std::string::npos) << r.output;
  const size_t regressions = r.output.find("Largest regressions");
  ASSERT_NE(regressions, std::string::npos) << r.output;
  EXPECT_NE(r.output.find("allreduce seq 0 (group world, 1.00 MiB)", regressions),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("+900.0 us"), std::string::npos) << r.output;
}

TEST_F(RingxTraceCli, HelpAndUsageErrors) {
  ToolRun r = run("--help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.output.find("Usage: ringx-trace"), std::string::npos) << r.output;
  for (const char* command : {"export", "summary", "diff", "why"})
    EXPECT_NE(r.output.find(std::string("\n  ") + command + " "), std::string::npos) << command;
  r = run("diff --help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.output.find("--top"), std::string::npos) << r.output;
  const std::vector<std::string> badCommandLines = {"",
                                                    "frobnicate x",
                                                    "export " + dir_.path(),
                                                    "summary",
                                                    "summary --bogus " + dir_.path(),
                                                    "diff " + dir_.path(),
                                                    "diff a b --top 0",
                                                    "why a b"};
  for (const std::string& bad : badCommandLines) {
    r = run(bad);
    EXPECT_EQ(r.status, 2) << bad << ": " << r.output;
    EXPECT_EQ(r.output.rfind("ringx-trace: ", 0), 0u) << bad << ": " << r.output;
    EXPECT_NE(r.output.find("--help' for the options"), std::string::npos) << bad;
  }
}

TEST_F(RingxTraceCli, BadInputExitsOneWithAMessage) {
  ToolRun r = run("summary " + dir_.file("missing"));
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output.rfind("ringx-trace: no trace at " + dir_.file("missing"), 0), 0u) << r.output;
  EXPECT_EQ(r.output.find(".cc:"), std::string::npos) << r.output;  // no source location
  fixture::writeFile(dir_.file("rank-2.ringx"), "not a trace");
  r = run("export " + dir_.path() + " -o " + dir_.file("x.json"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("not a ringx trace"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ringx::trace
