// Reading trace directories and files: with and without a manifest, a single
// file, files cut off by a crash, and every kind of bad input, which must fail
// with a message naming the path.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/cpp/trace/trace_fixture.h"
#include "trace/read/trace_dir.h"

namespace ringx::trace {
namespace {

using fixture::manifestJson;
using fixture::RankStream;
using fixture::TempDir;
using fixture::writeFile;

// Runs `f`, expects it to throw E, and returns the message.
template <typename E, typename F>
std::string errorOf(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw another type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "did not throw";
  return "";
}

void writeRanks(const TempDir& dir, int worldSize) {
  for (int r = 0; r < worldSize; ++r) {
    RankStream(r, worldSize)
        .collective("allreduce", 0, 1000, 2000, 4096, worldSize)
        .writeTo(dir.file("rank-" + std::to_string(r) + ".ringx"));
  }
}

TEST(TraceDir, ReadsDirectoryWithManifestSortedByRank) {
  TempDir dir;
  // Written out of order, and rank 10 after rank 2 by number, not by name.
  for (int r : {10, 2, 0, 1}) {
    RankStream(r, 11)
        .collective("barrier", 0, 1, 2, 0, 11)
        .writeTo(dir.file("rank-" + std::to_string(r) + ".ringx"));
  }
  writeFile(dir.file("manifest.json"), manifestJson(11));
  writeFile(dir.file("notes.txt"), "not a trace, not named like one: ignored");

  const TraceSet set = readTrace(dir.path());
  ASSERT_EQ(set.ranks.size(), 4u);
  EXPECT_EQ(set.ranks[0].header.rank, 0);
  EXPECT_EQ(set.ranks[1].header.rank, 1);
  EXPECT_EQ(set.ranks[2].header.rank, 2);
  EXPECT_EQ(set.ranks[3].header.rank, 10);
  ASSERT_TRUE(set.manifest.has_value());
  EXPECT_EQ(set.manifest->worldSize, 11);
  EXPECT_EQ(set.manifest->startWallNs, 1700000000000000000);
  ASSERT_EQ(set.manifest->ranks.size(), 11u);
  EXPECT_EQ(set.manifest->ranks[1].file, "rank-1.ringx");
  EXPECT_EQ(set.manifest->ranks[1].pid, 1001);
  EXPECT_EQ(set.worldSize(), 11);
  EXPECT_EQ(set.missingRanks(), (std::vector<int32_t>{3, 4, 5, 6, 7, 8, 9}));
  // The manifest's missing files and the missing ranks are warnings, not errors.
  bool warnedMissing = false;
  for (const std::string& w : set.warnings) {
    warnedMissing = warnedMissing || w.find("no trace for ranks 3, 4, 5") != std::string::npos;
  }
  EXPECT_TRUE(warnedMissing);
  EXPECT_EQ(set.findRank(10), &set.ranks[3]);
  EXPECT_EQ(set.findRank(5), nullptr);
}

TEST(TraceDir, AWrittenManifestReadsBackAndNamesTheRankFiles) {
  TempDir dir;
  Manifest m;
  m.worldSize = 2;
  m.startWallNs = 1700000000000000000;
  m.ranks = {{0, "node \"a\"", 1000, "rank-0.ringx"}, {1, "node-b", 1001, "rank-1.ringx"}};
  writeManifest(dir.path(), m);
  for (int r = 0; r < 2; ++r)
    RankStream(r, 2, m.ranks[r].host).writeTo(dir.file("rank-" + std::to_string(r) + ".ringx"));
  const TraceSet set = readTrace(dir.path());
  ASSERT_TRUE(set.manifest.has_value());
  EXPECT_EQ(set.manifest->worldSize, 2);
  EXPECT_EQ(set.manifest->startWallNs, m.startWallNs);
  ASSERT_EQ(set.manifest->ranks.size(), 2u);
  EXPECT_EQ(set.manifest->ranks[0].host, "node \"a\"");  // escaped on the way out
  EXPECT_EQ(set.manifest->ranks[1].pid, 1001);
  EXPECT_EQ(set.manifest->ranks[1].file, "rank-1.ringx");
  EXPECT_TRUE(set.warnings.empty());
  EXPECT_FALSE(std::filesystem::exists(dir.file("manifest.json.tmp")));
}

TEST(TraceDir, ReadsDirectoryWithoutManifest) {
  TempDir dir;
  writeRanks(dir, 3);
  const TraceSet set = readTrace(dir.path());
  EXPECT_FALSE(set.manifest.has_value());
  ASSERT_EQ(set.ranks.size(), 3u);
  EXPECT_EQ(set.worldSize(), 3);
  EXPECT_TRUE(set.warnings.empty()) << set.warnings[0];
  EXPECT_EQ(set.ranks[2].events.size(), 1u);
  EXPECT_EQ(set.ranks[2].source, dir.file("rank-2.ringx"));
}

TEST(TraceDir, ReadsManifestPathAsItsDirectory) {
  TempDir dir;
  writeRanks(dir, 2);
  writeFile(dir.file("manifest.json"), manifestJson(2));
  const TraceSet set = readTrace(dir.file("manifest.json"));
  EXPECT_TRUE(set.manifest.has_value());
  EXPECT_EQ(set.ranks.size(), 2u);
}

TEST(TraceDir, ReadsFilesTheManifestNamesOtherwise) {
  TempDir dir;
  RankStream(0, 1).collective("barrier", 0, 1, 2, 0, 1).writeTo(dir.file("first.ringx"));
  writeFile(dir.file("manifest.json"),
            R"({"format": "ringx-trace", "schema_version": 1, "world_size": 1,
                "ranks": [{"rank": 0, "file": "first.ringx"}]})");
  const TraceSet set = readTrace(dir.path());
  ASSERT_EQ(set.ranks.size(), 1u);
  EXPECT_EQ(set.ranks[0].source, dir.file("first.ringx"));
}

TEST(TraceDir, ReadsSingleFile) {
  TempDir dir;
  writeRanks(dir, 2);
  const TraceSet set = readTrace(dir.file("rank-1.ringx"));
  ASSERT_EQ(set.ranks.size(), 1u);
  EXPECT_EQ(set.ranks[0].header.rank, 1);
  EXPECT_FALSE(set.manifest.has_value());
  EXPECT_TRUE(set.warnings.empty());
}

TEST(TraceDir, TruncatedFileIsReadWithAWarning) {
  TempDir dir;
  writeRanks(dir, 2);
  RankStream stream(1, 2);
  stream.collective("allreduce", 0, 1000, 2000, 4096).collective("allreduce", 1, 3000, 4000, 4096);
  const std::string bytes = stream.bytes();
  writeFile(dir.file("rank-1.ringx"), bytes.substr(0, bytes.size() - 3));  // inside the last event

  const TraceSet set = readTrace(dir.path());
  ASSERT_EQ(set.ranks.size(), 2u);
  EXPECT_TRUE(set.ranks[1].truncated);
  EXPECT_FALSE(set.ranks[0].truncated);
  EXPECT_EQ(set.ranks[1].events.size(), 1u);
  EXPECT_EQ(set.truncatedRanks(), std::vector<int32_t>{1});
  ASSERT_EQ(set.warnings.size(), 1u);
  EXPECT_NE(set.warnings[0].find("rank-1.ringx is cut off"), std::string::npos) << set.warnings[0];

  // A single truncated file reads the same way.
  const TraceSet single = readTrace(dir.file("rank-1.ringx"));
  EXPECT_TRUE(single.ranks[0].truncated);
  EXPECT_EQ(single.warnings.size(), 1u);
}

TEST(TraceDir, FileWithoutHeaderIsSkippedInADirectory) {
  TempDir dir;
  writeRanks(dir, 2);
  // Rank 1 died right after creating its file.
  writeFile(dir.file("rank-1.ringx"), RankStream(1, 2).bytes().substr(0, 5));
  const TraceSet set = readTrace(dir.path());
  ASSERT_EQ(set.ranks.size(), 1u);
  EXPECT_EQ(set.missingRanks(), std::vector<int32_t>{1});
  ASSERT_EQ(set.warnings.size(), 2u);
  EXPECT_NE(set.warnings[0].find("ends before its stream header"), std::string::npos);
  // On its own it is an error: there is nothing to read.
  const std::string message = errorOf<FormatError>([&] { readTrace(dir.file("rank-1.ringx")); });
  EXPECT_NE(message.find("rank-1.ringx ends before its stream header"), std::string::npos)
      << message;
}

TEST(TraceDir, MissingPathIsAnIoError) {
  TempDir dir;
  const std::string path = dir.file("no-such-trace");
  const std::string message = errorOf<IoError>([&] { readTrace(path); });
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("does not exist"), std::string::npos) << message;
}

TEST(TraceDir, DirectoryWithoutRankFilesIsAFormatError) {
  TempDir dir;
  writeFile(dir.file("other.txt"), "hello");
  const std::string message = errorOf<FormatError>([&] { readTrace(dir.path()); });
  EXPECT_NE(message.find("no rank-<N>.ringx files in " + dir.path()), std::string::npos) << message;
  EXPECT_NE(message.find("not a ringx trace directory"), std::string::npos) << message;
}

TEST(TraceDir, ForeignFilesAreFormatErrors) {
  TempDir dir;
  writeRanks(dir, 1);
  writeFile(dir.file("rank-1.ringx"), "{\"traceEvents\": []}\n");
  std::string message = errorOf<FormatError>([&] { readTrace(dir.path()); });
  EXPECT_NE(message.find("not a ringx trace"), std::string::npos) << message;
  EXPECT_NE(message.find(dir.file("rank-1.ringx")), std::string::npos) << message;
  EXPECT_NE(message.find("move the file out of"), std::string::npos) << message;

  writeFile(dir.file("foreign.json"), "{\"traceEvents\": []}\n");
  message = errorOf<FormatError>([&] { readTrace(dir.file("foreign.json")); });
  EXPECT_NE(message.find(dir.file("foreign.json")), std::string::npos) << message;
}

TEST(TraceDir, CorruptFileIsAFormatErrorNamingIt) {
  TempDir dir;
  writeRanks(dir, 2);
  RankStream stream(1, 2);
  stream.collective("allreduce", 0, 1000, 2000, 4096);
  std::string bytes = stream.bytes();
  bytes += std::string("\x02\x00\x00\x00\x03\x09", 6);  // an event record of kind 9
  writeFile(dir.file("rank-1.ringx"), bytes);
  const std::string message = errorOf<FormatError>([&] { readTrace(dir.path()); });
  EXPECT_NE(message.find(dir.file("rank-1.ringx")), std::string::npos) << message;
  EXPECT_NE(message.find("corrupt"), std::string::npos) << message;
}

TEST(TraceDir, DuplicateRanksAreAnError) {
  TempDir dir;
  writeRanks(dir, 2);
  RankStream(1, 2).writeTo(dir.file("rank-1-old.ringx"));
  const std::string message = errorOf<FormatError>([&] { readTrace(dir.path()); });
  EXPECT_NE(message.find("two trace files for rank 1"), std::string::npos) << message;
  EXPECT_NE(message.find("rank-1.ringx"), std::string::npos) << message;
  EXPECT_NE(message.find("rank-1-old.ringx"), std::string::npos) << message;
}

TEST(TraceDir, ManifestThatIsNotJsonIsAnError) {
  TempDir dir;
  writeRanks(dir, 2);
  writeFile(dir.file("manifest.json"), "{\"format\": \"ringx-trace\", \"world_si");
  const std::string message = errorOf<FormatError>([&] { readTrace(dir.path()); });
  EXPECT_NE(message.find(dir.file("manifest.json") + " is not valid JSON"), std::string::npos)
      << message;
  EXPECT_NE(message.find("move it aside"), std::string::npos) << message;
}

TEST(TraceDir, ManifestOfAnotherKindOrVersionIsAnError) {
  std::string message = errorOf<FormatError>([] {
    parseManifest(R"({"format": "something-else", "schema_version": 1, "world_size": 1})", "m");
  });
  EXPECT_NE(message.find("not a ringx trace manifest"), std::string::npos) << message;
  message = errorOf<FormatError>([] {
    parseManifest(R"({"format": "ringx-trace", "schema_version": 99, "world_size": 1})", "m");
  });
  EXPECT_NE(message.find("schema version 99"), std::string::npos) << message;
  message = errorOf<FormatError>([] {
    parseManifest(R"({"format": "ringx-trace", "schema_version": 1, "world_size": "two"})", "m");
  });
  EXPECT_NE(message.find("\"world_size\" should be an integer"), std::string::npos) << message;
  message = errorOf<FormatError>([] {
    parseManifest(
        R"({"format": "ringx-trace", "schema_version": 1, "world_size": 2, "ranks": [{"rank": 5}]})",
        "m");
  });
  EXPECT_NE(message.find("ranks[0].rank"), std::string::npos) << message;
  message = errorOf<FormatError>([] { parseManifest("[1, 2]", "m"); });
  EXPECT_NE(message.find("JSON object"), std::string::npos) << message;
}

TEST(TraceDir, RankFileNamedForAnotherRankIsReadAsItsHeaderSays) {
  TempDir dir;
  RankStream(0, 2).writeTo(dir.file("rank-0.ringx"));
  RankStream(1, 2).writeTo(dir.file("rank-7.ringx"));
  const TraceSet set = readTrace(dir.path());
  ASSERT_EQ(set.ranks.size(), 2u);
  EXPECT_EQ(set.ranks[1].header.rank, 1);
  ASSERT_EQ(set.warnings.size(), 1u);
  EXPECT_NE(set.warnings[0].find("holds rank 1's trace"), std::string::npos) << set.warnings[0];
}

}  // namespace
}  // namespace ringx::trace
