// The trace codec: round trips of every record type, files cut off at every byte,
// foreign and corrupt input, a randomized decoder fuzz, and the schema guard.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <random>

#include "trace/format/codec.h"

namespace ringx::trace {
namespace {

// A small stream with every record type and argument type.
std::string sampleStream(RankTrace* expected = nullptr, uint32_t version = kSchemaVersion) {
  Encoder enc;
  enc.magic();
  StreamHeader h;
  h.version = version;
  h.rank = 3;
  h.worldSize = 4;
  h.pid = 4242;
  h.host = "node-a";
  h.startSteadyNs = 123456789;
  h.startWallNs = 1700000000000000000;
  enc.header(h);
  const char* strings[] = {"comm:world", "allreduce", arg::kBytes, arg::kTransport,  "shm",
                           "ratio",      "rss_bytes", "memory",    "dropped by test"};
  for (uint32_t i = 0; i < 9; ++i) enc.string(i + 1, strings[i]);
  Arg args[3];
  args[0].key = 3;
  args[0].type = ArgType::kInt;
  args[0].intValue = -(int64_t{1} << 40);
  args[1].key = 4;
  args[1].type = ArgType::kString;
  args[1].stringId = 5;
  args[2].key = 6;
  args[2].type = ArgType::kDouble;
  args[2].doubleValue = 0.125;
  Event span;
  span.kind = EventKind::kSpan;
  span.category = Category::kCollective;
  span.rank = 3;
  span.track = 1;
  span.name = 2;
  span.beginNs = 1000;
  span.endNs = 5000;
  span.argCount = 3;
  enc.event(span, args);
  Event counter;
  counter.kind = EventKind::kCounter;
  counter.category = Category::kMemory;
  counter.rank = 3;
  counter.track = 8;
  counter.name = 7;
  counter.beginNs = counter.endNs = 6000;
  counter.value = 1.5e9;
  enc.event(counter, nullptr);
  enc.clockSync(ClockSync{7000, -250000, 1200});
  enc.dropped(Dropped{8000, 17, 9});
  if (expected != nullptr) {
    expected->header = h;
    expected->strings.assign(std::begin(strings), std::end(strings));
    expected->strings.insert(expected->strings.begin(), "");
  }
  return enc.bytes();
}

RankTrace decodeAll(const std::string& bytes, size_t chunk = SIZE_MAX) {
  RankTrace trace;
  Decoder decoder(&trace);
  for (size_t at = 0; at < bytes.size(); at += chunk) {
    decoder.feed(bytes.data() + at, std::min(chunk, bytes.size() - at));
  }
  trace.truncated = decoder.pendingBytes() > 0;
  return trace;
}

TEST(TraceCodec, RoundTripsEveryRecordAndArgumentType) {
  RankTrace expected;
  const std::string bytes = sampleStream(&expected);
  for (size_t chunk : {size_t{1}, size_t{7}, bytes.size()}) {
    RankTrace t = decodeAll(bytes, chunk);
    EXPECT_FALSE(t.truncated);
    EXPECT_EQ(t.header.rank, 3);
    EXPECT_EQ(t.header.worldSize, 4);
    EXPECT_EQ(t.header.pid, 4242);
    EXPECT_EQ(t.header.host, "node-a");
    EXPECT_EQ(t.header.startSteadyNs, 123456789);
    EXPECT_EQ(t.header.startWallNs, 1700000000000000000);
    EXPECT_EQ(t.strings, expected.strings);
    ASSERT_EQ(t.events.size(), 2u);
    const Event& span = t.events[0];
    EXPECT_EQ(span.kind, EventKind::kSpan);
    EXPECT_EQ(span.category, Category::kCollective);
    EXPECT_EQ(t.str(span.track), "comm:world");
    EXPECT_EQ(t.str(span.name), "allreduce");
    EXPECT_EQ(span.beginNs, 1000);
    EXPECT_EQ(span.endNs, 5000);
    EXPECT_EQ(t.intArg(span, arg::kBytes), -(int64_t{1} << 40));
    EXPECT_EQ(t.stringArg(span, arg::kTransport), "shm");
    ASSERT_NE(t.findArg(span, "ratio"), nullptr);
    EXPECT_EQ(t.findArg(span, "ratio")->doubleValue, 0.125);
    EXPECT_EQ(t.findArg(span, "missing"), nullptr);
    const Event& counter = t.events[1];
    EXPECT_EQ(counter.kind, EventKind::kCounter);
    EXPECT_EQ(counter.value, 1.5e9);
    EXPECT_EQ(counter.argCount, 0u);
    ASSERT_EQ(t.clockSyncs.size(), 1u);
    EXPECT_EQ(t.clockSyncs[0].offsetNs, -250000);
    EXPECT_EQ(t.clockSyncs[0].uncertaintyNs, 1200);
    EXPECT_EQ(t.dropped, 17u);
  }
}

TEST(TraceCodec, CutOffAtEveryByteReadsUpToTheLastWholeRecord) {
  const std::string bytes = sampleStream();
  const RankTrace whole = decodeAll(bytes);
  size_t lastEvents = 0;
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    RankTrace t;
    Decoder decoder(&t);
    decoder.feed(bytes.data(), cut);  // never throws: a prefix is not corrupt
    EXPECT_LE(t.events.size(), whole.events.size());
    EXPECT_GE(t.events.size(), lastEvents) << "cut at " << cut;
    lastEvents = t.events.size();
    if (cut > 0) {
      EXPECT_GT(decoder.pendingBytes() + decoder.offset(), 0u);
    }
  }
  EXPECT_EQ(lastEvents, whole.events.size());  // the last record is a Dropped record
}

std::string writeTemp(const std::string& bytes) {
  char path[] = "/tmp/ringx-codec-test-XXXXXX";
  const int fd = ::mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  ::close(fd);
  return path;
}

TEST(TraceCodec, FilesTruncatedForeignMissingAndCorrupt) {
  const std::string bytes = sampleStream();
  // Cut inside the last record: readable, flagged truncated.
  std::string path = writeTemp(bytes.substr(0, bytes.size() - 3));
  RankTrace t = readTraceFile(path);
  EXPECT_TRUE(t.truncated);
  EXPECT_EQ(t.events.size(), 2u);
  EXPECT_TRUE(t.clockSyncs.size() == 1u);
  std::remove(path.c_str());

  path = writeTemp("{\"traceEvents\": []}");
  try {
    readTraceFile(path);
    FAIL() << "a JSON file was read as a ringx trace";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("not a ringx trace"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());

  path = writeTemp("");
  EXPECT_THROW(readTraceFile(path), FormatError);
  std::remove(path.c_str());

  EXPECT_THROW(readTraceFile("/nonexistent/rank-0.ringx"), IoError);

  // A record that claims to be huge.
  std::string corrupt = bytes;
  const size_t firstRecord = sizeof(kMagic);
  corrupt[firstRecord + 3] = '\x7f';
  path = writeTemp(corrupt);
  try {
    readTraceFile(path);
    FAIL() << "a corrupt length was accepted";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("claims"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

TEST(TraceCodec, RefusesNewerSchemaVersions) {
  Encoder enc;
  enc.magic();
  StreamHeader h;
  h.version = kSchemaVersion + 1;
  enc.header(h);
  try {
    decodeAll(enc.bytes());
    FAIL() << "a newer schema was accepted";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("not supported"), std::string::npos) << e.what();
  }
}

// Schema 8 changed what reduce_op says (the asked op: AVG, PREMUL_SUM with premul_factor,
// where 7 said SUM), not how records are framed: a stream of every older version reads as
// written.
TEST(TraceCodec, ReadsEveryOlderVersionAsWritten) {
  const RankTrace current = decodeAll(sampleStream());
  for (uint32_t version = 1; version < kSchemaVersion; ++version) {
    SCOPED_TRACE("version " + std::to_string(version));
    const RankTrace t = decodeAll(sampleStream(nullptr, version));
    EXPECT_FALSE(t.truncated);
    EXPECT_EQ(t.header.version, version);
    EXPECT_EQ(t.strings, current.strings);
    ASSERT_EQ(t.events.size(), current.events.size());
    EXPECT_EQ(t.stringArg(t.events[0], arg::kTransport), "shm");
    EXPECT_EQ(t.dropped, current.dropped);
  }
}

TEST(TraceCodec, EventsMustUseDefinedStrings) {
  Encoder enc;
  enc.magic();
  enc.header(StreamHeader{});
  Event e;
  e.name = 5;  // never defined
  enc.event(e, nullptr);
  EXPECT_THROW(decodeAll(enc.bytes()), FormatError);
}

// Found by tests/fuzz/fuzz_trace_decoder (tests/fuzz/regressions/): a span whose begin plus
// duration overflows int64 was signed-overflow UB; it is a corrupt stream.
TEST(TraceCodec, ASpanEndingPastInt64IsAFormatError) {
  // The input's first byte is the fuzzer's chunk size; the rest is the stream.
  std::ifstream file(std::string(RINGX_SOURCE_DIR) +
                         "/tests/fuzz/regressions/fuzz_trace_decoder/span-end-overflows",
                     std::ios::binary);
  ASSERT_TRUE(file) << "the regression input is missing";
  const std::string fuzzed((std::istreambuf_iterator<char>(file)),
                           std::istreambuf_iterator<char>());
  try {
    decodeAll(fuzzed.substr(1), 1 + static_cast<unsigned char>(fuzzed[0]) % 64);
    FAIL() << "the overflowing span was accepted";
  } catch (const FormatError& error) {
    EXPECT_NE(std::string(error.what()).find("overflows"), std::string::npos) << error.what();
  }
}

// Random mutations of a valid stream: the decoder may throw FormatError but must
// never crash, hang or read out of bounds (run under ASan/valgrind to be sure).
TEST(TraceCodec, FuzzedInputOnlyEverThrowsFormatError) {
  const std::string valid = sampleStream();
  std::mt19937_64 rng(20261122);
  int rejected = 0;
  for (int iteration = 0; iteration < 20000; ++iteration) {
    std::string bytes = valid;
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int k = 0; k < edits; ++k) {
      const size_t at = sizeof(kMagic) + rng() % (bytes.size() - sizeof(kMagic));
      switch (rng() % 4) {
        case 0:
          bytes[at] = static_cast<char>(rng());
          break;
        case 1:
          bytes.erase(at, 1 + rng() % 4);
          break;
        case 2:
          bytes.insert(at, 1 + rng() % 4, static_cast<char>(rng()));
          break;
        case 3:
          bytes.resize(at);
          break;
      }
      if (bytes.size() <= sizeof(kMagic)) bytes = valid;
    }
    try {
      decodeAll(bytes, 1 + rng() % 64);
    } catch (const FormatError&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 1000);  // the mutations do hit the checks
}

TEST(TraceCodec, AMillionEventsRoundTrip) {
  Encoder enc;
  enc.magic();
  enc.header(StreamHeader{});
  enc.string(1, "comm:world");
  enc.string(2, "allreduce");
  enc.string(3, arg::kSeq);
  Arg seq;
  seq.key = 3;
  Event e;
  e.kind = EventKind::kSpan;
  e.category = Category::kCollective;
  e.track = 1;
  e.name = 2;
  e.argCount = 1;
  const int kEvents = 1000000;
  for (int i = 0; i < kEvents; ++i) {
    e.beginNs = int64_t{1000} * i + 5'000'000'000'000;
    e.endNs = e.beginNs + 700;
    seq.intValue = i;
    enc.event(e, &seq);
  }
  RankTrace t = decodeAll(enc.bytes(), 1 << 20);
  ASSERT_EQ(t.events.size(), static_cast<size_t>(kEvents));
  EXPECT_EQ(t.intArg(t.events.back(), arg::kSeq), kEvents - 1);
  EXPECT_EQ(t.events.back().endNs - t.events.back().beginNs, 700);
}

// The schema guard. The fingerprint covers the encoding of every record type
// and the names that readers depend on. When this fails you changed the schema:
// bump kSchemaVersion in schema.h and put the new values here.
uint64_t fnv1a(const std::string& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

TEST(TraceSchema, ChangesRequireAVersionBump) {
  std::string fingerprint = sampleStream();
  for (int i = 1; i <= kCategoryCount; ++i) {
    fingerprint += categoryName(static_cast<Category>(i));
  }
  for (int i = 1; i <= 3; ++i) fingerprint += eventKindName(static_cast<EventKind>(i));
  for (const char* name : {arg::kBytes,
                           arg::kSeq,
                           arg::kGroup,
                           arg::kGroupRank,
                           arg::kGroupSize,
                           arg::kOp,
                           arg::kReduceOp,
                           arg::kDtype,
                           arg::kRoot,
                           arg::kAlgorithm,
                           arg::kTransport,
                           arg::kPeers,
                           arg::kEnqueueNs,
                           arg::kError,
                           arg::kBucket,
                           arg::kUnit,
                           arg::kStep,
                           track::kCompute,
                           track::kCommPrefix,
                           track::kDdp,
                           track::kFsdp,
                           track::kSteps,
                           track::kMemory,
                           track::kUser,
                           counters::kRss,
                           arg::kParams,
                           arg::kFirstGradNs,
                           arg::kReadyNs,
                           arg::kLaunchNs,
                           arg::kWireStartNs,
                           arg::kWireEndNs,
                           arg::kCopyBackNs,
                           arg::kExposedNs,
                           track::kDdpBucketPrefix,
                           counters::kDdpBucketBytes,
                           arg::kPhase,
                           arg::kPrefetched,
                           arg::kIssueNs,
                           track::kFsdpUnitPrefix,
                           counters::kFsdpShardedBytes,
                           counters::kFsdpUnshardedBytes,
                           counters::kFsdpGradBytes,
                           counters::kFsdpPeakBytes,
                           arg::kGpuBeginNs,
                           arg::kGpuEndNs,
                           track::kCudaComm,
                           arg::kComputeEndNs,
                           arg::kParam,
                           arg::kParamGroup,
                           arg::kBucketCapBytes,
                           arg::kFirstBucketBytes,
                           arg::kBucketView,
                           arg::kReason,
                           arg::kShardingStrategy,
                           arg::kBackwardPrefetch,
                           arg::kForwardPrefetch,
                           arg::kLimitAllGathers,
                           arg::kGatherLane,
                           arg::kEngine,
                           arg::kBlocking,
                           arg::kPremulFactor}) {
    fingerprint += name;
    fingerprint += ',';
  }
  fingerprint.append(kMagic, sizeof(kMagic));
  fingerprint += std::to_string(kMaxRecordBytes);
  EXPECT_EQ(kSchemaVersion, 8u);
  EXPECT_EQ(fnv1a(fingerprint), 0xee996137659956f7ull)
      << "the trace schema changed: bump kSchemaVersion and update this test (fingerprint 0x"
      << std::hex << fnv1a(fingerprint) << ")";
}

}  // namespace
}  // namespace ringx::trace
