// torch's Flight Recorder dumps (torch_flight.h): pickles and JSON into one set.
#include "trace/read/torch_flight.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/text.h"
#include "trace/format/codec.h"
#include "trace/format/dtype_size.h"
#include "trace/read/pickle_data.h"

namespace ringx::trace {
namespace {

using nlohmann::json;

std::string frText(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  return {};
}

// A number, or one written as text ("4": the JSON form's pg_status).
int64_t frInteger(const json& o, const char* key, int64_t fallback) {
  const auto it = o.find(key);
  if (it == o.end()) return fallback;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (!it->is_string()) return fallback;
  const std::string& text = it->get_ref<const std::string&>();
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size() ? value : fallback;
}

// "[0, 1, 2]" (as FR writes a group's ranks) or a real list.
std::vector<int32_t> frRanks(const json& v) {
  std::vector<int32_t> out;
  if (v.is_array()) {
    for (const json& r : v)
      if (r.is_number_integer()) out.push_back(r.get<int32_t>());
    return out;
  }
  for (int64_t r : integersIn(frText(v))) out.push_back(static_cast<int32_t>(r));
  return out;
}

// The number that ends a file's name, before an extension: "_dump_12" -> 12, "rank3.json" -> 3;
// -1 when none.
int32_t rankOfName(std::string name) {
  const size_t dot = name.rfind('.');
  if (dot != std::string::npos && dot + 1 < name.size() &&
      std::isalpha(static_cast<unsigned char>(name[dot + 1]))) {
    name.resize(dot);
  }
  size_t begin = name.size();
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(name[begin - 1]))) --begin;
  if (begin == name.size() || name.size() - begin > 9) return -1;
  return static_cast<int32_t>(std::stol(name.substr(begin)));
}

// A dump as read, and the pg_status of local pg_ids that nothing in it names (a rank that issued
// no collective: its entries name no group), for readTorchFlightDumps to name from the others.
struct Interpreted {
  TorchFlightDump dump;
  std::map<std::string, TorchFlightGroup> unnamedStatus;  // by pg_id
};

Interpreted interpret(const json& d, const std::string& source) {
  Interpreted result;
  TorchFlightDump& out = result.dump;
  out.source = source;
  out.version = frText(d.value("version", json()));
  out.ncclVersion = frText(d.value("nccl_version", json()));
  out.rank = static_cast<int32_t>(frInteger(d, "rank", -1));
  if (out.rank < 0) out.rank = rankOfName(std::filesystem::path(source).filename().string());
  std::map<std::string, size_t> groupOf;
  if (const auto cfg = d.find("pg_config"); cfg != d.end() && cfg->is_object()) {
    for (const auto& [name, c] : cfg->items()) {
      TorchFlightGroup g;
      g.name = c.is_object() && c.contains("name") ? frText(c["name"]) : name;
      if (c.is_object()) {
        g.desc = frText(c.value("desc", json()));
        g.ranks = frRanks(c.value("ranks", json()));
      }
      groupOf[g.name] = out.groups.size();
      out.groups.push_back(std::move(g));
    }
  }
  std::map<std::string, std::string> nameOfPgId, descOf;
  if (const auto entries = d.find("entries"); entries != d.end() && entries->is_array()) {
    for (const json& e : *entries) {
      if (!e.is_object()) continue;
      TorchFlightEntry x;
      const json pg = e.value("process_group", json());
      if (pg.is_array() && !pg.empty()) x.group = frText(pg[0]);
      if (pg.is_array() && pg.size() > 1) x.desc = frText(pg[1]);
      if (const auto id = e.find("pg_id"); id != e.end() && !x.group.empty()) {
        nameOfPgId[frText(*id)] = x.group;
        descOf[x.group] = x.desc;
      }
      x.p2p = e.value("is_p2p", false);
      x.retired = e.value("retired", false);
      x.seq = frInteger(e, x.p2p ? "p2p_seq_id" : "collective_seq_id", -1);
      x.op = frText(e.value("profiling_name", json()));
      if (out.backend.empty() && x.op.find(':') != std::string::npos)
        out.backend = x.op.substr(0, x.op.find(':'));
      x.state = frText(e.value("state", json()));
      x.createdNs = frInteger(e, "time_created_ns", 0);
      x.startedNs = frInteger(e, "time_discovered_started_ns", 0);  // None (pickle), null: 0
      x.completedNs = frInteger(e, "time_discovered_completed_ns", 0);
      const json sizes = e.value("input_sizes", json());
      if (sizes.is_array() && !sizes.empty() && sizes[0].is_array()) {
        for (const json& s : sizes[0])
          if (s.is_number_integer()) x.inputSize.push_back(s.get<int64_t>());
      }
      const json dtypes = e.value("input_dtypes", json());
      if (dtypes.is_array() && !dtypes.empty()) x.dtype = frText(dtypes[0]);
      out.entries.push_back(std::move(x));
    }
  }
  // pg_status is keyed by the rank's own pg_id: an entry ties an id to its name, and the
  // default group (created first) is 0.
  if (!nameOfPgId.count("0")) {
    for (const TorchFlightGroup& g : out.groups)
      if (g.desc == "default_pg") nameOfPgId["0"] = g.name;
  }
  if (const auto status = d.find("pg_status"); status != d.end() && status->is_object()) {
    for (const auto& [id, s] : status->items()) {
      if (!s.is_object()) continue;
      TorchFlightGroup seen;
      seen.statusKnown = true;
      seen.lastEnqueued = frInteger(s, "last_enqueued_collective", -1);
      seen.lastStarted = frInteger(s, "last_started_collective", -1);
      seen.lastCompleted = frInteger(s, "last_completed_collective", -1);
      const auto name = nameOfPgId.find(id);
      if (name == nameOfPgId.end()) {
        result.unnamedStatus[id] = seen;
        continue;
      }
      auto g = groupOf.find(name->second);
      if (g == groupOf.end()) {
        groupOf[name->second] = out.groups.size();
        out.groups.push_back({name->second, descOf[name->second], {}, false, -1, -1, -1});
        g = groupOf.find(name->second);
      }
      TorchFlightGroup& group = out.groups[g->second];
      group.statusKnown = true;
      group.lastEnqueued = seen.lastEnqueued;
      group.lastStarted = seen.lastStarted;
      group.lastCompleted = seen.lastCompleted;
    }
  }
  return result;
}

// pg_id 0 is the default group on every rank: a dump that cannot name its status "0" itself
// gets the name (and description) another dump gives it. Then each dump's statusComplete.
void resolveStatuses(std::vector<Interpreted>& dumps) {
  std::string name, desc;  // the default group's, where some dump names it
  for (const Interpreted& d : dumps) {
    for (const TorchFlightGroup& g : d.dump.groups) {
      if (name.empty() && g.statusKnown && g.desc == "default_pg") {
        name = g.name;
        desc = g.desc;
      }
    }
  }
  for (Interpreted& d : dumps) {
    auto unnamed = d.unnamedStatus.find("0");
    if (name.empty() || unnamed == d.unnamedStatus.end()) {
      d.dump.statusComplete = d.unnamedStatus.empty();
      continue;
    }
    TorchFlightGroup status = unnamed->second;
    status.name = name;
    status.desc = desc;
    auto same = std::find_if(d.dump.groups.begin(), d.dump.groups.end(),
                             [&](const TorchFlightGroup& g) { return g.name == name; });
    if (same == d.dump.groups.end()) {
      d.dump.groups.push_back(std::move(status));
    } else {  // configured without a status: keep its members
      status.ranks = std::move(same->ranks);
      *same = std::move(status);
    }
    d.unnamedStatus.erase(unnamed);
    d.dump.statusComplete = d.unnamedStatus.empty();
  }
}

}  // namespace

std::string TorchFlightEntry::call() const {
  const size_t colon = op.find(':');
  return colon == std::string::npos ? op : op.substr(colon + 1);
}

uint64_t TorchFlightEntry::bytes() const {
  int64_t elements = inputSize.empty() ? 0 : 1;
  for (int64_t d : inputSize) elements *= d;
  return static_cast<uint64_t>(std::max<int64_t>(0, elements * dtypeBytes(dtype)));
}

FlightState TorchFlightEntry::flightState() const {
  if (state == "completed" || (retired && state != "started")) return FlightState::kFinished;
  return state == "started" ? FlightState::kStarted : FlightState::kIssued;
}

int32_t TorchGroupMembers::groupRankOf(int32_t rank) const {
  const auto it = std::find(ranks.begin(), ranks.end(), rank);
  return it == ranks.end() ? -1 : static_cast<int32_t>(it - ranks.begin());
}

std::string TorchGroupMembers::label() const {
  return desc.empty() || desc == "undefined" ? name : strCat(name, " (", desc, ")");
}

const TorchGroupMembers* TorchJobGroups::find(std::string_view name) const {
  const auto it =
      std::lower_bound(groups.begin(), groups.end(), name,
                       [](const TorchGroupMembers& g, std::string_view n) { return g.name < n; });
  return it != groups.end() && it->name == name ? &*it : nullptr;
}

TorchJobGroups torchGroupMembers(const TorchFlightSet& set) {
  TorchJobGroups out;
  struct Seen {
    TorchGroupMembers group;
    std::set<int32_t> naming;  // ranks whose status or entries name it
  };
  std::map<std::string, Seen> groups;
  for (const TorchFlightDump& d : set.dumps) {
    out.worldSize = std::max(out.worldSize, d.rank + 1);
    for (const TorchFlightGroup& g : d.groups) {
      // gloo's nameless pg_config entry names no group, yet rank 0's lists the world.
      for (int32_t r : g.ranks) out.worldSize = std::max(out.worldSize, r + 1);
      if (g.name.empty()) continue;
      Seen& seen = groups[g.name];
      seen.group.name = g.name;
      if (seen.group.ranks.empty() && !g.ranks.empty()) {
        seen.group.ranks = g.ranks;
        seen.group.desc = g.desc;
      } else if (seen.group.desc.empty()) {
        seen.group.desc = g.desc;
      }
      if (g.statusKnown) seen.naming.insert(d.rank);
    }
    for (const TorchFlightEntry& e : d.entries) {
      if (e.group.empty()) continue;
      Seen& seen = groups[e.group];
      seen.group.name = e.group;
      if (seen.group.desc.empty()) seen.group.desc = e.desc;
      seen.naming.insert(d.rank);
      (e.p2p ? seen.group.p2p : seen.group.collectives) = true;
    }
  }
  for (auto& [name, seen] : groups) {
    TorchGroupMembers& g = seen.group;
    if (g.ranks.empty() && g.desc == "default_pg") {
      for (int32_t r = 0; r < out.worldSize; ++r) g.ranks.push_back(r);
    } else if (g.ranks.empty()) {
      g.ranks.assign(seen.naming.begin(), seen.naming.end());
      g.fromDumps = true;
    }
    out.groups.push_back(std::move(g));
  }
  return out;
}

bool looksLikeTorchFlightDump(std::string_view head) {
  const bool pickle = looksLikePickle(head);
  const size_t open = head.find_first_not_of(" \t\r\n");
  if (!pickle && (open == std::string_view::npos || head[open] != '{')) return false;
  // A torch.profiler (Kineto) trace names the process groups too, a pg_config in its
  // distributedInfo, but it is a Chrome trace: its first key is schemaVersion, its events are
  // traceEvents (a dump, JSON or pickle, has neither).
  for (const char* key : {"\"traceEvents\"", "\"schemaVersion\""})
    if (!pickle && head.find(key) != std::string_view::npos) return false;
  // Keys as a pickle holds them (plain bytes) and as JSON does.
  for (const char* key : {"pg_config", "pg_status", "profiling_name"})
    if (head.find(key) != std::string_view::npos) return true;
  return false;
}

TorchFlightSet readTorchFlightDumps(const std::string& path) {
  TorchFlightSet set;
  set.path = path;
  std::vector<std::filesystem::path> files;
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    for (const auto& e : std::filesystem::directory_iterator(path, error))
      if (e.is_regular_file()) files.push_back(e.path());
  } else if (std::filesystem::is_regular_file(path, error)) {
    files.push_back(path);
  } else {
    throw IoError(strCat("cannot read ", path, ": no such file or directory"));
  }
  std::sort(files.begin(), files.end());
  std::vector<Interpreted> read;
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    const std::string data = bytes.str();
    const std::string source = file.string();
    json d;
    try {
      if (looksLikePickle(data)) {
        d = readPickleData(data, source);
      } else if (!data.empty() && data.find_first_not_of(" \t\r\n") != std::string::npos &&
                 data[data.find_first_not_of(" \t\r\n")] == '{') {
        d = json::parse(data);
      } else {
        continue;  // another kind of file (a log, the expected analysis)
      }
    } catch (const FormatError& e) {
      set.warnings.push_back(e.what());
      continue;
    } catch (const json::exception& e) {
      // A dump cut off (its rank killed while writing it), or another broken file: say which.
      set.warnings.push_back(
          strCat(source, ": starts as JSON but does not parse (cut off?): ", e.what()));
      continue;
    }
    if (!d.is_object() || (!d.contains("entries") && !d.contains("pg_config"))) continue;
    Interpreted dump = interpret(d, source);
    if (dump.dump.rank < 0) {
      set.warnings.push_back(strCat(source,
                                    ": a Flight Recorder dump whose rank neither its "
                                    "\"rank\" nor its file name says; left out"));
      continue;
    }
    read.push_back(std::move(dump));
  }
  resolveStatuses(read);
  for (Interpreted& d : read) set.dumps.push_back(std::move(d.dump));
  std::sort(set.dumps.begin(), set.dumps.end(),
            [](const TorchFlightDump& a, const TorchFlightDump& b) { return a.rank < b.rank; });
  return set;
}

}  // namespace ringx::trace
