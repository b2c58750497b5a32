// Synthetic traces for the reader-side tests (trace_dir, alignment, export,
// summary): a temporary directory, and a builder that writes one rank's stream
// with trace::Encoder the way the recorder does (magic, header, strings defined
// before first use, events, clock syncs, dropped counts).
#pragma once

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "trace/format/codec.h"

namespace ringx::trace::fixture {

inline constexpr int64_t kMs = 1000000;  // ns

// A fresh directory, removed with its contents when the test ends.
class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "ringx-trace-test-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void writeFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

// An argument to write: int, double or string, by key name.
struct TestArg {
  TestArg(std::string k, int v) : key(std::move(k)), type(ArgType::kInt), i(v) {}
  TestArg(std::string k, int64_t v) : key(std::move(k)), type(ArgType::kInt), i(v) {}
  TestArg(std::string k, double v) : key(std::move(k)), type(ArgType::kDouble), d(v) {}
  TestArg(std::string k, const char* v) : key(std::move(k)), type(ArgType::kString), s(v) {}
  TestArg(std::string k, std::string v)
      : key(std::move(k)), type(ArgType::kString), s(std::move(v)) {}
  std::string key;
  ArgType type;
  int64_t i = 0;
  double d = 0;
  std::string s;
};

// One rank's stream, built event by event.
class RankStream {
 public:
  explicit RankStream(int rank, int worldSize = 2, std::string host = "node-a", int64_t startNs = 0)
      : rank_(rank) {
    enc_.magic();
    StreamHeader h;
    h.rank = rank;
    h.worldSize = worldSize;
    h.pid = 1000 + rank;
    h.host = std::move(host);
    h.startSteadyNs = startNs;
    h.startWallNs = 1700000000000000000;
    enc_.header(h);
  }

  // The id of `text`, defining it on first use.
  uint32_t id(const std::string& text) {
    if (text.empty()) return 0;
    auto it = ids_.find(text);
    if (it != ids_.end()) return it->second;
    const uint32_t next = static_cast<uint32_t>(ids_.size()) + 1;
    ids_.emplace(text, next);
    enc_.string(next, text);
    return next;
  }

  RankStream& event(EventKind kind, Category category, const std::string& track,
                    const std::string& name, int64_t begin, int64_t end, double value,
                    const std::vector<TestArg>& args) {
    std::vector<Arg> encoded;
    for (const TestArg& t : args) {
      Arg a;
      a.key = id(t.key);
      a.type = t.type;
      a.intValue = t.i;
      a.doubleValue = t.d;
      if (t.type == ArgType::kString) a.stringId = id(t.s);
      encoded.push_back(a);
    }
    Event e;
    e.kind = kind;
    e.category = category;
    e.rank = rank_;
    e.track = id(track);
    e.name = id(name);
    e.beginNs = begin;
    e.endNs = end;
    e.value = value;
    e.argCount = static_cast<uint32_t>(encoded.size());
    enc_.event(e, encoded.data());
    return *this;
  }

  RankStream& span(Category category, const std::string& track, const std::string& name,
                   int64_t begin, int64_t end, const std::vector<TestArg>& args = {}) {
    return event(EventKind::kSpan, category, track, name, begin, end, 0, args);
  }
  RankStream& instant(Category category, const std::string& track, const std::string& name,
                      int64_t at, const std::vector<TestArg>& args = {}) {
    return event(EventKind::kInstant, category, track, name, at, at, 0, args);
  }
  RankStream& counter(const std::string& name, int64_t at, double value) {
    return event(EventKind::kCounter, Category::kMemory, track::kMemory, name, at, at, value, {});
  }
  // A collective as the backend records it on group `group` of `groupSize` ranks.
  RankStream& collective(const std::string& op, int64_t seq, int64_t begin, int64_t end,
                         int64_t bytes, int groupSize = 2, const std::string& group = "world",
                         std::vector<TestArg> extra = {}) {
    std::vector<TestArg> args = {{arg::kBytes, bytes},          {arg::kSeq, seq},
                                 {arg::kGroup, group},          {arg::kGroupRank, rank_},
                                 {arg::kGroupSize, groupSize},  {arg::kDtype, "float32"},
                                 {arg::kEnqueueNs, begin - 100}};
    args.insert(args.end(), extra.begin(), extra.end());
    return span(Category::kCollective, std::string(track::kCommPrefix) + group, op, begin, end,
                args);
  }
  RankStream& clockSync(int64_t localNs, int64_t offsetNs, int64_t uncertaintyNs) {
    enc_.clockSync(ClockSync{localNs, offsetNs, uncertaintyNs});
    return *this;
  }
  RankStream& dropped(int64_t localNs, uint64_t count) {
    enc_.dropped(Dropped{localNs, count, 0});
    return *this;
  }

  const std::string& bytes() const { return enc_.bytes(); }
  void writeTo(const std::string& path) const { writeFile(path, bytes()); }

 private:
  int rank_;
  Encoder enc_;
  std::map<std::string, uint32_t> ids_;
};

// The manifest the recorder's rank 0 writes for `worldSize` ranks on host "node-a".
inline std::string manifestJson(int worldSize) {
  std::string ranks;
  for (int r = 0; r < worldSize; ++r) {
    ranks += (r ? ", " : "") + std::string("{\"rank\": ") + std::to_string(r) +
             ", \"host\": \"node-a\", \"pid\": " + std::to_string(1000 + r) +
             ", \"file\": \"rank-" + std::to_string(r) + ".ringx\"}";
  }
  return "{\"format\": \"ringx-trace\", \"schema_version\": 1, \"world_size\": " +
         std::to_string(worldSize) + ", \"start_wall_ns\": 1700000000000000000, \"ranks\": [" +
         ranks + "]}";
}

}  // namespace ringx::trace::fixture
