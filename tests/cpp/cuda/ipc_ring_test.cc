// The device ring's CUDA instance on one GPU shared by several ranks (each a fresh process:
// ipc_ring_worker.cc): the CPU instance's test matrix on device memory at 2 and 4 ranks, and a
// rank dying mid-ring. Skips with "no CUDA device" where there is none.
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "backend/device/cuda/reduce_kernels.h"
#include "tests/cpp/cuda/gpu_test.h"

extern char** environ;

namespace {

// Runs `size` workers of `scenario`; returns each one's exit status.
std::vector<int> runWorkers(const std::string& scenario, int size) {
  char pattern[] = "/tmp/ringx-cuda-ring-XXXXXX";
  const std::string dir = ::mkdtemp(pattern);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < size; ++rank) {
    std::vector<std::string> args = {RINGX_CUDA_RING_WORKER, scenario, std::to_string(rank),
                                     std::to_string(size), dir};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    EXPECT_EQ(::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ), 0);
    pids.push_back(pid);
  }
  std::vector<int> status;
  for (pid_t pid : pids) {
    int s = 0;
    ::waitpid(pid, &s, 0);
    status.push_back(WIFEXITED(s) ? WEXITSTATUS(s) : 128 + WTERMSIG(s));
  }
  std::filesystem::remove_all(dir);
  return status;
}

class IpcRingWorld : public ::testing::TestWithParam<int> {};

TEST_P(IpcRingWorld, EveryCollectiveDtypeOpAndSizeOnOneGpu) {
  SKIP_WITHOUT_GPU();
  const auto status = runWorkers("matrix", GetParam());
  for (size_t r = 0; r < status.size(); ++r) EXPECT_EQ(status[r], 0) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Ranks, IpcRingWorld, ::testing::Values(2, 4));

TEST(IpcRing, PeerDyingMidRingIsAnErrorNamingIt) {
  SKIP_WITHOUT_GPU();
  const auto status = runWorkers("die", 3);
  EXPECT_EQ(status[0], 0);
  EXPECT_EQ(status[1], 0);
}

}  // namespace
