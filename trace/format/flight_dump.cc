// Writing and reading flight recorder dumps (see flight_dump.h for the format).
#include "trace/format/flight_dump.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "trace/format/codec.h"

namespace ringx::trace {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;  // "format" first, so that a reader can tell by the first bytes

constexpr std::string_view kFilePrefix = "flight-rank-";
constexpr std::string_view kFileSuffix = ".json";
// reduceOpName(AskedReduce) of a PREMUL_SUM (base/types.h): the one op that comes with a factor.
constexpr std::string_view kPremulSum = "PREMUL_SUM";

bool isDumpFileName(const std::string& name) {
  return name.size() > kFilePrefix.size() + kFileSuffix.size() &&
         name.compare(0, kFilePrefix.size(), kFilePrefix) == 0 &&
         name.compare(name.size() - kFileSuffix.size(), kFileSuffix.size(), kFileSuffix) == 0;
}

FlightState stateFromName(const std::string& name, const std::string& source) {
  for (FlightState s : {FlightState::kIssued, FlightState::kStarted, FlightState::kFinished,
                        FlightState::kFailed}) {
    if (name == flightStateName(s)) return s;
  }
  throw FormatError(strCat(source, ": unknown collective state '", name,
                           "' (issued, started, finished or failed)"));
}

std::string readText(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) RINGX_THROW(IoError, "cannot open ", path, ": ", std::strerror(errno));
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

}  // namespace

const char* flightStateName(FlightState state) {
  switch (state) {
    case FlightState::kIssued:
      return "issued";
    case FlightState::kStarted:
      return "started";
    case FlightState::kFinished:
      return "finished";
    case FlightState::kFailed:
      return "failed";
  }
  return "?";
}

bool FlightEntry::premultiplies() const { return reduceOp == kPremulSum; }

std::string reduceOpText(const FlightEntry& e) {
  return e.premultiplies() ? strCat(e.reduceOp, "(", e.premulFactor, ")") : e.reduceOp;
}

std::string flightDumpFileName(int32_t rank) { return strCat(kFilePrefix, rank, kFileSuffix); }

std::string formatFlightDump(const FlightDump& d) {
  ordered_json out;
  out["format"] = kFlightDumpFormat;
  out["version"] = kFlightDumpVersion;
  out["job"] = d.job;
  out["rank"] = d.rank;
  out["world_size"] = d.worldSize;
  out["host"] = d.host;
  out["pid"] = d.pid;
  out["reason"] = d.reason;
  out["steady_ns"] = d.steadyNs;
  out["wall_ns"] = d.wallNs;
  ordered_json groups = ordered_json::array();
  for (const FlightGroup& g : d.groups) {
    ordered_json group;
    group["name"] = g.name;
    group["id"] = g.id;
    group["rank"] = g.rank;
    group["size"] = g.size;
    group["capacity"] = g.capacity;
    group["recorded"] = g.recorded;
    group["next_seq"] = g.nextSeq;
    ordered_json entries = ordered_json::array();
    for (const FlightEntry& e : g.entries) {
      ordered_json entry;
      entry["id"] = e.id;
      entry["seq"] = e.seq;
      entry["op"] = e.op;
      entry["state"] = flightStateName(e.state);
      entry["bytes"] = e.bytes;
      if (!e.dtype.empty()) entry["dtype"] = e.dtype;
      if (!e.reduceOp.empty()) entry["reduce_op"] = e.reduceOp;
      if (e.premultiplies()) entry[arg::kPremulFactor] = e.premulFactor;
      if (e.root >= 0) entry["root"] = e.root;
      if (!e.algorithm.empty()) entry["algorithm"] = e.algorithm;
      entry["issue_ns"] = e.issueNs;
      entry["start_ns"] = e.startNs;
      entry["end_ns"] = e.endNs;
      if (!e.error.empty()) entry["error"] = e.error;
      entries.push_back(std::move(entry));
    }
    group["entries"] = std::move(entries);
    groups.push_back(std::move(group));
  }
  out["groups"] = std::move(groups);
  // Error texts may hold bytes that are not UTF-8 (a peer's notice): replace them.
  return out.dump(1, ' ', false, ordered_json::error_handler_t::replace) + "\n";
}

void writeFlightDump(const FlightDump& dump, const std::string& path) {
  // A name of its own per writer: two threads of one process (a failure and a
  // signal) may dump at once, and the last rename wins whole.
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = strCat(path, ".tmp.", ::getpid(), ".", counter++);
  const std::string text = formatFlightDump(dump);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      const int error = errno;
      std::error_code ignored;
      fs::remove(tmp, ignored);
      RINGX_THROW(IoError, "cannot write the flight recorder dump ", tmp, ": ",
                  std::strerror(error), " (set RINGX_DUMP_DIR to a writable directory)");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    RINGX_THROW(IoError, "cannot rename ", tmp, " to ", path, ": ", ec.message());
  }
}

bool looksLikeFlightDump(std::string_view head) {
  const size_t open = head.find_first_not_of(" \t\r\n");
  if (open == std::string_view::npos || head[open] != '{') return false;
  return head.find(strCat("\"", kFlightDumpFormat, "\"")) != std::string_view::npos;
}

FlightDump parseFlightDump(std::string_view text, const std::string& source) {
  json in;
  try {
    in = json::parse(text);
  } catch (const json::exception& e) {
    throw FormatError(strCat(source, " is not a whole flight recorder dump (", e.what(),
                             "); dumps are written whole, so this file was not made by ringx"));
  }
  try {
    if (!in.is_object() || in.value("format", "") != kFlightDumpFormat) {
      throw FormatError(strCat(source, " is not a ringx flight recorder dump (no \"format\": \"",
                               kFlightDumpFormat, "\")"));
    }
    const int version = in.at("version").get<int>();
    if (version > kFlightDumpVersion) {
      throw FormatError(strCat(source, " is a version ", version,
                               " flight recorder dump; this ringx-trace reads up to version ",
                               kFlightDumpVersion, ": use the ringx that wrote it"));
    }
    FlightDump d;
    d.source = source;
    d.job = in.value("job", "");
    d.rank = in.at("rank").get<int32_t>();
    d.worldSize = in.value("world_size", 0);
    d.host = in.value("host", "");
    d.pid = in.value("pid", int64_t{0});
    d.reason = in.value("reason", "");
    d.steadyNs = in.at("steady_ns").get<int64_t>();
    d.wallNs = in.at("wall_ns").get<int64_t>();
    for (const json& g : in.at("groups")) {
      FlightGroup group;
      group.name = g.at("name").get<std::string>();
      group.id = g.value("id", "");
      group.rank = g.at("rank").get<int32_t>();
      group.size = g.at("size").get<int32_t>();
      group.capacity = g.value("capacity", uint64_t{0});
      group.recorded = g.value("recorded", uint64_t{0});
      group.nextSeq = g.value("next_seq", int64_t{0});
      for (const json& e : g.at("entries")) {
        FlightEntry entry;
        entry.id = e.value("id", uint64_t{0});
        entry.seq = e.at("seq").get<int64_t>();
        entry.op = e.at("op").get<std::string>();
        entry.state = stateFromName(e.at("state").get<std::string>(), source);
        entry.bytes = e.value("bytes", uint64_t{0});
        entry.dtype = e.value("dtype", "");
        entry.reduceOp = e.value("reduce_op", "");
        entry.premulFactor = e.value(arg::kPremulFactor, 0.0);
        entry.root = e.value("root", -1);
        entry.algorithm = e.value("algorithm", "");
        entry.issueNs = e.value("issue_ns", int64_t{0});
        entry.startNs = e.value("start_ns", int64_t{0});
        entry.endNs = e.value("end_ns", int64_t{0});
        entry.error = e.value("error", "");
        group.entries.push_back(std::move(entry));
      }
      d.groups.push_back(std::move(group));
    }
    return d;
  } catch (const json::exception& e) {
    throw FormatError(strCat(source, ": not a valid flight recorder dump: ", e.what()));
  }
}

FlightDumpSet readFlightDumps(const std::string& path) {
  FlightDumpSet set;
  set.path = path;
  std::error_code ec;
  std::vector<std::string> files;
  if (fs::is_directory(path, ec)) {
    for (const auto& item : fs::directory_iterator(path, ec)) {
      const std::string name = item.path().filename().string();
      if (isDumpFileName(name)) files.push_back(item.path().string());
    }
    if (ec) RINGX_THROW(IoError, "cannot list ", path, ": ", ec.message());
    std::sort(files.begin(), files.end());
  } else if (fs::exists(path, ec)) {
    files.push_back(path);
  } else {
    RINGX_THROW(IoError, "cannot open ", path,
                ": no such file or directory (give the directory the error message named, "
                "RINGX_DUMP_DIR, or one flight-rank-<N>.json)");
  }
  std::vector<FlightDump> all;
  for (const std::string& file : files) {
    try {
      all.push_back(parseFlightDump(readText(file), file));
    } catch (const Error& e) {
      set.warnings.push_back(strCat("skipped ", e.what()));
    }
  }
  if (all.empty()) return set;
  // The newest dump's job is the one asked about; older jobs' files stay out.
  const auto newest = std::max_element(
      all.begin(), all.end(), [](const auto& a, const auto& b) { return a.wallNs < b.wallNs; });
  const std::string job = newest->job;
  std::map<int32_t, FlightDump> byRank;
  for (FlightDump& d : all) {
    if (d.job != job) {
      set.warnings.push_back(strCat("skipped ", d.source, ": rank ", d.rank,
                                    " of another job (job ", d.job, ", not ", job,
                                    "); give each job its own RINGX_DUMP_DIR"));
      continue;
    }
    const std::string source = d.source;
    auto [it, added] = byRank.try_emplace(d.rank, std::move(d));  // moves only when added
    if (!added) {
      set.warnings.push_back(strCat("rank ", it->first, " has two dumps (", it->second.source,
                                    " and ", source, "); using the first"));
    }
  }
  for (auto& [rank, d] : byRank) set.dumps.push_back(std::move(d));
  return set;
}

}  // namespace ringx::trace
