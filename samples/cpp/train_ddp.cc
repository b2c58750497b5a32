// Data-parallel training from C++ alone: libtorch + ringx::ddp over backend ringx.
//
//   build/bin/train_ddp_cpp --world-size 2 [--steps 30] [--trace DIR]
//
// Without --rank the program starts --world-size copies of itself (rank_launcher.h).
// Every rank starts from different random weights; the DDP
// constructor broadcasts rank 0's, backward averages gradients with ringx's ring
// allreduce (several buckets, overlapped with backward), and every other step
// accumulates two micro-batches under noSync(). At the end the ranks check that
// their weights are bit-identical and print the engine's last per-bucket timings.
// Exit status 0 means training ran and the ranks agree.
#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/c10d/process_group_ringx.h"
#include "backend/group/trace_session.h"
#include "ddp/distributed_data_parallel.h"
#include "samples/cpp/rank_launcher.h"
#include "trace/record/recorder.h"

namespace {

using Args = ringx::samples::RankArgs;

// A synthetic regression problem: y = sum(sin(x)); each rank sees its own shard.
std::pair<torch::Tensor, torch::Tensor> batch(int rank, int step, int micro) {
  auto generator = at::detail::createCPUGenerator(100000 * step + 100 * rank + micro);
  torch::Tensor x = at::randn({32, 32}, generator);
  return {x, torch::sin(x).sum(1, /*keepdim=*/true)};
}

int train(const Args& args) {
  if (!args.trace.empty()) setenv("RINGX_TRACE_DIR", args.trace.c_str(), 1);
  auto store = c10::make_intrusive<c10d::FileStore>(args.store, args.worldSize);
  auto group = ringx::c10d_glue::makeRingxProcessGroup(store, args.rank, args.worldSize,
                                                       std::chrono::milliseconds(60000));

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
  Args args = ringx::samples::parseRankArgs(argc, argv, "train_ddp_cpp", 30);
  if (args.rank < 0) return ringx::samples::launchRanks(args, argv[0], "train_ddp_cpp");
  try {
    return train(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", args.rank, e.what());
    return 1;
  }
}
