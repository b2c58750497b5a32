// Every collective algorithm x world size (1..8) x element counts, ranks as
// threads over TCP loopback; results compared with a reference computed here.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <complex>
#include <cstring>
#include <numeric>
#include <thread>

#include "backend/reduce/reduce.h"
#include "tests/cpp/rank_threads.h"
#include "tests/cpp/reduction_reference.h"

namespace ringx {
namespace {

using algorithms::Collective;
using algorithms::CollectiveKind;
using testing::broadcastPattern;
using testing::expectedReduction;
using testing::makeInput;
using testing::runGroup;
using testing::sameBytes;

const int kWorldSizes[] = {1, 2, 3, 4, 5, 6, 7, 8};
const size_t kCounts[] = {0, 1, 2, 7, 13, 1009, 65537};

enum class AllreduceAlgorithm { kDirect, kRingSmallSegments, kRing, kRecursiveDoubling };

void checkAllreduce(int size, size_t count, DataType type, ReduceOp op,
                    AllreduceAlgorithm algorithm, bool sharedMemory = true) {
  const std::vector<char> expected = expectedReduction(type, op, size, count);
  runGroup(
      size,
      [&](Group& group) {
        std::vector<char> data = makeInput(type, op, group.rank(), count);
        group.run(CollectiveKind::kAllreduce, type, op, -1, {}, [&](Collective& c) {
          switch (algorithm) {
            case AllreduceAlgorithm::kDirect:
              algorithms::directAllreduce(c, data.data(), count, type, op);
              break;
            case AllreduceAlgorithm::kRingSmallSegments:
              algorithms::ringAllreduce(c, data.data(), count, type, op, 64);
              break;
            case AllreduceAlgorithm::kRing:
              algorithms::ringAllreduce(c, data.data(), count, type, op, 1 << 20);
              break;
            case AllreduceAlgorithm::kRecursiveDoubling:
              algorithms::recursiveDoublingAllreduce(c, data.data(), count, type, op);
              break;
          }
        });
        ASSERT_EQ(data, expected) << "rank " << group.rank() << " of " << size << ", count "
                                  << count << ", " << dataTypeName(type) << " " << reduceOpName(op);
      },
      [&](GroupOptions& options) {
        options.mesh.sharedMemory = sharedMemory;
        options.mesh.shmCapacity = 4099;  // odd: elements straddle the end of the ring
      });
}

TEST(Allreduce, Float32SumEveryWorldSizeAndCount) {
  for (int size : kWorldSizes) {
    for (size_t count : kCounts) {
      for (auto algorithm : {AllreduceAlgorithm::kDirect, AllreduceAlgorithm::kRingSmallSegments,
                             AllreduceAlgorithm::kRing}) {
        if (size == 1 && algorithm != AllreduceAlgorithm::kRing) continue;
        checkAllreduce(size, count, DataType::kFloat32, ReduceOp::kSum, algorithm);
      }
    }
  }
}

// Recursive doubling folds the ranks above a power of two onto the ones below: world sizes
// on both sides of 8 and 16 cover the fold, the pure doubling and one rank.
TEST(Allreduce, RecursiveDoublingEveryWorldSizeAndCount) {
  for (int size : {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 17}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1009}}) {
      checkAllreduce(size, count, DataType::kFloat32, ReduceOp::kSum,
                     AllreduceAlgorithm::kRecursiveDoubling);
    }
  }
}

TEST(Allreduce, RecursiveDoublingEveryOpAndDtype) {
  for (int t = 0; t < kNumDataTypes; ++t) {
    for (int o = 0; o < kNumReduceOps; ++o) {
      auto type = static_cast<DataType>(t);
      auto op = static_cast<ReduceOp>(o);
      if (!reduceOpSupports(op, type)) continue;
      checkAllreduce(6, 37, type, op, AllreduceAlgorithm::kRecursiveDoubling);
    }
  }
}

// Above Tuning::directMaxRanks small buffers go to recursive doubling, and every rank still
// ends with the same bits (random floats, where the order of reduction shows).
TEST(Allreduce, DispatchPicksRecursiveDoublingForManyRanksBitIdentical) {
  const int size = 11;
  const size_t count = 1000;
  std::vector<std::vector<float>> results(size);
  std::vector<std::string> algorithmUsed(size);
  runGroup(
      size,
      [&](Group& group) {
        std::vector<float> data = testing::randomFloats(count, 777 + group.rank());
        group.run(CollectiveKind::kAllreduce, DataType::kFloat32, ReduceOp::kSum, -1, {},
                  [&](Collective& c) {
                    algorithms::allreduce(c, data.data(), count, DataType::kFloat32, ReduceOp::kSum,
                                          group.tuning());
                    algorithmUsed[group.rank()] = c.algorithm();
                  });
        results[group.rank()] = data;
      },
      [](GroupOptions& options) { options.tuning.directMaxRanks = 4; });
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(algorithmUsed[r], "recursive_doubling");
    EXPECT_EQ(0, std::memcmp(results[0].data(), results[r].data(), count * sizeof(float)));
  }
}

TEST(Allreduce, EveryOpAndDtype) {
  for (int t = 0; t < kNumDataTypes; ++t) {
    for (int o = 0; o < kNumReduceOps; ++o) {
      auto type = static_cast<DataType>(t);
      auto op = static_cast<ReduceOp>(o);
      if (!reduceOpSupports(op, type)) continue;
      for (auto algorithm : {AllreduceAlgorithm::kDirect, AllreduceAlgorithm::kRingSmallSegments}) {
        checkAllreduce(3, 37, type, op, algorithm);
      }
    }
  }
}

TEST(Allreduce, EveryOpAndDtypeOverTcp) {
  for (int t = 0; t < kNumDataTypes; ++t) {
    for (int o = 0; o < kNumReduceOps; ++o) {
      auto type = static_cast<DataType>(t);
      auto op = static_cast<ReduceOp>(o);
      if (!reduceOpSupports(op, type)) continue;
      checkAllreduce(3, 50021, type, op, AllreduceAlgorithm::kRingSmallSegments, false);
    }
  }
}

TEST(Allreduce, RanksEndBitIdenticalOnRandomFloats) {
  const int size = 5;
  const size_t count = 300007;
  std::vector<std::vector<float>> results(size);
  runGroup(size, [&](Group& group) {
    std::vector<float> data = testing::randomFloats(count, 12345 + group.rank());
    group.run(CollectiveKind::kAllreduce, DataType::kFloat32, ReduceOp::kSum, -1, {},
              [&](Collective& c) {
                algorithms::ringAllreduce(c, data.data(), count, DataType::kFloat32, ReduceOp::kSum,
                                          4096);
              });
    results[group.rank()] = data;
  });
  for (int r = 1; r < size; ++r) {
    EXPECT_EQ(0, std::memcmp(results[0].data(), results[r].data(), count * sizeof(float)));
  }
}

TEST(Allreduce, DispatchPicksDirectOrRingBySize) {
  runGroup(3, [&](Group& group) {
    for (size_t count : {size_t{10}, size_t{100000}}) {
      std::vector<int32_t> data(count, group.rank() + 1);
      group.run(CollectiveKind::kAllreduce, DataType::kInt32, ReduceOp::kSum, -1, {},
                [&](Collective& c) {
                  algorithms::allreduce(c, data.data(), count, DataType::kInt32, ReduceOp::kSum,
                                        group.tuning());
                });
      for (int32_t v : data) ASSERT_EQ(v, 6);
    }
  });
}

TEST(ReduceScatter, EveryWorldSizeAndCountOverShmAndTcp) {
  for (bool sharedMemory : {true, false}) {
    for (int size : kWorldSizes) {
      for (size_t perRank : {size_t{0}, size_t{1}, size_t{13}, size_t{20011}}) {
        const size_t count = perRank * size;
        const auto expected = expectedReduction(DataType::kFloat64, ReduceOp::kSum, size, count);
        runGroup(
            size,
            [&](Group& group) {
              const auto input = makeInput(DataType::kFloat64, ReduceOp::kSum, group.rank(), count);
              const auto inputCopy = input;
              std::vector<char> output(perRank * sizeof(double));
              group.run(CollectiveKind::kReduceScatter, DataType::kFloat64, ReduceOp::kSum, -1, {},
                        [&](Collective& c) {
                          algorithms::ringReduceScatter(c, input.data(), output.data(), perRank,
                                                        DataType::kFloat64, ReduceOp::kSum, 256);
                        });
              ASSERT_TRUE(std::equal(output.begin(), output.end(),
                                     expected.begin() + group.rank() * perRank * sizeof(double)));
              ASSERT_EQ(input, inputCopy) << "reduce-scatter must not modify its input";
            },
            [&](GroupOptions& options) { options.mesh.sharedMemory = sharedMemory; });
      }
    }
  }
}

TEST(Allgather, EveryWorldSizeAndSize) {
  for (int size : kWorldSizes) {
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{31}, size_t{300001}}) {
      runGroup(size, [&](Group& group) {
        std::vector<char> input(bytes);
        for (size_t i = 0; i < bytes; ++i) input[i] = static_cast<char>(group.rank() * 31 + i);
        std::vector<char> output(bytes * size);
        group.run(CollectiveKind::kAllgather, DataType::kUInt8, ReduceOp::kSum, -1, {},
                  [&](Collective& c) {
                    algorithms::ringAllgather(c, input.data(), output.data(), bytes, 4096);
                  });
        for (int r = 0; r < size; ++r) {
          for (size_t i = 0; i < bytes; ++i) {
            ASSERT_EQ(output[r * bytes + i], static_cast<char>(r * 31 + i));
          }
        }
      });
    }
  }
}

TEST(Broadcast, EveryAlgorithmRootWorldSizeAndSize) {
  for (bool direct : {false, true}) {
    for (int size : kWorldSizes) {
      for (int root = 0; root < size; ++root) {
        for (size_t bytes : {size_t{0}, size_t{1}, size_t{4099}, size_t{1 << 20}}) {
          const auto sent = broadcastPattern(bytes);
          runGroup(size, [&](Group& group) {
            auto data = group.rank() == root ? sent : std::vector<char>(bytes, char(group.rank()));
            group.run(CollectiveKind::kBroadcast, DataType::kUInt8, ReduceOp::kSum, root, {},
                      [&](Collective& c) {
                        if (direct) {
                          algorithms::directBroadcast(c, data.data(), bytes, root);
                        } else {
                          algorithms::chainBroadcast(c, data.data(), bytes, root, 1000);
                        }
                      });
            ASSERT_TRUE(sameBytes(data, sent)) << "rank " << group.rank() << " of " << size;
          });
        }
      }
    }
  }
}

TEST(Broadcast, BinomialTreeEveryRootAndWorldSize) {
  for (int size : {1, 2, 3, 5, 8, 9, 12, 16, 17}) {
    for (int root : {0, 1, size / 2, size - 1}) {
      if (root >= size) continue;
      for (size_t bytes : {size_t{0}, size_t{1}, size_t{4099}}) {
        const auto sent = broadcastPattern(bytes);
        runGroup(size, [&](Group& group) {
          auto data = group.rank() == root ? sent : std::vector<char>(bytes, char(group.rank()));
          group.run(
              CollectiveKind::kBroadcast, DataType::kUInt8, ReduceOp::kSum, root, {},
              [&](Collective& c) { algorithms::binomialBroadcast(c, data.data(), bytes, root); });
          ASSERT_TRUE(sameBytes(data, sent)) << "rank " << group.rank() << " of " << size;
        });
      }
    }
  }
}

TEST(Reduce, EveryRootWorldSizeAndCount) {
  for (bool direct : {false, true}) {
    for (int size : kWorldSizes) {
      for (int root = 0; root < size; ++root) {
        for (size_t count : {size_t{0}, size_t{1}, size_t{1009}}) {
          const auto expected = expectedReduction(DataType::kInt32, ReduceOp::kMax, size, count);
          runGroup(size, [&](Group& group) {
            auto data = makeInput(DataType::kInt32, ReduceOp::kMax, group.rank(), count);
            const auto original = data;
            group.run(CollectiveKind::kReduce, DataType::kInt32, ReduceOp::kMax, root, {},
                      [&](Collective& c) {
                        if (direct) {
                          algorithms::directReduce(c, data.data(), count, DataType::kInt32,
                                                   ReduceOp::kMax, root);
                        } else {
                          algorithms::chainReduce(c, data.data(), count, DataType::kInt32,
                                                  ReduceOp::kMax, root, 64);
                        }
                      });
            if (group.rank() == root) {
              ASSERT_EQ(data, expected);
            } else {
              ASSERT_EQ(data, original) << "reduce must leave non-root buffers alone";
            }
          });
        }
      }
    }
  }
}

TEST(GatherScatter, EveryRootAndWorldSize) {
  for (int size : kWorldSizes) {
    for (int root = 0; root < size; ++root) {
      const size_t bytes = 1001;
      runGroup(size, [&](Group& group) {
        std::vector<char> input(bytes, static_cast<char>(group.rank() + 1));
        std::vector<char> gathered(bytes * size, 0);
        group.run(CollectiveKind::kGather, DataType::kUInt8, ReduceOp::kSum, root, {},
                  [&](Collective& c) {
                    algorithms::gather(c, input.data(), gathered.data(), bytes, root);
                  });
        if (group.rank() == root) {
          for (int r = 0; r < size; ++r) ASSERT_EQ(gathered[r * bytes + 5], r + 1);
        }
        std::vector<char> pieces(bytes * size);
        for (int r = 0; r < size; ++r) std::fill_n(pieces.begin() + r * bytes, bytes, r + 10);
        std::vector<char> mine(bytes, 0);
        group.run(CollectiveKind::kScatter, DataType::kUInt8, ReduceOp::kSum, root, {},
                  [&](Collective& c) {
                    algorithms::scatter(c, pieces.data(), mine.data(), bytes, root);
                  });
        for (char v : mine) ASSERT_EQ(v, group.rank() + 10);
      });
    }
  }
}

TEST(Alltoall, UnevenSplits) {
  for (int size : kWorldSizes) {
    runGroup(size, [&](Group& group) {
      const int r = group.rank();
      // Rank r sends (r + p + 1) * 3 bytes to rank p, each byte = r * 16 + p.
      std::vector<size_t> sendOffsets, sendBytes, recvOffsets, recvBytes;
      size_t sendTotal = 0, recvTotal = 0;
      for (int p = 0; p < size; ++p) {
        sendOffsets.push_back(sendTotal);
        sendBytes.push_back((r + p + 1) * 3);
        sendTotal += sendBytes.back();
        recvOffsets.push_back(recvTotal);
        recvBytes.push_back((p + r + 1) * 3);
        recvTotal += recvBytes.back();
      }
      std::vector<char> input(sendTotal), output(recvTotal, -1);
      for (int p = 0; p < size; ++p) {
        std::fill_n(input.begin() + sendOffsets[p], sendBytes[p], static_cast<char>(r * 16 + p));
      }
      group.run(CollectiveKind::kAlltoall, DataType::kUInt8, ReduceOp::kSum, -1, {},
                [&](Collective& c) {
                  algorithms::alltoall(c, input.data(), sendOffsets, sendBytes, output.data(),
                                       recvOffsets, recvBytes);
                });
      for (int p = 0; p < size; ++p) {
        for (size_t i = 0; i < recvBytes[p]; ++i) {
          ASSERT_EQ(output[recvOffsets[p] + i], static_cast<char>(p * 16 + r));
        }
      }
    });
  }
}

// The recursive-doubling barrier (more ranks than Tuning::directMaxRanks): nobody leaves
// before the last rank has entered, whatever the world size.
TEST(Barrier, RecursiveDoublingHoldsEveryoneUntilTheLastArrives) {
  for (int size : {2, 3, 5, 9, 16}) {
    std::atomic<int> entered{0};
    runGroup(
        size,
        [&](Group& group) {
          for (int round = 0; round < 5; ++round) {
            // The last rank comes late to every round.
            if (group.rank() == size - 1) {
              std::this_thread::sleep_for(std::chrono::milliseconds(20));
            }
            ++entered;
            group.run(CollectiveKind::kBarrier, DataType::kUInt8, ReduceOp::kSum, -1, {},
                      [&](Collective& c) {
                        algorithms::barrier(c, group.tuning());
                        EXPECT_STREQ(c.algorithm(), "recursive_doubling");
                      });
            EXPECT_GE(entered.load(), size * (round + 1)) << "left the barrier early";
          }
        },
        [](GroupOptions& options) { options.tuning.directMaxRanks = 1; });
  }
}

TEST(Barrier, ManyBackToBackMixedCollectives) {
  runGroup(4, [&](Group& group) {
    for (int round = 0; round < 50; ++round) {
      group.run(CollectiveKind::kBarrier, DataType::kUInt8, ReduceOp::kSum, -1, {},
                [](Collective& c) { algorithms::barrier(c); });
      size_t count = (round * 977) % 5000;
      std::vector<int64_t> data(count, group.rank());
      group.run(CollectiveKind::kAllreduce, DataType::kInt64, ReduceOp::kSum, -1, {},
                [&](Collective& c) {
                  algorithms::allreduce(c, data.data(), count, DataType::kInt64, ReduceOp::kSum,
                                        group.tuning());
                });
      for (auto v : data) ASSERT_EQ(v, 6);
    }
    EXPECT_EQ(group.collectivesIssued(), 100u);
  });
}

// Group::traffic() counts what the transports moved. In a ring allreduce of S equal
// chunks, a rank sends S-1 chunks in the reduce-scatter and S-1 in the all-gather,
// all to its right neighbour, plus one 32-byte header to each ring neighbour; every
// byte sent is a byte received. (Over TCP here; shm_test.cc checks shm.)
TEST(Traffic, RingAllreduceSendsEachChunkTwiceAroundTheRing) {
  for (int size : {2, 3, 4}) {
    const size_t count = 12000;  // divisible by every size: equal chunks
    std::vector<std::vector<ConnectionTraffic>> before(size), after(size);
    runGroup(
        size,
        [&](Group& group) {
          std::vector<int64_t> data(count, group.rank());
          before[group.rank()] = group.traffic();
          group.run(CollectiveKind::kAllreduce, DataType::kInt64, ReduceOp::kSum, -1, {},
                    [&](Collective& c) {
                      algorithms::ringAllreduce(c, data.data(), count, DataType::kInt64,
                                                ReduceOp::kSum, 4096);
                    });
          after[group.rank()] = group.traffic();
        },
        [](GroupOptions& options) { options.mesh.sharedMemory = false; });
    const uint64_t header = sizeof(algorithms::CollectiveHeader);
    const uint64_t chunk = count / size * sizeof(int64_t);
    uint64_t sent = 0, received = 0;
    for (int rank = 0; rank < size; ++rank) {
      ASSERT_EQ(after[rank].size(), 2u * (size - 1));  // collective + p2p to each peer
      for (size_t i = 0; i < after[rank].size(); ++i) {
        const ConnectionTraffic& a = after[rank][i];
        const uint64_t out = a.sent - before[rank][i].sent;
        // Connections are made on demand: only the ring neighbours are connected.
        const bool neighbour = a.peer == (rank + 1) % size || a.peer == (rank + size - 1) % size;
        EXPECT_EQ(a.transport, neighbour ? "tcp" : "none") << "rank " << rank << " to " << a.peer;
        uint64_t expected = 0;
        if (a.channel == "collective" && a.peer == (rank + 1) % size) {
          expected = 2 * (size - 1) * chunk + header;
        } else if (a.channel == "collective" && a.peer == (rank + size - 1) % size) {
          expected = header;
        }
        EXPECT_EQ(out, expected) << "world size " << size << ", rank " << rank << " to " << a.peer
                                 << " on " << a.channel;
        sent += out;
        received += a.received - before[rank][i].received;
      }
    }
    EXPECT_EQ(received, sent);
  }
}

}  // namespace
}  // namespace ringx
