// Fully sharded training from C++ alone: libtorch + ringx::fsdp over backend ringx.
//
//   build/bin/train_fsdp_cpp --world-size 2 [--steps 20] [--trace DIR]
//
// Without --rank the program starts --world-size copies of itself (rank_launcher.h).
// The model is a small transformer-like stack: an input projection and a head
// (the root unit) around four residual MLP blocks, each its own unit
// (ringx::fsdp::Sharded). Every rank keeps 1/world of every unit; forward and
// backward gather one block at a time (prefetching the next), and gradients are
// reduce-scattered into the shards. Rank 0 also trains an unsharded copy on all
// ranks' batches together and checks that the full state dict matches it.
// Exit status 0 means training ran and matched single-process training.
#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "backend/c10d/process_group_ringx.h"
#include "backend/group/trace_session.h"
#include "fsdp/fully_sharded_data_parallel.h"
#include "samples/cpp/rank_launcher.h"
#include "trace/record/recorder.h"

namespace {

using Args = ringx::samples::RankArgs;
constexpr int64_t kDim = 64;
constexpr int kBlocks = 4;
constexpr int64_t kBatch = 8;  // per rank

struct BlockImpl : torch::nn::Module {
  BlockImpl()
      : norm(register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({kDim})))),
        up(register_module("up", torch::nn::Linear(kDim, 2 * kDim))),
        down(register_module("down", torch::nn::Linear(2 * kDim, kDim))) {}
  torch::Tensor forward(torch::Tensor x) { return x + down(torch::gelu(up(norm(x)))); }
  torch::nn::LayerNorm norm;
  torch::nn::Linear up, down;
};
TORCH_MODULE(Block);

// `shardBlocks`: each block a ringx::fsdp unit (else a plain model, the reference).
struct NetImpl : torch::nn::Module {
  explicit NetImpl(bool shardBlocks) {
    embed = register_module("embed", torch::nn::Linear(16, kDim));
    for (int i = 0; i < kBlocks; ++i) {
      const std::string name = "block" + std::to_string(i);
      if (shardBlocks) {
        sharded.push_back(register_module(name, ringx::fsdp::Sharded(Block())));
      } else {
        plain.push_back(register_module(name, Block()));
      }
    }
    head = register_module("head", torch::nn::Linear(kDim, 1));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = embed(x);
    for (auto& b : sharded) x = b->forward(x);
    for (auto& b : plain) x = b(x);
    return head(x);
  }
  torch::nn::Linear embed{nullptr}, head{nullptr};
  std::vector<std::shared_ptr<ringx::fsdp::ShardedImpl<Block>>> sharded;
  std::vector<Block> plain;
};
TORCH_MODULE(Net);

std::pair<torch::Tensor, torch::Tensor> batch(int rank, int step) {
  auto generator = at::detail::createCPUGenerator(1000 * step + rank);
  torch::Tensor x = at::randn({kBatch, 16}, generator);
  return {x, torch::sin(x).sum(1, /*keepdim=*/true)};
}

int train(const Args& args) {
  if (!args.trace.empty()) setenv("RINGX_TRACE_DIR", args.trace.c_str(), 1);
  auto store = c10::make_intrusive<c10d::FileStore>(args.store, args.worldSize);
  auto group = ringx::c10d_glue::makeRingxProcessGroup(store, args.rank, args.worldSize,
                                                       std::chrono::milliseconds(60000));

  torch::manual_seed(args.rank);  // different weights everywhere: sync_module_states fixes that
  ringx::fsdp::FullyShardedDataParallel<Net> fsdp(Net(true), group,
                                                  ringx::fsdp::Options().sync_module_states(true));
  torch::optim::SGD optimizer(fsdp.parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));

  // Rank 0's reference: rank 0's initial weights, trained on every rank's batch at once.
  torch::manual_seed(0);
  Net reference(false);
  torch::optim::SGD referenceOptimizer(reference->parameters(),
                                       torch::optim::SGDOptions(0.01).momentum(0.9));

  for (int step = 0; step < args.steps; ++step) {
    ringx::trace::markStep(step);
    optimizer.zero_grad();
    auto [x, y] = batch(args.rank, step);
    torch::Tensor loss = torch::mse_loss(fsdp.forward(x), y);
    loss.backward();
    optimizer.step();
    if (args.rank == 0) {
      std::vector<torch::Tensor> xs, ys;
      for (int r = 0; r < args.worldSize; ++r) {
        auto [rx, ry] = batch(r, step);
        xs.push_back(rx);
        ys.push_back(ry);
      }
      referenceOptimizer.zero_grad();
      torch::mse_loss(reference->forward(torch::cat(xs)), torch::cat(ys)).backward();
      referenceOptimizer.step();
      if (step % 5 == 0 || step == args.steps - 1) {
        std::printf("step %3d  loss %.4f\n", step, loss.item<float>());
        std::fflush(stdout);
      }
    }
  }

  const ringx::fsdp::NamedTensors state = fsdp.stateDict();  // collective: every rank
  const ringx::fsdp::MemoryCounters memory = fsdp.memory();
  int status = 0;
  if (args.rank == 0) {
    std::map<std::string, torch::Tensor> expected;
    for (const auto& item : reference->named_parameters()) expected[item.key()] = item.value();
    double worst = 0;
    for (const auto& [name, value] : state) {
      auto it = expected.find(name);
      if (it == expected.end()) continue;  // buffers (this model has none)
      const double error =
          ((value - it->second).norm() / it->second.norm().clamp_min(1e-12)).item<double>();
      worst = std::isfinite(error) ? std::max(worst, error) : INFINITY;
    }
    const bool match = state.size() == expected.size() && worst < 1e-5;
    std::printf(
        "%zu units, %zu tensors in the full state dict; max relative error vs "
        "single-process training %.2e: %s\n",
        fsdp.engine().units().size(), state.size(), worst, match ? "match" : "MISMATCH");
    status = match ? 0 : 1;
  }
  std::printf("rank %d: shards %.1f KiB, peak held %.1f KiB (parameters + gathers + gradients)\n",
              args.rank, memory.shardedBytes / 1024.0, memory.peakBytes / 1024.0);
  ringx::TraceSession::stop();
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  Args args = ringx::samples::parseRankArgs(argc, argv, "train_fsdp_cpp", 20);
  if (args.rank < 0) return ringx::samples::launchRanks(args, argv[0], "train_fsdp_cpp");
  try {
    return train(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", args.rank, e.what());
    return 1;
  }
}
