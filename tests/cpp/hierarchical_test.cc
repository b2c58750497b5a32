// The host layout, the hierarchical allreduce and broadcast (hierarchical_*.cc): ranks as threads,
// their hosts faked (GroupOptions::fakeHosts, RINGX_FAKE_HOSTS), results compared with the
// reference for every op and dtype, on uneven hosts, hosts whose ranks interleave, one rank per
// host and one host, through every sub-algorithm of the three steps.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/reduce/reduce.h"
#include "tests/cpp/rank_threads.h"
#include "tests/cpp/reduction_reference.h"

namespace ringx {
namespace {

using algorithms::Collective;
using algorithms::CollectiveKind;
using algorithms::Tuning;
using bootstrap::HostLayout;
using testing::broadcastPattern;
using testing::expectedReduction;
using testing::makeInput;
using testing::messageOf;
using testing::runGroup;
using testing::sameBytes;

// Sets an environment variable for the life of the object (tests run one at a time).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~ScopedEnv() { ::unsetenv(name_); }

 private:
  const char* name_;
};

// Host labels for consecutive hosts of the given sizes.
std::vector<int> hostsOfSizes(const std::vector<int>& sizes) {
  std::vector<int> labels;
  for (size_t h = 0; h < sizes.size(); ++h) labels.insert(labels.end(), sizes[h], h);
  return labels;
}

TEST(HostLayout, NumbersHostsByTheirLowestRank) {
  const HostLayout layout({7, 7, 3, 7, 3, 9});
  EXPECT_EQ(layout.size(), 6);
  EXPECT_EQ(layout.hosts(), 3);
  EXPECT_EQ(layout.leaders(), (std::vector<int>{0, 2, 5}));
  EXPECT_EQ(layout.ranksOn(0), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(layout.ranksOn(1), (std::vector<int>{2, 4}));
  EXPECT_EQ(layout.ranksOn(2), (std::vector<int>{5}));
  EXPECT_EQ(layout.leaderOf(4), 2);
  EXPECT_TRUE(layout.isLeader(5));
  EXPECT_FALSE(layout.isLeader(3));
  EXPECT_EQ(layout.largestHost(), 3);
  EXPECT_EQ(layout.encode(), "0*2,1*1,0*1,1*1,2*1");
  EXPECT_EQ(HostLayout::decode(layout.encode(), 6), layout);
}

TEST(HostLayout, BlocksEncodeAsOneRunPerHost) {
  const HostLayout layout = HostLayout::blocks(10, 4);
  EXPECT_EQ(layout.encode(), "0*4,1*4,2*2");
  EXPECT_EQ(layout.ranksOnHost(2), 2);
  EXPECT_EQ(HostLayout::decode("0*4,1*4,2*2", 10), layout);
  EXPECT_EQ(HostLayout::oneHost(3).encode(), "0*3");
  // Text that does not describe the group is an error, never a wrong layout.
  EXPECT_THROW(HostLayout::decode("0*4,1*4", 10), Error);
  EXPECT_THROW(HostLayout::decode("0*4,1*7", 10), Error);
  EXPECT_THROW(HostLayout::decode("zero", 3), Error);
  EXPECT_THROW(HostLayout::decode("0*3,", 3), Error);
}

// Every rank holds rank 0's layout: the real one (threads of one process: one host), the
// fake one from GroupOptions (rank 0's, whatever the others were given) or RINGX_FAKE_HOSTS.
TEST(HostLayout, EveryRankHoldsTheLayoutRankZeroPublished) {
  const int size = 10;
  std::vector<HostLayout> seen(size);
  runGroup(size, [&](Group& group) { seen[group.rank()] = group.hosts(); });
  for (const auto& layout : seen) EXPECT_EQ(layout, HostLayout::oneHost(size));

  const std::vector<int> labels = {0, 1, 2, 0, 1, 2, 0, 1, 2, 3};
  runGroup(
      size, [&](Group& group) { seen[group.rank()] = group.hosts(); },
      [&](GroupOptions& options) {
        options.fakeHosts = options.rank == 0 ? labels : std::vector<int>(size, 5);
      });
  for (const auto& layout : seen) EXPECT_EQ(layout, HostLayout(labels));

  ScopedEnv fake("RINGX_FAKE_HOSTS", "4");
  runGroup(size, [&](Group& group) { seen[group.rank()] = group.hosts(); });
  for (const auto& layout : seen) EXPECT_EQ(layout, HostLayout::blocks(size, 4));
}

TEST(HostLayout, HierarchicalModeFromTheEnvironment) {
  EXPECT_EQ(tuningFromEnvironment().hierarchical, Tuning::Hierarchy::kAuto);
  {
    ScopedEnv mode("RINGX_HIERARCHICAL", "on");
    EXPECT_EQ(tuningFromEnvironment().hierarchical, Tuning::Hierarchy::kOn);
  }
  {
    ScopedEnv mode("RINGX_HIERARCHICAL", "off");
    EXPECT_EQ(tuningFromEnvironment().hierarchical, Tuning::Hierarchy::kOff);
  }
  ScopedEnv mode("RINGX_HIERARCHICAL", "sometimes");
  EXPECT_NE(messageOf([] { tuningFromEnvironment(); }).find("auto, on, off"), std::string::npos);
}

// A view numbers its members 0.. in the order given, maps them to group ranks (through views
// of views too), and has the layout of its members; its peers count in the outermost's trace.
TEST(CollectiveView, NumbersMembersAndKeepsTheirHosts) {
  const std::vector<int> labels = {0, 1, 2, 0, 1, 2, 0};
  runGroup(
      7,
      [&](Group& group) {
        const int r = group.rank();
        if (r != 1 && r != 4 && r != 6) return;
        group.run(CollectiveKind::kBroadcast, DataType::kUInt8, ReduceOp::kSum, 0, {},
                  [&](Collective& c) {
                    Collective odd(c, {6, 4, 1});  // hosts 0, 1, 1
                    EXPECT_EQ(odd.size(), 3);
                    EXPECT_EQ(odd.rank(), r == 6 ? 0 : r == 4 ? 1 : 2);
                    EXPECT_EQ(odd.hosts(), HostLayout({0, 1, 1}));
                    if (r == 6) return;
                    Collective inner(odd, {2, 1});  // group ranks 1, 4
                    EXPECT_EQ(inner.rank(), r == 1 ? 0 : 1);
                    EXPECT_EQ(inner.hosts().hosts(), 1);
                    char byte = r == 1 ? 42 : 0;
                    algorithms::directBroadcast(inner, &byte, 1, 0);
                    EXPECT_EQ(byte, 42);
                    EXPECT_EQ(c.peers(), (std::vector<int>{r == 1 ? 4 : 1}));
                  });
      },
      [&](GroupOptions& options) { options.fakeHosts = labels; });
}

// Which sub-algorithms the three steps take (small buffers: direct reduce, leaders' direct or
// recursive-doubling allreduce, direct or binomial broadcast; large ones: chain reduce, ring,
// chain broadcast).
struct Paths {
  const char* name;
  size_t directMaxBytes;  // directAllreduceMaxBytes and directBroadcastMaxBytes
  int directMaxRanks;
  size_t segmentBytes;
};
const Paths kSmall{"direct", 1 << 20, 8, 1 << 20};
const Paths kSmallManyRanks{"recursive doubling and trees", 1 << 20, 2, 1 << 20};
const Paths kLarge{"ring and chains", 64, 8, 1024};

void checkHierarchical(const std::vector<int>& hosts, size_t count, DataType type, ReduceOp op,
                       const Paths& paths, bool sharedMemory = true) {
  const int size = static_cast<int>(hosts.size());
  const std::vector<char> expected = expectedReduction(type, op, size, count);
  runGroup(
      size,
      [&](Group& group) {
        std::vector<char> data = makeInput(type, op, group.rank(), count);
        group.run(CollectiveKind::kAllreduce, type, op, -1, {}, [&](Collective& c) {
          algorithms::allreduce(c, data.data(), count, type, op, group.tuning());
          if (size > 1) {
            ASSERT_EQ(std::string(c.algorithm()).rfind("hierarchical", 0), 0u);
          }
        });
        ASSERT_EQ(data, expected) << "rank " << group.rank() << " of " << size << ", count "
                                  << count << ", " << dataTypeName(type) << " " << reduceOpName(op)
                                  << ", " << paths.name;
      },
      [&](GroupOptions& options) {
        options.fakeHosts = hosts;
        options.tuning.hierarchical = Tuning::Hierarchy::kOn;
        options.tuning.directAllreduceMaxBytes = paths.directMaxBytes;
        options.tuning.directBroadcastMaxBytes = paths.directMaxBytes;
        options.tuning.directMaxRanks = paths.directMaxRanks;
        options.tuning.segmentBytes = paths.segmentBytes;
        options.mesh.sharedMemory = sharedMemory;
        options.mesh.shmCapacity = 4099;  // odd: elements straddle the end of the ring
      });
}

// Uneven hosts, hosts whose ranks interleave, one rank per host, one host, two ranks, one rank.
const std::vector<std::vector<int>> kLayouts = {
    hostsOfSizes({4, 3, 5}),
    {0, 1, 2, 0, 1, 2, 0},
    {0, 1, 2, 3, 4},
    {0, 0, 0, 0, 0, 0},
    {0, 1},
    {0, 0},
    {0},
};

TEST(HierarchicalAllreduce, EveryLayoutCountAndPath) {
  for (const auto& hosts : kLayouts) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1009}, size_t{20011}}) {
      for (const Paths& paths : {kSmall, kSmallManyRanks, kLarge}) {
        checkHierarchical(hosts, count, DataType::kFloat32, ReduceOp::kSum, paths);
      }
    }
  }
}

TEST(HierarchicalAllreduce, EveryOpAndDtypeOnUnevenHosts) {
  for (int t = 0; t < kNumDataTypes; ++t) {
    for (int o = 0; o < kNumReduceOps; ++o) {
      auto type = static_cast<DataType>(t);
      auto op = static_cast<ReduceOp>(o);
      if (!reduceOpSupports(op, type)) continue;
      checkHierarchical(hostsOfSizes({4, 3, 5}), 37, type, op, kSmall);
      checkHierarchical(hostsOfSizes({4, 3, 5}), 37, type, op, kSmallManyRanks);
      // Large: several segments per chunk of the leaders' ring and along the chains.
      checkHierarchical(hostsOfSizes({4, 3, 5}), 5003, type, op, kLarge);
    }
  }
}

TEST(HierarchicalAllreduce, EveryOpAndDtypeOverTcp) {
  for (int t = 0; t < kNumDataTypes; ++t) {
    for (int o = 0; o < kNumReduceOps; ++o) {
      auto type = static_cast<DataType>(t);
      auto op = static_cast<ReduceOp>(o);
      if (!reduceOpSupports(op, type)) continue;
      checkHierarchical({0, 1, 0, 1, 2}, 5003, type, op, kLarge, false);
    }
  }
}

// Random floats, where the order of reduction shows: every rank ends with the same bits, on
// each path.
TEST(HierarchicalAllreduce, RanksEndBitIdenticalOnRandomFloats) {
  const std::vector<int> hosts = hostsOfSizes({4, 3, 5});
  const int size = static_cast<int>(hosts.size());
  for (const Paths& paths : {kSmall, kSmallManyRanks, kLarge}) {
    for (bool sharedMemory : {true, false}) {
      const size_t count = paths.directMaxBytes > 4096 ? 1000 : 300007;
      std::vector<std::vector<float>> results(size);
      runGroup(
          size,
          [&](Group& group) {
            std::vector<float> data = testing::randomFloats(count, 12345 + group.rank());
            group.run(CollectiveKind::kAllreduce, DataType::kFloat32, ReduceOp::kSum, -1, {},
                      [&](Collective& c) {
                        algorithms::allreduce(c, data.data(), count, DataType::kFloat32,
                                              ReduceOp::kSum, group.tuning());
                      });
            results[group.rank()] = data;
          },
          [&](GroupOptions& options) {
            options.fakeHosts = hosts;
            options.tuning.directAllreduceMaxBytes = paths.directMaxBytes;
            options.tuning.directBroadcastMaxBytes = paths.directMaxBytes;
            options.tuning.directMaxRanks = paths.directMaxRanks;
            options.tuning.segmentBytes = std::max<size_t>(4096, paths.segmentBytes);
            options.mesh.sharedMemory = sharedMemory;
          });
      for (int r = 1; r < size; ++r) {
        ASSERT_EQ(0, std::memcmp(results[0].data(), results[r].data(), count * sizeof(float)))
            << "rank " << r << ", " << paths.name << (sharedMemory ? ", shm" : ", tcp");
      }
    }
  }
}

// AVG's division inside the algorithms (divideBy: the ring's last reducing step, after the
// small algorithms, at the leaders before the hosts' broadcast): on every layout and path the
// result is the same SUM divided, bit for bit, on every rank.
TEST(HierarchicalAllreduce, DivideByGivesTheSumDividedOnEveryLayoutAndPath) {
  for (const auto& hosts : kLayouts) {
    const int size = static_cast<int>(hosts.size());
    for (const Paths& paths : {kSmall, kSmallManyRanks, kLarge}) {
      for (bool hierarchical : {true, false}) {
        const size_t count = 5003;
        runGroup(
            size,
            [&](Group& group) {
              std::vector<float> sum = testing::randomFloats(count, 777 + group.rank());
              std::vector<float> average = sum;
              for (std::vector<float>* data : {&sum, &average}) {
                const double divideBy = data == &average ? size : 0;
                group.run(CollectiveKind::kAllreduce, DataType::kFloat32, ReduceOp::kSum, -1, {},
                          [&](Collective& c) {
                            algorithms::allreduce(c, data->data(), count, DataType::kFloat32,
                                                  ReduceOp::kSum, group.tuning(), divideBy);
                          });
              }
              reduce::divide(DataType::kFloat32, sum.data(), size, count);
              ASSERT_EQ(0, std::memcmp(sum.data(), average.data(), count * sizeof(float)))
                  << "rank " << group.rank() << " of " << size << ", " << paths.name
                  << (hierarchical ? ", hierarchical" : ", flat");
            },
            [&](GroupOptions& options) {
              options.fakeHosts = hosts;
              options.tuning.hierarchical =
                  hierarchical ? Tuning::Hierarchy::kOn : Tuning::Hierarchy::kOff;
              options.tuning.directAllreduceMaxBytes = paths.directMaxBytes;
              options.tuning.directBroadcastMaxBytes = paths.directMaxBytes;
              options.tuning.directMaxRanks = paths.directMaxRanks;
              options.tuning.segmentBytes = paths.segmentBytes;
            });
      }
    }
  }
}

// The algorithm allreduce() picks for `hosts` (host labels per rank; empty: the real host).
std::string algorithmPicked(int size, const std::vector<int>& hosts, Tuning::Hierarchy mode,
                            size_t count = 100) {
  std::vector<std::string> used(size);
  runGroup(
      size,
      [&](Group& group) {
        std::vector<int32_t> data(count, group.rank());
        group.run(CollectiveKind::kAllreduce, DataType::kInt32, ReduceOp::kSum, -1, {},
                  [&](Collective& c) {
                    algorithms::allreduce(c, data.data(), count, DataType::kInt32, ReduceOp::kSum,
                                          group.tuning());
                    used[group.rank()] = c.algorithm();
                  });
        for (int32_t v : data) ASSERT_EQ(v, size * (size - 1) / 2);
      },
      [&](GroupOptions& options) {
        options.fakeHosts = hosts;
        options.tuning.hierarchical = mode;
      });
  for (const auto& name : used) EXPECT_EQ(name, used[0]) << "ranks named different algorithms";
  return used[0];
}

// Auto: hierarchical only where the group spans hosts, has more than directMaxRanks (8) ranks,
// and more than one rank on some host.
TEST(HierarchicalAllreduce, AutoPicksItOnlyForManyRanksOnSeveralHosts) {
  using H = Tuning::Hierarchy;
  const std::vector<int> uneven = hostsOfSizes({4, 3, 5});
  EXPECT_EQ(algorithmPicked(12, uneven, H::kAuto), "hierarchical+direct");
  EXPECT_EQ(algorithmPicked(12, uneven, H::kAuto, 100000), "hierarchical+ring");
  EXPECT_EQ(algorithmPicked(12, {}, H::kAuto), "recursive_doubling");  // one host
  EXPECT_EQ(algorithmPicked(12, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, H::kAuto),
            "recursive_doubling");
  EXPECT_EQ(algorithmPicked(6, hostsOfSizes({3, 3}), H::kAuto), "direct");
  EXPECT_EQ(algorithmPicked(12, uneven, H::kOff), "recursive_doubling");
  EXPECT_EQ(algorithmPicked(6, hostsOfSizes({3, 3}), H::kOn), "hierarchical+direct");
  EXPECT_EQ(algorithmPicked(4, {}, H::kOn), "hierarchical");
}

// A rank that disagrees on the size is caught by the view's handshake, and every rank fails
// (none hangs): the rank it talks to with a mismatch, the others from the failure notices.
TEST(HierarchicalAllreduce, AMismatchFailsEveryRank) {
  const int size = 6;
  std::vector<std::string> messages(size);
  runGroup(
      size,
      [&](Group& group) {
        const size_t count = group.rank() == 4 ? 11 : 10;
        std::vector<float> data(count, 1.0f);
        messages[group.rank()] = messageOf([&] {
          group.run(CollectiveKind::kAllreduce, DataType::kFloat32, ReduceOp::kSum, -1, {},
                    [&](Collective& c) {
                      algorithms::allreduce(c, data.data(), count, DataType::kFloat32,
                                            ReduceOp::kSum, group.tuning());
                    });
        });
      },
      [&](GroupOptions& options) {
        options.fakeHosts = hostsOfSizes({3, 3});
        options.tuning.hierarchical = Tuning::Hierarchy::kOn;
        options.timeout = std::chrono::seconds(20);
      });
  for (int r = 0; r < size; ++r) {
    EXPECT_NE(messages[r].find("allreduce #0"), std::string::npos) << "rank " << r;
  }
  EXPECT_NE(messages[3].find("collective mismatch between rank 3 and rank 4"), std::string::npos)
      << messages[3];
}

// Every root of every layout: the root's host, then the leaders, then the other hosts, each
// with the direct, binomial-tree and chain broadcasts.
TEST(HierarchicalBroadcast, EveryLayoutRootAndSize) {
  for (const auto& hosts : kLayouts) {
    const int size = static_cast<int>(hosts.size());
    for (int root = 0; root < size; ++root) {
      for (size_t bytes : {size_t{0}, size_t{1}, size_t{4099}, size_t{100003}}) {
        const auto sent = broadcastPattern(bytes);
        for (int directMaxRanks : {8, 1}) {
          runGroup(
              size,
              [&](Group& group) {
                auto data =
                    group.rank() == root ? sent : std::vector<char>(bytes, char(group.rank()));
                group.run(CollectiveKind::kBroadcast, DataType::kUInt8, ReduceOp::kSum, root, {},
                          [&](Collective& c) {
                            algorithms::broadcast(c, data.data(), bytes, root, group.tuning());
                            if (size > 1) {
                              ASSERT_STREQ(c.algorithm(), "hierarchical");
                            }
                          });
                ASSERT_TRUE(sameBytes(data, sent))
                    << "rank " << group.rank() << " of " << size << ", root " << root << ", "
                    << bytes << " bytes";
              },
              [&](GroupOptions& options) {
                options.fakeHosts = hosts;
                options.tuning.hierarchical = Tuning::Hierarchy::kOn;
                options.tuning.directMaxRanks = directMaxRanks;
                options.tuning.segmentBytes = 4096;
                options.mesh.shmCapacity = 4099;
              });
        }
      }
    }
  }
}

// Auto: hierarchical for small broadcasts on many ranks over several hosts; large ones keep
// the pipelined chain.
TEST(HierarchicalBroadcast, AutoPicksItForSmallBuffersOnly) {
  const std::vector<int> hosts = hostsOfSizes({4, 3, 5});
  std::vector<std::string> used(hosts.size());
  runGroup(
      static_cast<int>(hosts.size()),
      [&](Group& group) {
        for (size_t bytes : {size_t{1000}, size_t{1 << 20}}) {
          std::vector<char> data(bytes, group.rank() == 5 ? 42 : 0);
          group.run(CollectiveKind::kBroadcast, DataType::kUInt8, ReduceOp::kSum, 5, {},
                    [&](Collective& c) {
                      algorithms::broadcast(c, data.data(), bytes, 5, group.tuning());
                      used[group.rank()] += std::string(c.algorithm()) + " ";
                    });
          ASSERT_EQ(data, std::vector<char>(bytes, 42));
        }
      },
      [&](GroupOptions& options) { options.fakeHosts = hosts; });
  for (const auto& name : used) EXPECT_EQ(name, "hierarchical chain ");
}

}  // namespace
}  // namespace ringx
