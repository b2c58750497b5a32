// Data-parallel training from C++ alone: libtorch + ringx::ddp over backend ringx.
//
//   build/bin/train_ddp_cpp --world-size 2 [--steps 30] [--trace DIR]
//
// Without --rank the program starts --world-size copies of itself (ranks 0..N-1)
// that meet through a torch FileStore, as torchrun-started ranks would meet
// through a TCPStore. Every rank starts from different random weights; the DDP
// constructor broadcasts rank 0's, backward averages gradients with ringx's ring
// allreduce (several buckets, overlapped with backward), and every other step
// accumulates two micro-batches under noSync(). At the end the ranks check that
// their weights are bit-identical and print the engine's last per-bucket timings.
// Exit status 0 means training ran and the ranks agree.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/c10d/process_group_ringx.h"
#include "backend/group/trace_session.h"
#include "backend/trace/recorder.h"
#include "ddp/distributed_data_parallel.h"

extern char** environ;

namespace {

struct Args {
  int worldSize = 2;
  int rank = -1;
  int steps = 30;
  std::string store;
  std::string trace;
};

Args parseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "train_ddp_cpp: %s needs a value\n", flag.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (flag == "--world-size")
      a.worldSize = std::stoi(value());
    else if (flag == "--rank")
      a.rank = std::stoi(value());
    else if (flag == "--steps")
      a.steps = std::stoi(value());
    else if (flag == "--store")
      a.store = value();
    else if (flag == "--trace")
      a.trace = value();
    else {
      std::fprintf(stderr,
                   "usage: train_ddp_cpp [--world-size N] [--steps S] [--trace DIR]\n"
                   "unknown argument: %s\n",
                   flag.c_str());
      std::exit(2);
    }
  }
  if (a.worldSize < 1) {
    std::fprintf(stderr, "train_ddp_cpp: --world-size must be at least 1\n");
    std::exit(2);
  }
  return a;
}

// Starts one process per rank and waits for all of them.
int launch(const Args& args, const char* self) {
  char storeTemplate[] = "/tmp/ringx-train-ddp-XXXXXX";
  if (!mkdtemp(storeTemplate)) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::string store = std::string(storeTemplate) + "/store";
  std::vector<pid_t> pids;
  for (int r = 0; r < args.worldSize; ++r) {
    std::vector<std::string> argvStrings = {self,
                                            "--world-size",
                                            std::to_string(args.worldSize),
                                            "--rank",
                                            std::to_string(r),
                                            "--steps",
                                            std::to_string(args.steps),
                                            "--store",
                                            store};
    if (!args.trace.empty()) {
      argvStrings.push_back("--trace");
      argvStrings.push_back(args.trace);
    }
    std::vector<char*> argvPointers;
    for (std::string& s : argvStrings) argvPointers.push_back(s.data());
    argvPointers.push_back(nullptr);
    pid_t pid = 0;
    if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argvPointers.data(), environ) != 0) {
      std::perror("posix_spawn");
      return 1;
    }
    pids.push_back(pid);
  }
  int failures = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
  }
  std::remove(store.c_str());
  rmdir(storeTemplate);
  if (failures) std::fprintf(stderr, "train_ddp_cpp: %d rank(s) failed\n", failures);
  return failures ? 1 : 0;
}

// A synthetic regression problem: y = sum(sin(x)); each rank sees its own shard.
std::pair<torch::Tensor, torch::Tensor> batch(int rank, int step, int micro) {
  auto generator = at::detail::createCPUGenerator(100000 * step + 100 * rank + micro);
  torch::Tensor x = at::randn({32, 32}, generator);
  return {x, torch::sin(x).sum(1, /*keepdim=*/true)};
}

int train(const Args& args) {
  if (!args.trace.empty()) setenv("RINGX_TRACE_DIR", args.trace.c_str(), 1);
  auto store = c10::make_intrusive<c10d::FileStore>(args.store, args.worldSize);
  auto group = c10::make_intrusive<ringx::c10d_glue::ProcessGroupRingx>(
      store, args.rank, args.worldSize, std::chrono::milliseconds(60000));

  torch::manual_seed(args.rank);  // different weights on every rank, until DDP broadcasts
  torch::nn::Sequential model(torch::nn::Linear(32, 128), torch::nn::ReLU(),
                              torch::nn::Linear(128, 128), torch::nn::ReLU(),
                              torch::nn::Linear(128, 1));
  ringx::ddp::DistributedDataParallel<torch::nn::Sequential> ddp(
      model, group, ringx::ddp::Options().bucket_cap_mb(0.02));  // several small buckets
  torch::optim::SGD optimizer(ddp.parameters(), torch::optim::SGDOptions(0.02).momentum(0.9));

  float loss = 0;
  for (int step = 0; step < args.steps; ++step) {
    ringx::trace::markStep(step);
    optimizer.zero_grad();
    if (step % 2 == 1) {
      // Gradient accumulation: the first micro-batch stays local...
      auto guard = ddp.noSync();
      auto [x, y] = batch(args.rank, step, 1);
      torch::mse_loss(ddp.forward(x), y).backward();
    }
    // ...and this backward averages the accumulated sum across ranks.
    auto [x, y] = batch(args.rank, step, 0);
    torch::Tensor l = torch::mse_loss(ddp.forward(x), y);
    l.backward();
    optimizer.step();
    loss = l.item<float>();
    if (args.rank == 0 && (step % 10 == 0 || step == args.steps - 1)) {
      std::printf("step %3d  loss %.4f\n", step, loss);
      std::fflush(stdout);
    }
  }

  // Every rank must hold the same weights: compare each rank's with rank 0's.
  torch::Tensor flat = torch::cat([&] {
    std::vector<torch::Tensor> parts;
    for (const auto& p : model->parameters()) parts.push_back(p.detach().reshape(-1));
    return parts;
  }());
  torch::Tensor reference = flat.clone();
  std::vector<torch::Tensor> tensors{reference};
  group->broadcast(tensors, c10d::BroadcastOptions{})->wait();
  const bool same = torch::equal(reference, flat);

  const ringx::ddp::IterationTiming last = ddp.engine().reducer().lastIteration();
  int64_t wire = 0;
  for (const auto& b : last.buckets) wire += b.wireEndNs - b.wireStartNs;
  std::printf("rank %d: %s; %zu buckets, last iteration: allreduce %.0f us, exposed %.0f us%s\n",
              args.rank, same ? "parameters identical to rank 0's" : "PARAMETERS DIFFER",
              last.buckets.size(), wire / 1e3, last.exposedNs / 1e3,
              ddp.engine().reducer().bucketsRebuilt() ? ", buckets rebuilt in gradient order" : "");
  ringx::TraceSession::stop();
  return same ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args args = parseArgs(argc, argv);
  if (args.rank < 0) return launch(args, argv[0]);
  try {
    return train(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", args.rank, e.what());
    return 1;
  }
}
