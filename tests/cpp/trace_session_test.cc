// A traced job with ranks as processes: every rank's file, the manifest, the
// collective events lined up by sequence number, and clock offsets recovered
// from clocks that were skewed on purpose.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backend/group/group.h"
#include "tests/cpp/process_ranks.h"
#include "trace/format/manifest.h"
#include "trace/read/live_client.h"
#include "trace/record/file_sink.h"
#include "trace/record/recorder.h"

namespace ringx {
namespace {

using algorithms::Collective;
using algorithms::CollectiveKind;

constexpr int kAllreduces = 12;
const int64_t kSkewNs[] = {0, 7'000'000'000, -3'000'000'000};

TEST(TraceSession, RanksRecordFilesManifestAndAlignedClocks) {
  char pattern[] = "/tmp/ringx-trace-session-XXXXXX";
  const std::string dir = ::mkdtemp(pattern);
  auto errors = testing::runProcesses(3, [&](int rank, std::shared_ptr<Store> store) {
    trace::setFakeClockSkewForTesting(kSkewNs[rank]);
    GroupOptions options = testing::processOptions(rank, 3, std::move(store));
    options.name = "world";
    Group group(options);
    TraceConfig config;
    config.dir = dir;
    config.clockSyncIntervalMs = 20;
    group.startTracing(config);
    for (int i = 0; i < kAllreduces; ++i) {
      std::vector<float> data(1000 * (i + 1), 1.0f);
      group.noteCall(CallNote{trace::nowNs(), data.size() * sizeof(float)});
      group.run(CollectiveKind::kAllreduce, DataType::kFloat32, ReduceOp::kSum, -1, {},
                [&](Collective& c) {
                  algorithms::allreduce(c, data.data(), data.size(), DataType::kFloat32,
                                        ReduceOp::kSum, group.tuning());
                });
      if (data[0] != 3.0f) throw std::runtime_error("allreduce result");
    }
    trace::markStep(1);
    ::usleep(60000);  // a few periodic clock measurements
    TraceSession::stop();
  });
  for (auto& e : errors) ASSERT_EQ(e, "");

  std::ifstream manifestFile(dir + "/manifest.json");
  ASSERT_TRUE(manifestFile.good());
  std::stringstream manifest;
  manifest << manifestFile.rdbuf();
  EXPECT_NE(manifest.str().find("\"world_size\": 3"), std::string::npos) << manifest.str();
  EXPECT_NE(manifest.str().find("rank-2.ringx"), std::string::npos);

  for (int rank = 0; rank < 3; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    trace::RankTrace t = trace::readTraceFile(trace::rankFileName(dir, rank));
    EXPECT_FALSE(t.truncated);
    EXPECT_EQ(t.header.rank, rank);
    EXPECT_EQ(t.header.worldSize, 3);
    std::vector<int64_t> seqs;
    int rss = 0;
    for (const trace::Event& e : t.events) {
      if (e.category == trace::Category::kMemory) ++rss;
      if (e.category != trace::Category::kCollective) continue;
      EXPECT_EQ(t.str(e.name), "allreduce");
      EXPECT_EQ(t.str(e.track), "comm:world");
      EXPECT_EQ(t.stringArg(e, trace::arg::kGroup), "world");
      EXPECT_EQ(t.intArg(e, trace::arg::kGroupSize), 3);
      EXPECT_EQ(t.stringArg(e, trace::arg::kTransport), "shm");
      EXPECT_EQ(t.stringArg(e, trace::arg::kDtype), "float32");
      EXPECT_EQ(t.stringArg(e, trace::arg::kReduceOp), "SUM");
      const int64_t seq = t.intArg(e, trace::arg::kSeq);
      EXPECT_EQ(t.intArg(e, trace::arg::kBytes), 4000 * (seq + 1));
      EXPECT_EQ(t.stringArg(e, trace::arg::kAlgorithm), seq < 8 ? "direct" : "ring");
      EXPECT_LE(t.intArg(e, trace::arg::kEnqueueNs), e.beginNs);
      EXPECT_LE(e.beginNs, e.endNs);
      seqs.push_back(seq);
    }
    std::vector<int64_t> want(kAllreduces);
    for (int i = 0; i < kAllreduces; ++i) want[i] = i;
    EXPECT_EQ(seqs, want);
    EXPECT_GE(rss, 1);
    if (rank == 0) {
      EXPECT_TRUE(t.clockSyncs.empty());
      continue;
    }
    ASSERT_GE(t.clockSyncs.size(), 2u);  // the first one, then periodic ones
    for (const trace::ClockSync& sync : t.clockSyncs) {
      // Same physical clock underneath: the true offset is exactly -skew.
      EXPECT_LE(std::llabs(sync.offsetNs + kSkewNs[rank]), sync.uncertaintyNs)
          << "offset " << sync.offsetNs << " +- " << sync.uncertaintyNs;
      EXPECT_LT(sync.uncertaintyNs, 50'000'000);
    }
  }
  std::filesystem::remove_all(dir);
}

// A collective whose work a device ran (the CUDA path's watch sets its device span): the
// collective's span carries the GPU times, and a device span on the rank's cuda:comm track
// shows them, named and numbered as the collective.
TEST(TraceSession, DeviceTimeOfACollectiveIsOnTheCudaCommLane) {
  char pattern[] = "/tmp/ringx-trace-device-XXXXXX";
  const std::string dir = ::mkdtemp(pattern);
  auto errors = testing::runProcesses(2, [&](int rank, std::shared_ptr<Store> store) {
    GroupOptions options = testing::processOptions(rank, 2, std::move(store));
    options.name = "world";
    Group group(options);
    TraceConfig config;
    config.dir = dir;
    group.startTracing(config);
    for (int i = 0; i < 3; ++i) {
      group.noteCall(CallNote{trace::nowNs(), 4096});
      // The last one as the device ring runs an AVG: a SUM, divided on the stream after.
      const AskedReduce op = i == 2 ? AskedReduce::average() : AskedReduce(ReduceOp::kSum);
      group.run(CollectiveKind::kAllreduce, DataType::kFloat32, op, -1, {}, [&](Collective& c) {
        c.setAlgorithm("ring (cuda-ipc)");
        const int64_t now = trace::nowNs();
        if (i != 1) c.setDeviceSpan(now + 1000 * (i + 1), now + 5000 * (i + 1));
      });
    }
    TraceSession::stop();
  });
  for (auto& e : errors) ASSERT_EQ(e, "");
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    trace::RankTrace t = trace::readTraceFile(trace::rankFileName(dir, rank));
    std::vector<int64_t> collectiveSeqs, deviceSeqs;
    for (const trace::Event& e : t.events) {
      if (e.category == trace::Category::kCollective) {
        const int64_t seq = t.intArg(e, trace::arg::kSeq);
        collectiveSeqs.push_back(seq);
        EXPECT_EQ(t.stringArg(e, trace::arg::kAlgorithm), "ring (cuda-ipc)");
        EXPECT_EQ(t.stringArg(e, trace::arg::kReduceOp), seq == 2 ? "AVG" : "SUM");
        const int64_t begin = t.intArg(e, trace::arg::kGpuBeginNs, -1);
        const int64_t end = t.intArg(e, trace::arg::kGpuEndNs, -1);
        if (seq == 1) {  // ran on the host: no device times
          EXPECT_EQ(begin, -1);
          continue;
        }
        EXPECT_EQ(end - begin, 4000 * (seq + 1));
        for (const trace::Event& d : t.events) {
          if (d.category != trace::Category::kDevice || t.intArg(d, trace::arg::kSeq) != seq) {
            continue;
          }
          EXPECT_EQ(t.str(d.track), "cuda:comm");
          EXPECT_EQ(t.str(d.name), "allreduce");
          EXPECT_EQ(t.stringArg(d, trace::arg::kGroup), "world");
          EXPECT_EQ(d.beginNs, begin);
          EXPECT_EQ(d.endNs, end);
          deviceSeqs.push_back(seq);
        }
      }
    }
    EXPECT_EQ(collectiveSeqs, (std::vector<int64_t>{0, 1, 2}));
    EXPECT_EQ(deviceSeqs, (std::vector<int64_t>{0, 2}));
  }
  std::filesystem::remove_all(dir);
}

// RINGX_TRACE_LISTEN: rank 0's directory lists every rank; a client streams
// another rank's collectives while the job runs.
TEST(TraceSession, LiveDirectoryAndStreamsOfEveryRank) {
  auto errors = testing::runProcesses(3, [&](int rank, std::shared_ptr<Store> store) {
    GroupOptions options = testing::processOptions(rank, 3, std::move(store));
    Group group(options);
    TraceConfig config;
    config.listen = "127.0.0.1:0";  // rank 0 on an ephemeral port too (tests run in parallel)
    group.startTracing(config);
    auto allreduce = [&] {
      std::vector<int32_t> data(16, 1);
      group.run(CollectiveKind::kAllreduce, DataType::kInt32, ReduceOp::kSum, -1, {},
                [&](Collective& c) {
                  algorithms::allreduce(c, data.data(), data.size(), DataType::kInt32,
                                        ReduceOp::kSum, group.tuning());
                });
    };
    std::unique_ptr<trace::LiveStream> stream;
    if (rank == 0) {
      const trace::HostPort self = trace::parseHostPort(TraceSession::liveAddress());
      auto directory = trace::fetchDirectory(self.host, self.port, "");
      if (directory.size() != 3) throw std::runtime_error("directory has the wrong size");
      if (directory[0].port != self.port) throw std::runtime_error("rank 0 entry");
      stream = std::make_unique<trace::LiveStream>(directory[2].host, directory[2].port, "");
    }
    for (int i = 0; i < 5; ++i) allreduce();
    if (rank == 0) {
      // Rank 2's events arrive within its flush interval; wait for all five.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      auto collectives = [&] {
        int n = 0;
        for (const trace::Event& e : stream->trace().events) {
          n += e.category == trace::Category::kCollective;
        }
        return n;
      };
      while (collectives() < 5 && std::chrono::steady_clock::now() < deadline) {
        stream->poll(100);
      }
      if (collectives() != 5) throw std::runtime_error(strCat("streamed ", collectives()));
      if (stream->trace().header.rank != 2) throw std::runtime_error("wrong rank streamed");
    }
    allreduce();  // nobody stops before rank 0 has checked
    TraceSession::stop();
  });
  for (auto& e : errors) EXPECT_EQ(e, "");
}

}  // namespace
}  // namespace ringx
