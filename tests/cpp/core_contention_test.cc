// The wait policy's contention probe (transport/core_contention.h): what it reads from
// /proc/loadavg, that it sees threads competing for the cores, and that collectives whose
// ranks sleep at once on contended cores still give the right results.
#include "backend/transport/core_contention.h"

#include <gtest/gtest.h>
#include <sys/sysinfo.h>

#include <atomic>
#include <thread>
#include <vector>

#include "backend/group/group.h"
#include "tests/cpp/process_ranks.h"

namespace ringx {
namespace {

using transport::CoreContention;

TEST(CoreContention, ReadsTheRunnableCountOfLoadavg) {
  EXPECT_EQ(CoreContention::runnableIn("0.52 0.31 0.20 3/412 12345\n"), 3);
  EXPECT_EQ(CoreContention::runnableIn("10.00 9.00 8.00 117/2048 1"), 117);
  EXPECT_EQ(CoreContention::runnableIn("0.52 0.31 0.20"), -1);
  EXPECT_EQ(CoreContention::runnableIn("0.52 0.31 0.20 x/412 1"), -1);
  EXPECT_EQ(CoreContention::runnableIn(""), -1);
}

// Spinning threads, one more than the host has cores, for as long as the object lives.
class Spinners {
 public:
  Spinners() {
    for (int i = 0; i <= ::get_nprocs(); ++i) {
      threads_.emplace_back([this] {
        while (!stop_.load(std::memory_order_relaxed)) {
        }
      });
    }
  }
  ~Spinners() {
    stop_ = true;
    for (auto& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

TEST(CoreContention, SeesMoreRunnableThreadsThanCores) {
  Spinners spinners;
  CoreContention probe(1);
  // The spinners are runnable from their start; sampling is rate-limited, so ask over time.
  bool seen = false;
  const auto until = CoreContention::Clock::now() + std::chrono::seconds(10);
  while (!seen && CoreContention::Clock::now() < until) {
    seen = probe.contended(CoreContention::Clock::now());
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_TRUE(seen) << "more spinning threads than cores, yet /proc/loadavg's runnable count "
                       "never exceeded the cores";
}

TEST(CoreContention, CollectivesOnContendedCoresGiveTheirResults) {
  auto errors = testing::runProcesses(2, [](int rank, std::shared_ptr<Store> store) {
    Spinners spinners;  // every wait of this rank now finds the cores contended
    GroupOptions options = testing::processOptions(rank, 2, std::move(store));
    options.timeout = std::chrono::seconds(60);  // every wait finds the cores contended
    Group group(options);
    for (size_t count : {size_t{1}, size_t{1000}, size_t{300000}}) {
      std::vector<int64_t> data(count, rank + 1);
      group.run(algorithms::CollectiveKind::kAllreduce, DataType::kInt64, ReduceOp::kSum, -1, {},
                [&](algorithms::Collective& c) {
                  algorithms::allreduce(c, data.data(), count, DataType::kInt64, ReduceOp::kSum,
                                        group.tuning());
                });
      for (int64_t v : data) {
        if (v != 3) throw std::runtime_error(strCat("allreduce of ", count, ": ", v, " != 3"));
      }
    }
  });
  for (auto& e : errors) EXPECT_EQ(e, "");
}

}  // namespace
}  // namespace ringx
