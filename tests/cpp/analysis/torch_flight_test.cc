// torch's own Flight Recorder dumps read by `ringx-trace why` (trace/read/torch_flight.h,
// pickle_data.h) and the hang report made from them (analysis/hang_report.h): on the real dumps
// of a 16-rank Megatron job with injected faults (../shared/traces/fr/nvrx_megatron16/), whose
// expected analysis ships beside them, on pickles and JSON written here, and on dumps shaped as
// torch 2.13 writes them for gloo (no group members, every entry "scheduled", pg_status's numbers
// as strings in JSON; tests/python/test_torch_flight_gloo.py runs the real ones).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "analysis/hang_report.h"
#include "base/error.h"
#include "tests/cpp/shared_traces.h"
#include "tests/cpp/trace/torch_flight_fixture.h"
#include "tests/cpp/trace/trace_fixture.h"
#include "trace/format/codec.h"
#include "trace/format/dtype_size.h"
#include "trace/read/pickle_data.h"

namespace ringx::trace {
namespace {

// One row of nvidia-resiliency-ext's expected analysis (reference_output.txt):
// "74     | EXPERT_MODEL_PARALLEL_GROUP,0 | nccl:all_to_all | 4027x5120 | BFloat16 | 12".
struct ExpectedRow {
  std::string group, op, dtype;
  int64_t elements = 1;
  std::set<int32_t> missing;
};

std::vector<ExpectedRow> expectedOf(const std::string& scenario) {
  std::ifstream in(
      ringx::testing::sharedTrace("fr/nvrx_megatron16/" + scenario + "/reference_output.txt"));
  std::vector<ExpectedRow> out;
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream row(line);
    for (std::string cell; std::getline(row, cell, '|');) {
      cell.erase(0, cell.find_first_not_of(' '));
      cell.erase(cell.find_last_not_of(' ') + 1);
      cells.push_back(cell);
    }
    if (cells.size() < 6) continue;
    ExpectedRow e;
    e.group = cells[0];
    e.op = cells[2].substr(cells[2].find(':') + 1);
    std::stringstream dims(cells[3]);
    for (std::string d; std::getline(dims, d, 'x');) e.elements *= std::stoll(d);
    e.dtype = cells[4];
    std::stringstream ranks(cells[5]);
    for (std::string r; std::getline(ranks, r, ',');) e.missing.insert(std::stoi(r));
    out.push_back(e);
  }
  return out;
}

class NvrxScenario : public ::testing::TestWithParam<const char*> {};

// Every row of the expected analysis is a group the report names, with the same collective (op,
// dtype, the lowest member's input size) and the same ranks that did not reach it: never
// arrived (enqueued less), or said nothing of the group (an empty dump). Such groups come first.
TEST_P(NvrxScenario, TheReportNamesWhatTheExpectedAnalysisNames) {
  const std::string scenario = GetParam();
  const TorchFlightSet set =
      readTorchFlightDumps(ringx::testing::sharedTrace("fr/nvrx_megatron16/" + scenario));
  ASSERT_EQ(set.dumps.size(), 16u);
  EXPECT_TRUE(set.warnings.empty()) << set.warnings.front();
  const HangReport report = analyzeTorchHang(set);
  EXPECT_EQ(report.worldSize, 16);
  EXPECT_TRUE(report.missingRanks.empty());
  const std::vector<ExpectedRow> expected = expectedOf(scenario);
  ASSERT_FALSE(expected.empty());
  size_t culprits = 0;
  for (const GroupHang& g : report.groups) {
    bool culprit = false;
    for (const HangRank& h : g.ranks)
      culprit |= h.verdict == HangVerdict::kNeverArrived || h.verdict == HangVerdict::kNoDump;
    if (!culprit) break;
    ++culprits;
  }
  for (const ExpectedRow& e : expected) {
    SCOPED_TRACE("group " + e.group);
    const GroupHang* found = nullptr;
    for (size_t i = 0; i < culprits; ++i)
      if (report.groups[i].name.rfind(e.group + " (", 0) == 0) found = &report.groups[i];
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(found->op, e.op);
    EXPECT_EQ(found->dtype, e.dtype);
    EXPECT_EQ(found->bytes, static_cast<uint64_t>(e.elements * dtypeBytes(e.dtype)));
    std::set<int32_t> missing;
    for (const HangRank& h : found->ranks) {
      if (h.verdict == HangVerdict::kNeverArrived || h.verdict == HangVerdict::kNoDump) {
        missing.insert(h.rank);
      }
    }
    EXPECT_EQ(missing, e.missing);
  }
  const std::string text = formatHangReport(report);
  EXPECT_EQ(text.rfind("torch Flight Recorder (version 2.9, NCCL 2.27.3): 16 of 16 ranks", 0), 0u)
      << text.substr(0, 200);
}

INSTANTIATE_TEST_SUITE_P(FaultsInjected, NvrxScenario,
                         ::testing::Values("gpu_error_1st", "gpu_error_2nd", "lock_gil_1st",
                                           "lock_gil_2nd"));

// A protocol-2 pickle of {"a": [1, -2, 300000, 2**40], "b": ("x", None, True), "c": 1.5, "d": l}
// where l is the list under "a" again (a memo reference, which must see the list as filled).
TEST(PickleData, PlainDataReadsAsJsonAndAMemoReferenceSeesTheFilledList) {
  const std::string bytes(
      "\x80\x02\x7d\x71\x00\x28\x58\x01\x00\x00\x00\x61\x71\x01\x5d\x71"
      "\x02\x28\x4b\x01\x4a\xfe\xff\xff\xff\x4a\xe0\x93\x04\x00\x8a\x06"
      "\x00\x00\x00\x00\x00\x01\x65\x58\x01\x00\x00\x00\x62\x71\x03\x58"
      "\x01\x00\x00\x00\x78\x71\x04\x4e\x88\x87\x71\x05\x58\x01\x00\x00"
      "\x00\x63\x71\x06\x47\x3f\xf8\x00\x00\x00\x00\x00\x00\x58\x01\x00"
      "\x00\x00\x64\x71\x07\x68\x02\x75\x2e",
      89);
  const nlohmann::json v = readPickleData(bytes, "test.pkl");
  EXPECT_EQ(v.dump(), R"({"a":[1,-2,300000,1099511627776],"b":["x",null,true],"c":1.5,)"
                      R"("d":[1,-2,300000,1099511627776]})");
}

TEST(PickleData, AClassIsRefusedAndACutOffPickleIsAnError) {
  // pickle.dumps(collections.OrderedDict(), 2) starts with GLOBAL collections.OrderedDict.
  const std::string global(
      "\x80\x02\x63\x63\x6f\x6c\x6c\x65\x63\x74\x69\x6f\x6e\x73\x0a\x4f"
      "\x72\x64\x65\x72\x65\x64\x44\x69\x63\x74\x0a\x71\x00\x29\x52\x71"
      "\x01\x2e",
      34);
  try {
    readPickleData(global, "evil.pkl");
    FAIL() << "a GLOBAL was read";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("collections.OrderedDict"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("refused"), std::string::npos) << e.what();
  }
  EXPECT_THROW(readPickleData(std::string("\x80\x02]q\x00(K\x01", 7), "cut.pkl"), FormatError);
}

// A list that contains itself is refused (not copied forever, not leaked); so are shared
// references nested in turn, which would copy out 2^40 values (found by the fuzzer).
TEST(PickleData, AStructureThatContainsItselfOrDoublesAtEachLevelIsRefused) {
  const std::string dir =
      (std::filesystem::path(__FILE__).parent_path() / "../../fuzz/regressions/fuzz_pickle_data/")
          .lexically_normal()
          .string();
  for (const char* name : {"self_containing_list", "doubling_shared_lists"}) {
    std::ifstream in(dir + name, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(bytes.empty()) << name;
    try {
      readPickleData(bytes, name);
      FAIL() << name << " was read";
    } catch (const FormatError& e) {
      const std::string what = e.what();
      EXPECT_TRUE(what.find("contains itself") != std::string::npos ||
                  what.find("more than 1,000,000 values") != std::string::npos)
          << what;
    }
  }
}

// The JSON form torch can write: two ranks of group "5"; rank 1 enqueued one collective fewer.
TEST(TorchFlight, AJsonDumpReadsAsAPickledOne) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("ringx-torch-fr-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  for (int rank : {0, 1}) {
    const int enqueued = rank == 0 ? 8 : 7;
    std::ofstream(dir / ("nccl_trace_rank_" + std::to_string(rank) + ".json"))
        << R"({"version":"2.10","pg_config":{"5":{"name":"5","desc":"dp","ranks":"[0, 1]"}},)"
        << R"("pg_status":{"3":{"last_enqueued_collective":)" << enqueued
        << R"(,"last_started_collective":-1,"last_completed_collective":6}},"entries":[)"
        << R"({"pg_id":3,"process_group":["5","dp"],"collective_seq_id":7,"p2p_seq_id":0,)"
        << R"("is_p2p":false,"profiling_name":"nccl:all_reduce","state":"scheduled",)"
        << R"("input_sizes":[[1024]],"input_dtypes":["Float"]})"
        << (rank == 0 ? R"(,{"pg_id":3,"process_group":["5","dp"],"collective_seq_id":8,)"
                        R"("p2p_seq_id":0,"is_p2p":false,"profiling_name":"nccl:all_reduce",)"
                        R"("state":"started","input_sizes":[[2048]],"input_dtypes":["Float"]})"
                      : "")
        << "]}";
  }
  const HangReport report = analyzeTorchHang(readTorchFlightDumps(dir.string()));
  std::filesystem::remove_all(dir);
  ASSERT_EQ(report.groups.size(), 1u);
  const GroupHang& g = report.groups[0];
  EXPECT_EQ(g.name, "5 (dp)");
  EXPECT_EQ(g.seq, 8);
  EXPECT_EQ(g.op, "all_reduce");
  EXPECT_EQ(g.bytes, 2048u * 4);
  ASSERT_EQ(g.ranks.size(), 2u);
  EXPECT_EQ(g.ranks[0].verdict, HangVerdict::kStuck);  // started it
  EXPECT_EQ(g.ranks[1].verdict, HangVerdict::kNeverArrived);
  EXPECT_EQ(g.ranks[1].lastSeq, 7);
}

using fixture::GlooCall;
using fixture::glooDump;
using fixture::worldCalls;

HangReport reportOf(const fixture::TempDir& dir) {
  return analyzeTorchHang(readTorchFlightDumps(dir.path()));
}

// The default group is every rank even though no dump lists its members; the rank that enqueued
// less never arrived, those whose entry was retired without completing gave up on it, one still
// pending is queued; "not retired" counts what is not.
TEST(TorchFlightGloo, TheDefaultGroupIsEveryRankAndTheRankBehindIsNamed) {
  fixture::TempDir dir;
  for (int32_t rank = 0; rank < 4; ++rank) {
    const int64_t enqueued = rank == 3 ? 3 : 4;
    fixture::writeFile(dir.file("fr_trace_rank_" + std::to_string(rank) + ".json"),
                       glooDump(rank, 4, {{"0", enqueued}}, worldCalls(enqueued, rank != 2)));
  }
  const HangReport report = reportOf(dir);
  EXPECT_EQ(report.producer, "torch Flight Recorder (version 2.10, gloo)");
  EXPECT_EQ(report.worldSize, 4);
  ASSERT_EQ(report.groups.size(), 1u);
  const GroupHang& g = report.groups[0];
  EXPECT_EQ(g.name, "0 (default_pg)");
  EXPECT_FALSE(g.membersFromDumps);
  EXPECT_EQ(g.size, 4);
  EXPECT_EQ(g.seq, 4);
  EXPECT_EQ(g.op, "all_reduce");
  EXPECT_EQ(g.bytes, 1024u);
  ASSERT_EQ(g.ranks.size(), 4u);
  EXPECT_EQ(g.ranks[0].verdict, HangVerdict::kFailed);
  EXPECT_EQ(g.ranks[2].verdict, HangVerdict::kQueued);
  EXPECT_TRUE(g.ranks[2].startUnrecorded);
  EXPECT_EQ(g.ranks[3].verdict, HangVerdict::kNeverArrived);
  EXPECT_EQ(g.ranks[3].lastSeq, 3);
  EXPECT_EQ(g.ranks[3].lastState, FlightState::kFinished);  // retired, before the hang
  const std::string text = formatHangReport(report);
  EXPECT_NE(text.find("rank 2 dumped: 1 of 4 ops not retired"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 3 dumped: 0 of 3 ops not retired"), std::string::npos) << text;
  EXPECT_NE(text.find("never arrived: rank 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 2: queued (issued, not finished; gloo records no start)"),
            std::string::npos)
      << text;
}

// A subgroup no dump lists the members of: they are the ranks whose pg_status or entries name
// it, in order (torch sorts a group's ranks), and a rank outside it is no member.
// gloo's two worker threads each write last_completed_collective as they finish, so a rank's
// status can say 2 with seq 3 already retired, and stay so (make test caught such a dump): its
// retired entries are over, and a group every member finished is complete.
TEST(TorchFlightGloo, ARetiredEntryIsOverWhateverTheStatusLastCompletedSays) {
  fixture::TempDir dir;
  for (int32_t rank = 0; rank < 4; ++rank) {
    nlohmann::json d = nlohmann::json::parse(glooDump(rank, 4, {{"0", 3}}, worldCalls(3)));
    if (rank == 0) d["pg_status"]["0"]["last_completed_collective"] = "2";
    fixture::writeFile(dir.file("fr_trace_rank_" + std::to_string(rank) + ".json"), d.dump());
  }
  const HangReport report = reportOf(dir);
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_TRUE(report.groups[0].complete) << formatHangReport(report);
  EXPECT_EQ(report.groups[0].lastSeq, 3);
}

TEST(TorchFlightGloo, ASubgroupsMembersAreTheRanksWhoseDumpsNameIt) {
  fixture::TempDir dir;
  for (int32_t rank = 0; rank < 4; ++rank) {
    std::map<std::string, int64_t> status{{"0", 3}};
    std::vector<GlooCall> calls = worldCalls(3);
    if (rank > 0) {
      const int64_t enqueued = rank == 2 ? 2 : 3;
      status["1"] = enqueued;
      for (int64_t seq = 1; seq <= enqueued; ++seq) calls.push_back({"1", "1", "undefined", seq});
    }
    fixture::writeFile(dir.file("fr_trace_rank_" + std::to_string(rank)),
                       glooDump(rank, 4, status, calls));
  }
  const HangReport report = reportOf(dir);
  ASSERT_EQ(report.groups.size(), 2u);
  const GroupHang& sub = report.groups[0];  // the culprit's group first
  EXPECT_EQ(sub.name, "1");
  EXPECT_TRUE(sub.membersFromDumps);
  EXPECT_EQ(sub.size, 3);
  EXPECT_EQ(sub.seq, 3);
  ASSERT_EQ(sub.ranks.size(), 3u);
  EXPECT_EQ(sub.ranks[1].rank, 2);
  EXPECT_EQ(sub.ranks[1].verdict, HangVerdict::kNeverArrived);
  EXPECT_EQ(sub.ranks[0].rank, 1);
  EXPECT_EQ(sub.ranks[0].verdict, HangVerdict::kFailed);
  EXPECT_TRUE(report.groups[1].complete);
  EXPECT_EQ(report.groups[1].lastSeq, 3);
  const std::string text = formatHangReport(report);
  EXPECT_NE(text.find("members: ranks 1-3 (the dumps list none"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 1 (process rank 2): never arrived (its last collective was "
                      "gloo:all_reduce seq 2, finished)"),
            std::string::npos)
      << text;
}

// A rank that called another op at the seq the others reached (every rank enqueued as many):
// the collective is what most called, and that rank called something else. Sizes of an
// all_to_all may differ by design: no mismatch there.
TEST(TorchFlightGloo, ARankThatCalledAnotherOpIsNamedAndUnequalAllToAllSizesAreNot) {
  fixture::TempDir dir;
  for (int32_t rank = 0; rank < 4; ++rank) {
    std::vector<GlooCall> calls = worldCalls(3);
    calls.push_back({"0", "0", "default_pg", 4, "gloo:all_to_all", true, 64 * (rank + 1)});
    calls.push_back(
        {"0", "0", "default_pg", 5, rank == 1 ? "gloo:all_gather" : "gloo:all_reduce", false});
    fixture::writeFile(dir.file("fr_trace_rank_" + std::to_string(rank) + ".json"),
                       glooDump(rank, 4, {{"0", 5}}, calls));
  }
  const HangReport report = reportOf(dir);
  ASSERT_EQ(report.groups.size(), 1u);
  const GroupHang& g = report.groups[0];
  EXPECT_EQ(g.seq, 5);
  EXPECT_EQ(g.op, "all_reduce");
  ASSERT_EQ(g.mismatches.size(), 1u);
  EXPECT_EQ(g.mismatches[0].seq, 5);
  ASSERT_EQ(g.ranks.size(), 4u);
  EXPECT_EQ(g.ranks[1].verdict, HangVerdict::kOtherCall);
  EXPECT_EQ(g.ranks[1].call, "all_gather 1.0 KiB Float");
  for (int32_t r : {0, 2, 3}) EXPECT_EQ(g.ranks[r].verdict, HangVerdict::kQueued) << r;
  const std::string text = formatHangReport(report);
  EXPECT_NE(text.find("called something else: rank 1\n"), std::string::npos) << text;
}

// A rank that issued no collective at all: no entries, an empty pg_status (as torch writes it),
// so the default group's name comes from the others and the rank never arrived at seq 1. A dump
// whose pg_status has an id its entries do not name says nothing of that group: no dump.
TEST(TorchFlightGloo, ARankThatIssuedNothingNeverArrivedAndAnUnnamedStatusSaysNothing) {
  fixture::TempDir dir;
  for (int32_t rank = 0; rank < 3; ++rank) {
    fixture::writeFile(
        dir.file("fr_trace_rank_" + std::to_string(rank) + ".json"),
        rank == 2 ? glooDump(rank, 3, {}, {}) : glooDump(rank, 3, {{"0", 1}}, worldCalls(1)));
  }
  HangReport report = reportOf(dir);
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_EQ(report.groups[0].seq, 1);
  ASSERT_EQ(report.groups[0].ranks.size(), 3u);
  EXPECT_EQ(report.groups[0].ranks[2].verdict, HangVerdict::kNeverArrived);
  EXPECT_EQ(report.groups[0].ranks[2].lastSeq, -1);
  EXPECT_NE(formatHangReport(report).find("rank 2 dumped: nothing"), std::string::npos);

  // Rank 2 enqueued in group 0 (pg_id 0: named from the others) and in a pg_id 5 nothing names.
  fixture::writeFile(dir.file("fr_trace_rank_2.json"), glooDump(2, 3, {{"0", 0}, {"5", 9}}, {}));
  report = reportOf(dir);
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_EQ(report.groups[0].ranks[2].verdict, HangVerdict::kNeverArrived);
  fixture::writeFile(dir.file("fr_trace_rank_2.json"), glooDump(2, 3, {{"5", 9}}, {}));
  report = reportOf(dir);
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_EQ(report.groups[0].ranks[2].verdict, HangVerdict::kNoDump);
}

}  // namespace
}  // namespace ringx::trace
