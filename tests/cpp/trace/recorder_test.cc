// The recorder: many threads recording at once, full rings dropping (and saying
// so) instead of blocking, restarts, late sinks, files, and the C++ helpers.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <thread>

#include "trace/format/manifest.h"
#include "trace/record/file_sink.h"
#include "trace/record/recorder.h"

namespace ringx::trace {
namespace {

// Keeps the whole stream in memory (shared, so the test can read it after the
// recorder took ownership of the sink).
struct MemorySink : Sink {
  explicit MemorySink(std::shared_ptr<std::string> out) : out(std::move(out)) {}
  void begin(const std::string& preamble) override { *out += preamble; }
  void write(const Batch& batch) override {
    *out += batch.strings;
    *out += batch.records;
  }
  void close() override { closed = true; }
  std::shared_ptr<std::string> out;
  bool closed = false;
};

RankTrace decode(const std::string& bytes) {
  RankTrace t;
  Decoder d(&t);
  d.feed(bytes.data(), bytes.size());
  EXPECT_EQ(d.pendingBytes(), 0u);
  return t;
}

std::shared_ptr<std::string> startWithMemorySink(RecorderOptions options) {
  Recorder::instance().start(options);
  auto stream = std::make_shared<std::string>();
  Recorder::instance().addSink(std::make_unique<MemorySink>(stream));
  return stream;
}

TEST(Recorder, ManyThreadsRecordEverythingInOrder) {
  RecorderOptions options;
  options.rank = 5;
  options.worldSize = 8;
  auto stream = startWithMemorySink(options);
  Recorder& r = Recorder::instance();
  const uint32_t trackId = r.intern("worker");
  const uint32_t nameId = r.intern("tick");
  const uint32_t threadKey = r.intern("thread");
  const uint32_t iKey = r.intern("i");
  const int kThreads = 4, kEvents = 3000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEvents; ++i) {
        const Arg args[] = {intArg(threadKey, t), intArg(iKey, i)};
        const int64_t now = nowNs();
        r.span(Category::kUser, trackId, nameId, now, now + 10, args, 2);
        if (i % 500 == 0) ::usleep(2000);  // let the writer drain in between
      }
    });
  }
  for (auto& t : threads) t.join();
  ::usleep(30000);  // a few RSS samples
  r.stop();
  RankTrace trace = decode(*stream);
  EXPECT_EQ(trace.header.rank, 5);
  EXPECT_EQ(trace.header.worldSize, 8);
  std::map<int64_t, int64_t> lastIndex;
  int ticks = 0, rssSamples = 0;
  for (const Event& e : trace.events) {
    if (trace.str(e.name) == "tick") {
      ++ticks;
      EXPECT_EQ(e.rank, 5);
      const int64_t thread = trace.intArg(e, "thread"), i = trace.intArg(e, "i");
      auto it = lastIndex.find(thread);
      if (it != lastIndex.end()) {
        EXPECT_EQ(i, it->second + 1) << "thread " << thread;
      }
      lastIndex[thread] = i;
    } else if (trace.str(e.name) == counters::kRss) {
      ++rssSamples;
      EXPECT_EQ(e.category, Category::kMemory);
      EXPECT_GT(e.value, 1 << 20);  // this process has more than 1 MiB resident
    }
  }
  EXPECT_EQ(ticks + static_cast<int>(r.droppedEvents()), kThreads * kEvents);
  EXPECT_EQ(trace.dropped, r.droppedEvents());
  EXPECT_GE(rssSamples, 1);
}

TEST(Recorder, FullRingsDropAndReportInsteadOfBlocking) {
  RecorderOptions options;
  options.threadBufferEvents = 16;
  options.flushIntervalMs = 100000;  // the writer only runs on flush()/stop()
  options.rssIntervalMs = 0;
  std::thread producer;  // a fresh thread, so its ring has the small capacity
  auto stream = startWithMemorySink(options);
  Recorder& r = Recorder::instance();
  const uint32_t trackId = r.intern("t"), nameId = r.intern("e");
  producer = std::thread([&] {
    for (int i = 0; i < 1000; ++i) r.instant(Category::kUser, trackId, nameId, nowNs());
  });
  producer.join();
  r.stop();
  RankTrace trace = decode(*stream);
  EXPECT_EQ(trace.events.size(), 16u);
  EXPECT_EQ(trace.dropped, 1000u - 16u);
}

TEST(Recorder, RestartGivesASelfContainedStreamAndLateSinksWork) {
  Recorder& r = Recorder::instance();
  auto first = startWithMemorySink(RecorderOptions{});
  trace::markStep(1);
  r.flush();
  // A sink added mid-recording starts from the strings already emitted.
  auto late = std::make_shared<std::string>();
  r.addSink(std::make_unique<MemorySink>(late));
  trace::markStep(2);
  r.stop();
  auto second = startWithMemorySink(RecorderOptions{});
  trace::markStep(3);
  r.stop();
  auto steps = [](const std::string& bytes) {
    RankTrace t = decode(bytes);
    std::vector<int64_t> out;
    for (const Event& e : t.events) {
      if (e.category == Category::kStep) out.push_back(t.intArg(e, arg::kStep));
    }
    return out;
  };
  EXPECT_EQ(steps(*first), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(steps(*late), (std::vector<int64_t>{2}));
  EXPECT_EQ(steps(*second), (std::vector<int64_t>{3}));
}

TEST(Recorder, ScopedSpanCounterAndStepHelpers) {
  auto stream = startWithMemorySink(RecorderOptions{});
  {
    ScopedSpan span("forward", Category::kUser);
    span.arg("batch", int64_t{32});
    span.arg("lr", 0.5);
    span.arg("phase", "warmup");
    ::usleep(1000);
  }
  trace::counter("bucket_bytes", 4096, Category::kMemory);
  trace::markStep(7);
  Recorder::instance().stop();
  RankTrace t = decode(*stream);
  const Event* span = nullptr;
  const Event* counter = nullptr;
  const Event* step = nullptr;
  for (const Event& e : t.events) {
    if (t.str(e.name) == "forward") span = &e;
    if (t.str(e.name) == "bucket_bytes") counter = &e;
    if (e.category == Category::kStep) step = &e;
  }
  ASSERT_NE(span, nullptr);
  EXPECT_EQ(span->kind, EventKind::kSpan);
  EXPECT_GE(span->endNs - span->beginNs, 1000000);
  EXPECT_EQ(t.intArg(*span, "batch"), 32);
  EXPECT_EQ(t.findArg(*span, "lr")->doubleValue, 0.5);
  EXPECT_EQ(t.stringArg(*span, "phase"), "warmup");
  EXPECT_EQ(t.str(span->track), track::kUser);
  ASSERT_NE(counter, nullptr);
  EXPECT_EQ(counter->value, 4096);
  EXPECT_EQ(t.str(counter->track), track::kMemory);
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(t.intArg(*step, arg::kStep), 7);
}

TEST(Recorder, NothingIsRecordedWhileStopped) {
  Recorder& r = Recorder::instance();
  ASSERT_FALSE(Recorder::enabled());
  trace::markStep(99);
  { ScopedSpan span("ignored"); }
  auto stream = startWithMemorySink(RecorderOptions{});
  r.stop();
  for (const Event& e : decode(*stream).events) EXPECT_NE(e.category, Category::kStep);
}

TEST(Recorder, FileSinkWritesAReadableFileEvenWhenCutOff) {
  char dir[] = "/tmp/ringx-recorder-test-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = rankFileName(dir, 3);
  EXPECT_EQ(path, std::string(dir) + "/rank-3.ringx");
  RecorderOptions options;
  options.rank = 3;
  Recorder::instance().start(options);
  Recorder::instance().addSink(std::make_unique<FileSink>(path));
  for (int i = 0; i < 100; ++i) trace::markStep(i);
  Recorder::instance().stop();
  RankTrace whole = readTraceFile(path);
  EXPECT_EQ(whole.header.rank, 3);
  EXPECT_FALSE(whole.truncated);
  size_t steps = 0;
  for (const Event& e : whole.events) steps += e.category == Category::kStep;
  EXPECT_EQ(steps, 100u);
  // A crash mid-write: the file ends inside a record.
  const auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size - 5);
  RankTrace cut = readTraceFile(path);
  EXPECT_TRUE(cut.truncated);
  EXPECT_GE(cut.events.size() + 1, whole.events.size());
  std::remove(path.c_str());
  ::rmdir(dir);
  EXPECT_THROW(FileSink("/nonexistent-dir/rank-0.ringx"), IoError);
}

}  // namespace
}  // namespace ringx::trace
