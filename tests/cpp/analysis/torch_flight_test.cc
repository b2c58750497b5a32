// torch's own Flight Recorder dumps read by `ringx-trace why` (trace/read/torch_flight.h,
// pickle_data.h) and the hang report made from them (analysis/hang_report.h): on the real dumps
// of a 16-rank Megatron job with injected faults (../shared/traces/fr/nvrx_megatron16/), whose
// expected analysis ships beside them, and on pickles and JSON written here.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>

#include "analysis/hang_report.h"
#include "base/error.h"
#include "tests/cpp/shared_traces.h"
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

}  // namespace
}  // namespace ringx::trace
