// A torch DDP job's profiler files, made by hand with known answers (the analyses' and the
// viewer's tests of analysis/profiler_ddp.h): two ranks, two layers, two buckets, gloo's or
// ringx's scopes of the allreduces on a CPU job; on a GPU job (GpuRank) the same step on the
// device, the allreduces NCCL kernels.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "trace/model/chrome_ingest.h"
#include "trace/model/trace_store.h"

namespace ringx::testing {

// Two layers of a 256x256 weight and a 256 bias (float): readiness bias1, w1, bias0, w0; two
// buckets of 65792 floats (the bias and weight of a layer each).
inline constexpr int64_t kWeight = 256 * 256, kBias = 256, kBucket = kWeight + kBias;

// One rank's CPU profiler file (microseconds, as Kineto writes them): the main thread (tid 1),
// gloo's worker (tid 2).
class CpuRank {
 public:
  CpuRank(int rank, bool shapes = true, bool gloo = true)
      : rank_(rank), shapes_(shapes), gloo_(gloo) {}
  void op(const char* cat, const std::string& name, int tid, int64_t ts, int64_t dur,
          const std::string& dims = "", const char* type = "float") {
    std::string args;
    if (shapes_ && !dims.empty()) {
      args = strCat(R"(,"args":{"Input Dims":)", dims, R"(,"Input type":[")", type, R"("]})");
    }
    events_ += strCat(R"(,{"ph":"X","cat":")", cat, R"(","name":")", name, R"(","pid":1,"tid":)",
                      tid, R"(,"ts":)", ts, R"(,"dur":)", dur, args, "}");
  }
  // Any other event, whole (a GPU job's launches and kernels).
  void raw(const std::string& event) { events_ += "," + event; }
  // Step n from t: forward [t+100, t+2100); backward's nodes from t+2200 to t+4700, the
  // gradients ready at t+2340, t+3340 (bucket 0 launched at t+3400, on the wire
  // [t+3460, t+3460+wire0)), t+3600, t+4600 (bucket 1 at t+4620, wire [t+4660, t+5660)); the
  // copies back from t+5700 to t+5900, the optimizer [t+6000, t+7000).
  void step(int n, int64_t t, int64_t wire0 = 1000) {
    op("user_annotation", strCat("ProfilerStep#", n), 1, t, 9000);
    op("user_annotation", "DistributedDataParallel.forward", 1, t + 100, 2000);
    op("cpu_op", "autograd::engine::evaluate_function: MseLossBackward0", 1, t + 2200, 100);
    const int64_t ready[] = {2340, 3340, 3600, 4600};
    const int64_t sizes[] = {kBias, kWeight, kBias, kWeight};
    for (int k = 0; k < 4; ++k) {
      const int64_t end = t + ready[k];
      const int64_t begin = k % 2 == 0 ? end - 40 : end - 900;
      op("cpu_op", "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 1,
         begin - 5,
         end - begin +
             (k == 1   ? 120
              : k == 3 ? 105
                       : 10));
      op("cpu_op", "torch::autograd::AccumulateGrad", 1, begin, end - begin,
         sizes[k] == kBias ? "[[256]]" : "[[256, 256]]");
    }
    const std::string flat = strCat("[[[", kBucket, "]], [], []]");
    op("cpu_op", "c10d::allreduce_", 1, t + 3400, 50, flat);
    wire(t + 3400, t + 3460, wire0);
    op("cpu_op", "c10d::allreduce_", 1, t + 4620, 30, flat);
    wire(t + 4620, t + 4660, 1000);
    const char* copy = "torch.distributed.ddp.reducer::copy_bucket_to_grad";
    op("cpu_op", copy, 1, t + 5700, 10, "[[256]]");
    op("cpu_op", copy, 1, t + 5710, 90, "[[256, 256]]");
    op("cpu_op", copy, 1, t + 5800, 10, "[[256]]");
    op("cpu_op", copy, 1, t + 5810, 90, "[[256, 256]]");
    op("user_annotation", "Optimizer.step#SGD.step", 1, t + 6000, 1000);
  }
  // The backend's scope of an allreduce: gloo's on its worker with the tensor's dims; ringx's
  // on the main thread without them, from inside the c10d op (as ringx issues it) to completion.
  void wire(int64_t issue, int64_t ts, int64_t dur) {
    if (gloo_) {
      op("user_annotation", "gloo:all_reduce", 2, ts, dur, strCat("[[", kBucket, "]]"));
    } else {
      op("user_annotation", "ringx:all_reduce", 1, issue + 5, ts + dur - issue - 5);
    }
  }
  // `gpu`: the file has a GPU (pid 0) too, and the job's backend is NCCL.
  std::string json(bool gpu = false) const {
    return strCat(
        R"({"schemaVersion":1,"distributedInfo":{"backend":")", gpu ? "nccl" : "gloo",
        R"(","rank":)", rank_, R"(,"world_size":2},"traceEvents":[)",
        R"({"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"python"}})",
        gpu ? R"(,{"name":"process_labels","ph":"M","pid":0,"tid":0,"args":{"labels":"GPU 0"}})"
            : "",
        events_, "]}");
  }

 private:
  int rank_;
  bool shapes_, gloo_;
  std::string events_;
};

// One rank's GPU profiler file: the main thread (tid 1) and the autograd thread (tid 2) launch
// kernels (cudaLaunchKernel, tied by correlation) onto the compute stream (7), the allreduces'
// NCCL kernels run on stream 20.
class GpuRank {
 public:
  explicit GpuRank(int rank, bool shapes = true) : cpu_(rank, shapes) {}
  // Step n: the host from t (CPU times as CpuRank's, a little ahead of the device), the device
  // from d: forward's kernels [d+200, d+2200); backward's from there: the loss's kernel,
  // then per gradient its kernels and the Reducer's copy into the bucket, ready at d+2340,
  // d+3340 (bucket 0's NCCL kernel from there, 1000 us after the last rank arrived), d+3600,
  // d+4600 (bucket 1's); the copies back, each after its bucket's kernel, 100 us a bucket; the
  // optimizer's kernels for 1000 us from bucket 1's end plus its copies (d+5700 on the last rank
  // to arrive; `skew`: how much later the other rank arrives at each allreduce). The host's step
  // is 9 ms, or (`syncUntil`) it synchronises with the stream from t+1400 until then (a
  // loss.item(): the device sets the step) and ends 3 us later.
  void step(int n, int64_t t, int64_t d, int64_t skew, int64_t syncUntil = 0) {
    cpu_.op("user_annotation", strCat("ProfilerStep#", n), 1, t,
            syncUntil > 0 ? syncUntil + 3 - t : 9000);
    cpu_.op("user_annotation", "DistributedDataParallel.forward", 1, t + 100, 600);
    launch(1, t + 110, d + 200, 1000, "volta_sgemm");
    launch(1, t + 300, d + 1200, 1000, "volta_sgemm");
    node(t + 720, 20, "MseLossBackward0");
    launch(2, t + 725, d + 2200, 100, "mse_backward");
    const int64_t ready[] = {2340, 3340, 3600, 4600};
    const int64_t sizes[] = {kBias, kWeight, kBias, kWeight};
    int64_t device = d + 2300, host = t + 760;
    for (int k = 0; k < 4; ++k) {
      // The gradient's own kernel (a gemm or a sum), then the Reducer's copy into the bucket (40
      // us), both launched inside its AccumulateGrad's node (the hook runs there).
      // A bucket's last gradient's hook launches its allreduce, inside the node too.
      const bool last = k % 2 == 1;
      node(host, last ? 70 : 30, "torch::autograd::AccumulateGrad");
      cpu_.op("cpu_op", "torch::autograd::AccumulateGrad", 2, host + 2, 10,
              sizes[k] == kBias ? "[[256]]" : "[[256, 256]]");
      const int64_t own = d + ready[k] - 40 - device;
      launch(2, host + 14, device, own, "gemm");
      launch(2, host + 20, device + own, 40, "mul_kernel");
      device = d + ready[k];
      if (last) {
        cpu_.op("cpu_op", "c10d::allreduce_", 2, host + 35, 20,
                strCat("[[[", kBucket, "]], [], []]"));
        nccl(host + 40, device, device + skew + 1000);
      }
      host += last ? 80 : 40;
    }
    // Finalize: per bucket, work.wait() then its copies back, after the bucket's kernel.
    const int64_t ends[] = {d + 3340 + skew + 1000, d + 4600 + skew + 1000};
    device = d + 4600;
    const char* copy = "torch.distributed.ddp.reducer::copy_bucket_to_grad";
    for (int b = 0; b < 2; ++b) {
      device = std::max(device, ends[b]);
      call(2, host - 2, "cudaStreamWaitEvent", 1);  // work.wait()
      cpu_.op("cpu_op", copy, 2, host, 6, "[[256]]");
      launch(2, host + 2, device, 10, "copy_kernel");
      cpu_.op("cpu_op", copy, 2, host + 10, 6, "[[256, 256]]");
      launch(2, host + 12, device + 10, 90, "copy_kernel");
      device += 100;
      host += 20;
    }
    cpu_.op("user_annotation", "Optimizer.step#SGD.step", 1, t + 1100, 200);
    launch(1, t + 1110, device, 1000, "sgd_kernel");
    if (syncUntil > 0) call(1, t + 1400, "cudaStreamSynchronize", syncUntil - t - 1400);
  }
  std::string json() const { return cpu_.json(/*gpu=*/true); }

 private:
  void node(int64_t ts, int64_t dur, const char* name) {
    cpu_.op("cpu_op", strCat("autograd::engine::evaluate_function: ", name), 2, ts, dur);
  }
  void launch(int tid, int64_t ts, int64_t kts, int64_t kdur, const char* name) {
    call(tid, ts, "cudaLaunchKernel");
    kernel(name, 7, kts, kdur, "");
  }
  // c10d's NCCL path: the NCCL stream waits on the current one, the kernel, the work's event.
  void nccl(int64_t ts, int64_t kts, int64_t kend) {
    call(2, ts - 3, "cudaEventRecord", 1);
    call(2, ts - 2, "cudaStreamWaitEvent", 1);
    call(2, ts, "cudaLaunchKernelExC");
    kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 20, kts, kend - kts,
           strCat(R"(,"Collective name":"allreduce","Process Group Name":"0","Group size":2,)",
                  R"("In msg nelems":)", kBucket, R"(,"Out msg nelems":)", kBucket,
                  R"(,"dtype":"Float")"));
    call(2, ts + 4, "cudaEventRecord", 1);
  }
  void call(int tid, int64_t ts, const char* name, int64_t dur = 4) {
    cpu_.raw(strCat(R"({"ph":"X","cat":"cuda_runtime","name":")", name, R"(","pid":1,"tid":)", tid,
                    R"(,"ts":)", ts, R"(,"dur":)", dur, R"(,"args":{"correlation":)",
                    ++correlation_, "}}"));
  }
  void kernel(const char* name, int stream, int64_t ts, int64_t dur, const std::string& args) {
    cpu_.raw(strCat(R"({"ph":"X","cat":"kernel","name":")", name, R"(","pid":0,"tid":)", stream,
                    R"(,"ts":)", ts, R"(,"dur":)", dur, R"(,"args":{"stream":)", stream,
                    R"(,"correlation":)", correlation_, args, "}}"));
  }
  CpuRank cpu_;
  int64_t correlation_ = 0;
};

inline model::TraceStore storeOf(const std::vector<CpuRank>& ranks) {
  model::TraceStore store;
  for (size_t r = 0; r < ranks.size(); ++r) {
    model::ingestChromeTraceText(store, ranks[r].json(), strCat("rank", r, ".json"));
  }
  return store;
}

inline model::TraceStore storeOf(const std::vector<GpuRank>& ranks) {
  model::TraceStore store;
  for (size_t r = 0; r < ranks.size(); ++r) {
    model::ingestChromeTraceText(store, ranks[r].json(), strCat("rank", r, ".json"));
  }
  return store;
}

// Steps 1..3, the device 400 us behind the host; rank 1 starts each 5 us later (the last to
// arrive at every allreduce). The host sets the step (9 ms a step, the device done by 6.7 ms),
// or with `sync` the device does: each step's host waits for the device's work (done 6705 us
// after rank 0's host began the step) and begins the next 5 us later, 7110 us a step.
inline std::vector<GpuRank> profiledGpuDdpJob(bool shapes = true, bool sync = false) {
  std::vector<GpuRank> ranks;
  const int64_t period = sync ? 7110 : 9000;
  for (int r = 0; r < 2; ++r) {
    GpuRank& k = ranks.emplace_back(r, shapes);
    for (int n = 1; n <= 3; ++n) {
      const int64_t first = 1'000'000 + (n - 1) * period, t = first + r * 5;
      k.step(n, t, t + 400, r == 0 ? 5 : 0, sync ? first + 400 + 6705 + 2 : 0);
    }
  }
  return ranks;
}

// Steps 1..3, 9 ms apart; rank 1 starts each 5 us later.
inline std::vector<CpuRank> profiledDdpJob(bool shapes = true, bool gloo = true) {
  std::vector<CpuRank> ranks;
  for (int r = 0; r < 2; ++r) {
    CpuRank& k = ranks.emplace_back(r, shapes, gloo);
    for (int n = 1; n <= 3; ++n) k.step(n, 1'000'000 + (n - 1) * 9000 + r * 5);
  }
  return ranks;
}

}  // namespace ringx::testing
