// The device ring's protocol on its CPU instance (host_ring.h): every rank a process, every
// channel a thread, the same protocol.h that the CUDA kernel runs. Every collective, dtype,
// op, world size and the sizes that hit the protocol's edges (empty, fewer elements than ranks,
// one segment, many rounds through few slots, one-shot); a peer dying mid-ring and a stuck peer
// become errors naming them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "backend/device/ring/device_ring.h"
#include "backend/device/ring/host_ring.h"
#include "backend/reduce/reduce.h"
#include "device_ring_matrix.h"
#include "process_ranks.h"

namespace ringx::device_ring {
namespace {

using testing::hostBuffers;
using testing::matrixCounts;
using testing::smallGeometry;
using testing::soon;

std::unique_ptr<DeviceRing> makeRing(Store& store, int rank, int size, const Geometry& g) {
  return std::make_unique<DeviceRing>(store, "ring", rank, size, makeHostInstance(), g, soon());
}

class DeviceRingWorld : public ::testing::TestWithParam<int> {};

TEST_P(DeviceRingWorld, EveryCollectiveDtypeOpAndSize) {
  const int n = GetParam();
  auto errors = ringx::testing::runProcesses(n, [&](int rank, std::shared_ptr<Store> store) {
    auto ring = makeRing(*store, rank, n, smallGeometry());
    const std::string wrong = testing::runMatrix(*ring, matrixCounts(n), hostBuffers());
    RINGX_CHECK(wrong.empty(), wrong);
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Ranks, DeviceRingWorld, ::testing::Values(1, 2, 3, 4, 5));

// A buffer of many slots with the default geometry: pipelining across channels and rounds, and
// every rank's result bit for bit the same where the order of a float sum matters.
TEST(DeviceRing, LargeFloatAllreduceIsIdenticalOnEveryRank) {
  const int n = 3;
  const size_t count = (3 << 20) + 11;  // 12 MiB of float32, not a multiple of anything
  auto errors = ringx::testing::runProcesses(n, [&](int rank, std::shared_ptr<Store> store) {
    auto ring = makeRing(*store, rank, n, Geometry{});
    std::vector<float> data = ringx::testing::randomFloats(count, 17 + rank);
    ring->allreduce(data.data(), data.data(), count, DataType::kFloat32, ReduceOp::kSum, soon());
    // Close to the sum in a fixed order, and the same bits on every rank (posted to the store).
    std::vector<float> want(count, 0.0f);
    for (int p = 0; p < n; ++p) {
      std::vector<float> theirs = ringx::testing::randomFloats(count, 17 + p);
      for (size_t i = 0; i < count; ++i) want[i] += theirs[i];
    }
    for (size_t i = 0; i < count; ++i) {
      RINGX_CHECK(std::abs(data[i] - want[i]) < 1e-5f, "element ", i, ": ", data[i], " vs ",
                  want[i]);
    }
    std::vector<uint8_t> bytes(count * sizeof(float));
    std::memcpy(bytes.data(), data.data(), bytes.size());
    store->set("result/" + std::to_string(rank), bytes);
    for (int p = 0; p < n; ++p) {
      RINGX_CHECK(store->get("result/" + std::to_string(p), std::chrono::seconds(60)) == bytes,
                  "rank ", p, "'s result differs from rank ", rank, "'s");
    }
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// The GPU path's pattern: one thread starts collectives back to back (more than kJobSlots, so
// that start() must wait for slots), another watches them to their end in order, and learns
// from the status words when each ran.
TEST(DeviceRing, PipelinedStartsFinishedOnAnotherThread) {
  const int n = 3, collectives = 3 * kJobSlots;
  auto errors = ringx::testing::runProcesses(n, [&](int rank, std::shared_ptr<Store> store) {
    auto ring = makeRing(*store, rank, n, smallGeometry());
    std::vector<std::vector<int64_t>> buffers(collectives);
    std::vector<uint64_t> sequences(collectives);
    std::atomic<int> started{0};
    std::vector<DeviceSpan> spans(collectives);
    std::vector<int64_t> watchedAt(collectives);
    const int64_t before = steadyNs();
    std::thread watcher([&] {
      for (int i = 0; i < collectives; ++i) {
        while (started.load() <= i) std::this_thread::yield();
        spans[i] = ring->finish(sequences[i], soon());
        watchedAt[i] = steadyNs();
      }
    });
    for (int i = 0; i < collectives; ++i) {
      buffers[i].assign(i % 2 ? 100 + 37 * i : 1 + i, rank + i);  // ring and one-shot sizes
      const RingOp kind = ring->allreduceKind(buffers[i].size(), DataType::kInt64);
      RINGX_CHECK((kind == RingOp::kAllreduce) == (i % 2 == 1), "not the kind meant");
      sequences[i] = ring->start(kind, buffers[i].data(), buffers[i].data(), buffers[i].size(),
                                 DataType::kInt64, ReduceOp::kSum, "allreduce");
      started.store(i + 1);
    }
    watcher.join();
    for (int i = 0; i < collectives; ++i) {
      RINGX_CHECK(before <= spans[i].beginNs && spans[i].beginNs <= spans[i].endNs &&
                      spans[i].endNs <= watchedAt[i],
                  "collective ", i, " ran from ", spans[i].beginNs, " to ", spans[i].endNs,
                  " ns, not within ", before, " to ", watchedAt[i]);
      if (i > 0) RINGX_CHECK(spans[i].beginNs >= spans[i - 1].beginNs, "out of order");
      const int64_t want = n * i + n * (n - 1) / 2;
      for (int64_t v : buffers[i]) RINGX_CHECK(v == want, "collective ", i, ": ", v, " != ", want);
    }
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// Rank 2 dies while a large allreduce is under way: both other ranks get an error that names
// the collective and rank 2, and the ring refuses to be used again.
TEST(DeviceRing, PeerDyingMidRingIsAnErrorNamingIt) {
  const int n = 3;
  const size_t count = 16 << 20;  // 64 MiB of float32 in 256-byte segments: long enough
  auto errors = ringx::testing::runProcesses(n, [&](int rank, std::shared_ptr<Store> store) {
    auto ring = makeRing(*store, rank, n, smallGeometry());
    std::vector<float> data(count, 1.0f);
    ring->allreduce(data.data(), data.data(), 1000, DataType::kFloat32, ReduceOp::kSum, soon());
    if (rank == 2) {
      ring->start(RingOp::kAllreduce, data.data(), data.data(), count, DataType::kFloat32,
                  ReduceOp::kSum, "allreduce");  // and never finish()ed
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      ::_exit(0);  // in the middle of it, as a crash would
    }
    try {
      ring->allreduce(data.data(), data.data(), count, DataType::kFloat32, ReduceOp::kSum, soon());
    } catch (const PeerError& e) {
      const std::string text = e.what();
      RINGX_CHECK(text.find("allreduce #2") != std::string::npos, "no collective named: ", text);
      RINGX_CHECK(
          text.find("rank 2") != std::string::npos && text.find("died") != std::string::npos,
          "rank 2 not named as dead: ", text);
      try {
        ring->allreduce(data.data(), data.data(), 10, DataType::kFloat32, ReduceOp::kSum, soon());
      } catch (const PeerError& again) {
        RINGX_CHECK(std::string(again.what()).find("cannot be used again") != std::string::npos,
                    "the second call's error: ", again.what());
        return;
      }
      RINGX_THROW(Error, "the ring ran a collective after it broke");
    }
    RINGX_THROW(Error, "the allreduce succeeded without rank 2");
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(errors[2], "");  // it exited 0 on purpose
}

// Rank 1 lives but never joins the second allreduce: rank 0's deadline passes, and its error
// names rank 1 as stuck (alive), not dead.
TEST(DeviceRing, StuckPeerIsATimeoutNamingIt) {
  auto errors = ringx::testing::runProcesses(2, [&](int rank, std::shared_ptr<Store> store) {
    auto ring = makeRing(*store, rank, 2, smallGeometry());
    std::vector<int32_t> data(5000, rank);
    ring->allreduce(data.data(), data.data(), data.size(), DataType::kInt32, ReduceOp::kSum,
                    soon());
    if (rank == 1) {
      store->get("rank 0 gave up", std::chrono::seconds(120));
      return;
    }
    try {
      ring->allreduce(data.data(), data.data(), data.size(), DataType::kInt32, ReduceOp::kSum,
                      Clock::now() + std::chrono::milliseconds(300));
    } catch (const PeerError& e) {
      store->setString("rank 0 gave up", "1");
      const std::string text = e.what();
      RINGX_CHECK(text.find("rank 1 stopped taking part") != std::string::npos,
                  "rank 1 not named as stuck: ", text);
      return;
    }
    store->setString("rank 0 gave up", "1");
    RINGX_THROW(Error, "the allreduce succeeded without rank 1");
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

// leave() is collective: rank 0 leaves at once and returns only once rank 1, which leaves
// after a pause, has left too (its last slots may still be read until then); a rank that left
// refuses collectives; and a peer that died is not waited for.
TEST(DeviceRing, LeaveWaitsForEveryLivePeerAndRefusesLaterCollectives) {
  const int n = 3;
  auto errors = ringx::testing::runProcesses(n, [&](int rank, std::shared_ptr<Store> store) {
    auto ring = makeRing(*store, rank, n, smallGeometry());
    std::vector<int32_t> data(5000, rank);
    ring->allreduce(data.data(), data.data(), data.size(), DataType::kInt32, ReduceOp::kSum,
                    soon());
    if (rank == 2) ::_exit(0);  // dies between collectives: no one waits for it
    if (rank == 1) {
      store->get("rank 0 is leaving", std::chrono::seconds(120));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      store->setString("rank 1 is leaving", "1");
    } else {
      store->setString("rank 0 is leaving", "1");
    }
    ring->leave(*store, soon());
    if (rank == 0) {
      RINGX_CHECK(store->check("rank 1 is leaving"), "rank 0 left before rank 1 did");
    }
    try {
      ring->allreduce(data.data(), data.data(), data.size(), DataType::kInt32, ReduceOp::kSum,
                      soon());
    } catch (const PeerError& e) {
      RINGX_CHECK(std::string(e.what()).find("left the ring") != std::string::npos,
                  "the refusal: ", e.what());
      return;
    }
    RINGX_THROW(Error, "a collective ran after leave()");
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(DeviceRing, RanksWithOtherGeometriesAreRefused) {
  auto errors = ringx::testing::runProcesses(2, [&](int rank, std::shared_ptr<Store> store) {
    Geometry g = smallGeometry();
    if (rank == 1) g.depth = 4;
    makeRing(*store, rank, 2, g);
  });
  for (const std::string& e : errors) {
    EXPECT_NE(e.find("every rank must use the same settings"), std::string::npos) << e;
  }
}

// An instance whose region cannot be made (as cudaMalloc or IPC may fail on one GPU).
class FailingInstance : public Instance {
 public:
  const char* name() const override { return "failing"; }
  std::vector<uint8_t> createRegion(size_t, const RegionHeader&) override {
    RINGX_THROW(Error, "no memory for the region here");
  }
  char* openRegion(int, const std::vector<uint8_t>&, size_t) override { return nullptr; }
  char* localRegion() override { return nullptr; }
  HostControl* hostControl() override { return &control_; }
  HostControl* kernelControl() override { return &control_; }
  void launch(const RingJob&) override {}
  bool finished(uint64_t) override { return true; }
  int64_t hostNs(uint64_t clock) override { return static_cast<int64_t>(clock); }
  void join() override {}

 private:
  HostControl control_{};
};

// One rank that cannot set up makes every rank's set-up fail at once (no one waits for it until
// the deadline), naming it, so that the whole group agrees to take another path.
TEST(DeviceRing, OneRankFailingSetUpFailsItEverywhere) {
  const auto start = Clock::now();
  auto errors = ringx::testing::runProcesses(3, [&](int rank, std::shared_ptr<Store> store) {
    std::unique_ptr<Instance> instance;
    if (rank == 1) {
      instance = std::make_unique<FailingInstance>();
    } else {
      instance = makeHostInstance();
    }
    DeviceRing ring(*store, "ring", rank, 3, std::move(instance), smallGeometry(), soon(600));
  });
  for (const std::string& e : errors) {
    EXPECT_NE(e.find("could not be set up: rank 1: no memory for the region here"),
              std::string::npos)
        << e;
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(300));  // not the 600 s deadline
}

TEST(DeviceRing, BadGeometryIsRefused) {
  InMemoryStore store;
  Geometry g = smallGeometry();
  g.depth = 1;
  EXPECT_THROW(makeRing(store, 0, 1, g), InvalidArgument);
  g = smallGeometry();
  g.slotBytes = 100;
  EXPECT_THROW(makeRing(store, 0, 1, g), InvalidArgument);
}

// The plan's arithmetic: every element of every chunk belongs to exactly one segment of one
// channel, whatever the count, ranks and channels.
TEST(DeviceRingPlan, SegmentsCoverEveryElementOnce) {
  for (int n : {1, 2, 3, 5, 16}) {
    for (uint64_t total : {0ull, 1ull, 5ull, 17ull, 1000ull, 4099ull}) {
      for (int channels : {1, 2, 3, 32}) {
        std::vector<int> seen(total, 0);
        for (int c = 0; c < n; ++c) {
          const Span chunk = chunkOf(total, n, c);
          for (int ch = 0; ch < channels; ++ch) {
            const Span s = sliceOf(chunk.count, ch, channels);
            for (uint64_t e = 0; e < s.count; ++e) ++seen[chunk.begin + s.begin + e];
          }
        }
        for (uint64_t i = 0; i < total; ++i) {
          ASSERT_EQ(seen[i], 1) << "n " << n << " total " << total << " channels " << channels;
        }
      }
    }
  }
}

}  // namespace
}  // namespace ringx::device_ring
