// torch Flight Recorder dumps shaped as torch 2.13 writes them for gloo, built in code: what the
// hang report's tests (tests/cpp/analysis/torch_flight_test.cc), the viewer's ingest and its
// collectives panel read (tests/python/test_torch_flight_gloo.py runs real ones).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ringx::trace::fixture {

// A call's time_created_ns, unless it says: this wall-clock time plus its seq in milliseconds.
inline constexpr int64_t kGlooEpochNs = 1'700'000'000'000'000'000;

// One call a rank's dump holds.
struct GlooCall {
  std::string pgId, group, desc;  // "1", "1", "undefined"
  int64_t seq = 0;
  std::string op = "gloo:all_reduce";
  bool retired = true;
  int64_t elements = 256;
  int64_t createdNs = 0;  // 0: kGlooEpochNs + seq ms
};

// A rank's dump in its JSON form: pg_config's one nameless entry (rank 0's lists the world, the
// others' nothing), pg_status by local pg_id with its numbers as text, and entries that stay
// "scheduled" and are retired once their work ends, with no discovered start or completion.
inline std::string glooDump(int32_t rank, int32_t world,
                            const std::map<std::string, int64_t>& enqueuedByPgId,
                            const std::vector<GlooCall>& calls) {
  nlohmann::json d;
  d["version"] = "2.10";
  d["comm_lib_version"] = "";
  std::string ranks = "[]";
  if (rank == 0) {
    ranks = "[";
    for (int32_t r = 0; r < world; ++r) ranks += (r ? ", " : "") + std::to_string(r);
    ranks += "]";
  }
  d["pg_config"][""] = {{"name", ""}, {"desc", ""}, {"ranks", ranks}};
  d["pg_status"] = nlohmann::json::object();
  for (const auto& [id, enqueued] : enqueuedByPgId) {
    d["pg_status"][id] = {{"last_enqueued_collective", std::to_string(enqueued)},
                          {"last_started_collective", "-1"},
                          {"last_completed_collective", std::to_string(enqueued)}};
  }
  d["entries"] = nlohmann::json::array();
  for (const GlooCall& c : calls) {
    d["entries"].push_back(
        {{"pg_id", std::stoi(c.pgId)},
         {"process_group", {c.group, c.desc}},
         {"collective_seq_id", c.seq},
         {"p2p_seq_id", 0},
         {"is_p2p", false},
         {"profiling_name", c.op},
         {"state", "scheduled"},
         {"retired", c.retired},
         {"input_sizes", {{c.elements}}},
         {"input_dtypes", {"Float"}},
         {"time_created_ns", c.createdNs ? c.createdNs : kGlooEpochNs + c.seq * 1'000'000},
         {"time_discovered_started_ns", 0},
         {"time_discovered_completed_ns", 0}});
  }
  return d.dump();
}

// World-group calls seqs [1, count], the last one `lastRetired`.
inline std::vector<GlooCall> worldCalls(int64_t count, bool lastRetired = true) {
  std::vector<GlooCall> calls;
  for (int64_t seq = 1; seq <= count; ++seq)
    calls.push_back({"0", "0", "default_pg", seq, "gloo:all_reduce", seq < count || lastRetired});
  return calls;
}

}  // namespace ringx::trace::fixture
