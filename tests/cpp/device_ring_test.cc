// The device ring's protocol on its CPU instance (host_ring.h): every rank a process, every
// channel a thread, the same protocol.h that the CUDA kernel runs. Every collective, dtype,
// op, world size and the sizes that hit the protocol's edges (empty, fewer elements than ranks,
// one segment, many rounds through few slots, one-shot); a peer dying mid-ring and a stuck peer
// become errors naming them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "backend/device/ring/device_ring.h"
#include "backend/device/ring/host_ring.h"
#include "backend/reduce/reduce.h"
#include "process_ranks.h"
#include "reduction_reference.h"

namespace ringx::device_ring {
namespace {

using testing::expectedReduction;
using testing::makeInput;

constexpr DataType kTypes[] = {DataType::kFloat32,  DataType::kFloat64,   DataType::kFloat16,
                               DataType::kBFloat16, DataType::kComplex64, DataType::kComplex128,
                               DataType::kInt8,     DataType::kInt16,     DataType::kInt32,
                               DataType::kInt64,    DataType::kUInt8,     DataType::kBool};
constexpr ReduceOp kOps[] = {ReduceOp::kSum,  ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kBAnd, ReduceOp::kBOr,     ReduceOp::kBXor};

// Small slots and few of them, so that modest buffers take many rounds and reuse every slot.
Geometry smallGeometry() {
  Geometry g;
  g.channels = 2;
  g.depth = 3;
  g.slotBytes = 256;
  g.oneShotBytes = 512;
  return g;
}

Deadline soon(int seconds = 60) { return Clock::now() + std::chrono::seconds(seconds); }

std::unique_ptr<DeviceRing> makeRing(Store& store, int rank, int size, const Geometry& g) {
  return std::make_unique<DeviceRing>(store, "ring", rank, size, makeHostInstance(), g, soon());
}

std::string mismatch(const std::string& what, const std::vector<char>& got,
                     const std::vector<char>& want) {
  if (got == want) return "";
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  return what + ": first differing byte " + std::to_string(i) + " of " +
         std::to_string(want.size());
}

// Runs every collective of the matrix on this rank; returns the first wrong result.
std::string runMatrix(DeviceRing& ring, const std::vector<size_t>& counts) {
  const int n = ring.size(), r = ring.rank();
  for (DataType type : kTypes) {
    const size_t es = elementSize(type);
    for (ReduceOp op : kOps) {
      if (!reduceOpSupports(op, type)) continue;
      for (size_t count : counts) {
        const std::string what = std::string(dataTypeName(type)) + " " + reduceOpName(op) +
                                 " count " + std::to_string(count);
        // Allreduce, in place (one-shot when small, the ring otherwise).
        std::vector<char> data = makeInput(type, op, r, count);
        ring.allreduce(data.data(), data.data(), count, type, op, soon());
        if (auto e = mismatch("allreduce " + what, data, expectedReduction(type, op, n, count));
            !e.empty()) {
          return e;
        }
        // Reduce-scatter: n shares of `count` in, this rank's reduced share out.
        std::vector<char> in = makeInput(type, op, r, count * n), out(count * es);
        ring.reduceScatter(in.data(), out.data(), count, type, op, soon());
        std::vector<char> all = expectedReduction(type, op, n, count * n);
        std::vector<char> share(all.begin() + r * count * es, all.begin() + (r + 1) * count * es);
        if (auto e = mismatch("reduce_scatter " + what, out, share); !e.empty()) return e;
      }
    }
    for (size_t count : counts) {
      std::vector<char> in = makeInput(type, ReduceOp::kSum, r, count), out(count * es * n, 7);
      ring.allgather(in.data(), out.data(), count, type, soon());
      std::vector<char> want;
      for (int p = 0; p < n; ++p) {
        std::vector<char> theirs = makeInput(type, ReduceOp::kSum, p, count);
        want.insert(want.end(), theirs.begin(), theirs.end());
      }
      if (auto e = mismatch(
              std::string("allgather ") + dataTypeName(type) + " count " + std::to_string(count),
              out, want);
          !e.empty()) {
        return e;
      }
    }
  }
  return "";
}

class DeviceRingWorld : public ::testing::TestWithParam<int> {};

TEST_P(DeviceRingWorld, EveryCollectiveDtypeOpAndSize) {
  const int n = GetParam();
  // 0, fewer than the ranks, one element per rank, within one slot, one-shot's edge, and enough
  // for many rounds of 256-byte segments through 3 slots per channel.
  const std::vector<size_t> counts = {0, 1, static_cast<size_t>(n), 7, 64, 65, 1000, 5003};
  auto errors = testing::runProcesses(n, [&](int rank, std::shared_ptr<Store> store) {
    auto ring = makeRing(*store, rank, n, smallGeometry());
    const std::string wrong = runMatrix(*ring, counts);
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
  auto errors = testing::runProcesses(n, [&](int rank, std::shared_ptr<Store> store) {
    auto ring = makeRing(*store, rank, n, Geometry{});
    std::vector<float> data = testing::randomFloats(count, 17 + rank);
    ring->allreduce(data.data(), data.data(), count, DataType::kFloat32, ReduceOp::kSum, soon());
    // Close to the sum in a fixed order, and the same bits on every rank (posted to the store).
    std::vector<float> want(count, 0.0f);
    for (int p = 0; p < n; ++p) {
      std::vector<float> theirs = testing::randomFloats(count, 17 + p);
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

// Rank 2 dies while a large allreduce is under way: both other ranks get an error that names
// the collective and rank 2, and the ring refuses to be used again.
TEST(DeviceRing, PeerDyingMidRingIsAnErrorNamingIt) {
  const int n = 3;
  const size_t count = 16 << 20;  // 64 MiB of float32 in 256-byte segments: long enough
  auto errors = testing::runProcesses(n, [&](int rank, std::shared_ptr<Store> store) {
    auto ring = makeRing(*store, rank, n, smallGeometry());
    std::vector<float> data(count, 1.0f);
    ring->allreduce(data.data(), data.data(), 1000, DataType::kFloat32, ReduceOp::kSum, soon());
    if (rank == 2) {
      ring->start(RingOp::kAllreduce, data.data(), data.data(), count, DataType::kFloat32,
                  ReduceOp::kSum, "allreduce");
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
  auto errors = testing::runProcesses(2, [&](int rank, std::shared_ptr<Store> store) {
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

TEST(DeviceRing, RanksWithOtherGeometriesAreRefused) {
  auto errors = testing::runProcesses(2, [&](int rank, std::shared_ptr<Store> store) {
    Geometry g = smallGeometry();
    if (rank == 1) g.depth = 4;
    makeRing(*store, rank, 2, g);
  });
  for (const std::string& e : errors) {
    EXPECT_NE(e.find("every rank must use the same settings"), std::string::npos) << e;
  }
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
