#include "trace/format/manifest.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/json_text.h"

namespace ringx::trace {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

[[noreturn]] void badField(const std::string& source, const std::string& field,
                           const char* expected) {
  RINGX_THROW(FormatError, source, ": \"", field, "\" should be ", expected,
              "; the manifest is damaged (move it aside to read the rank files without it)");
}

// `where` is the object's path in the manifest ("ranks[2]"), empty at the top.
[[noreturn]] void missingField(const std::string& source, const std::string& where,
                               const char* key) {
  RINGX_THROW(FormatError, source, ": ", where.empty() ? "the manifest" : where, " has no \"", key,
              "\"; the manifest is damaged (move it aside to read the rank files without it)");
}

std::string fieldPath(const std::string& where, const char* key) {
  return where.empty() ? std::string(key) : where + "." + key;
}

int64_t intField(const json& object, const char* key, bool required, int64_t fallback,
                 const std::string& source, const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end()) {
    if (required) missingField(source, where, key);
    return fallback;
  }
  if (!it->is_number_integer()) badField(source, fieldPath(where, key), "an integer");
  return it->get<int64_t>();
}

std::string stringField(const json& object, const char* key, bool required,
                        const std::string& source, const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end()) {
    if (required) missingField(source, where, key);
    return std::string();
  }
  if (!it->is_string()) badField(source, fieldPath(where, key), "a string");
  return it->get<std::string>();
}

}  // namespace

std::string rankFileName(const std::string& dir, int rank) {
  return strCat(dir, dir.empty() || dir.back() == '/' ? "" : "/", "rank-", rank, ".ringx");
}

bool rankFromFileName(const std::string& name, int32_t* rank) {
  constexpr std::string_view kPrefix = "rank-";
  constexpr std::string_view kSuffix = ".ringx";
  if (name.size() <= kPrefix.size() + kSuffix.size()) return false;
  if (name.compare(0, kPrefix.size(), kPrefix) != 0) return false;
  if (name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) return false;
  const std::string digits =
      name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  if (digits.empty() || digits.size() > 9) return false;
  int32_t value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  *rank = value;
  return true;
}

bool looksLikeRankFile(const std::string& name) {
  return name.rfind("rank-", 0) == 0 && name.size() > 11 &&
         name.compare(name.size() - 6, 6, ".ringx") == 0;
}

Manifest parseManifest(std::string_view text, const std::string& source) {
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    RINGX_THROW(FormatError, source, " is not valid JSON (", e.what(),
                "); rank 0 may have died while writing it: move it aside to read the rank files "
                "without it");
  }
  if (!root.is_object()) badField(source, "the top level", "a JSON object");
  const std::string format = stringField(root, "format", true, source, "");
  if (format != kManifestFormat) {
    RINGX_THROW(FormatError, source, " is not a ringx trace manifest (its format is \"", format,
                "\", not \"", kManifestFormat, "\")");
  }
  Manifest m;
  const int64_t version = intField(root, "schema_version", true, 0, source, "");
  if (version < 1 || version > kSchemaVersion) {
    RINGX_THROW(FormatError, source, ": trace schema version ", version,
                " is not supported by this reader (it reads versions 1 to ", kSchemaVersion,
                "); use the ringx build that recorded it");
  }
  m.schemaVersion = static_cast<uint32_t>(version);
  const int64_t worldSize = intField(root, "world_size", true, 0, source, "");
  if (worldSize < 1 || worldSize > (1 << 24)) badField(source, "world_size", "a positive integer");
  m.worldSize = static_cast<int32_t>(worldSize);
  m.startWallNs = intField(root, "start_wall_ns", false, 0, source, "");
  const auto ranks = root.find("ranks");
  if (ranks != root.end()) {
    if (!ranks->is_array()) badField(source, "ranks", "an array");
    for (size_t i = 0; i < ranks->size(); ++i) {
      const json& entry = (*ranks)[i];
      const std::string where = strCat("ranks[", i, "]");
      if (!entry.is_object()) badField(source, where, "an object");
      ManifestRank r;
      const int64_t rank = intField(entry, "rank", true, 0, source, where);
      if (rank < 0 || rank >= m.worldSize) {
        badField(source, where + ".rank", "a rank below world_size");
      }
      r.rank = static_cast<int32_t>(rank);
      r.host = stringField(entry, "host", false, source, where);
      r.pid = intField(entry, "pid", false, 0, source, where);
      r.file = stringField(entry, "file", false, source, where);
      m.ranks.push_back(std::move(r));
    }
  }
  return m;
}

std::string formatManifest(const Manifest& m) {
  std::string out =
      strCat("{\n  \"format\": \"", kManifestFormat, "\",\n  \"schema_version\": ", m.schemaVersion,
             ",\n  \"world_size\": ", m.worldSize, ",\n  \"start_wall_ns\": ", m.startWallNs,
             ",\n  \"ranks\": [\n");
  for (size_t i = 0; i < m.ranks.size(); ++i) {
    const ManifestRank& r = m.ranks[i];
    out += strCat("    {\"rank\": ", r.rank, ", \"host\": ");
    appendJsonString(out, r.host);
    out += strCat(", \"pid\": ", r.pid, ", \"file\": ");
    appendJsonString(out, r.file);
    out += i + 1 < m.ranks.size() ? "},\n" : "}\n";
  }
  out += "  ]\n}\n";
  return out;
}

void writeManifest(const std::string& dir, const Manifest& manifest) {
  const std::string path = dir + "/" + kManifestFile;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << formatManifest(manifest);
    out.flush();
    if (!out)
      RINGX_THROW(IoError, "cannot write the trace manifest ", tmp, ": ", std::strerror(errno));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) RINGX_THROW(IoError, "cannot rename ", tmp, " to ", path, ": ", ec.message());
}

}  // namespace ringx::trace
