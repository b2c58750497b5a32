// Writes a synthetic ringx trace directory of a large data-parallel job, in the
// recorder's own binary format: one rank-<N>.ringx stream per rank and
// manifest.json, the same files a 1,024-rank job would leave.
//
//   bench_make_scale_trace --out DIR [--ranks 1024] [--events 100000000]
//                          [--ranks-per-host 8] [--seed 1]
//                          [--slow-host 3] [--slow-rank 517]
//
// Each rank runs training steps of a DDP-like model: a "step" span, forward /
// backward / optimizer on "ddp", operator spans on "compute", a span per
// gradient bucket on "ddp:bucket<K>" and its allreduce on "comm:world" (with
// the args the backend records: bytes, seq, group, algorithm, peers, ...), and
// an rss_bytes counter sample. Ranks' clocks are offset from rank 0's by up to
// ±50 ms, with clock sync records that undo it, so readers align as they do a
// real job's.
//
// Stragglers, for readers to find: every rank of host 3 computes 15% slower,
// and rank 517 (when there is one) 40% slower, so every allreduce waits for
// them and they arrive last (--slow-host and --slow-rank move them, so that a
// small job has its own; -1 turns one off). Everything else is deterministic
// jitter of ±5%.
//
// Ranks are written in parallel, one file per thread at a time; a 100M-event
// job takes a few GB and well under a minute on two cores.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "base/command_line.h"
#include "trace/format/codec.h"
#include "trace/read/trace_dir.h"
#include "trace/record/file_sink.h"
#include "trace/record/recorder.h"

namespace {

using namespace ringx::trace;

constexpr int kForwardOps = 12;
constexpr int kBackwardOps = 12;
constexpr int kBuckets = 4;
// Events per step: step + forward/backward/optimizer + ops + buckets + allreduces + counter.
constexpr int kEventsPerStep = 1 + 3 + kForwardOps + kBackwardOps + 2 * kBuckets + 1;

struct Job {
  int ranks = 1024;
  int ranksPerHost = 8;
  int64_t steps = 1;
  uint64_t seed = 1;
  int slowHost = 3;
  int slowRank = 517;
};

// A deterministic hash of (seed, a, b, c) in [0, 1).
double unit(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull ^ a * 0xBF58476D1CE4E5B9ull ^
               b * 0x94D049BB133111EBull ^ c * 0x2545F4914F6CDD1Dull;
  x ^= x >> 31;
  x *= 0xD6E8FEB86659FD39ull;
  x ^= x >> 28;
  return static_cast<double>(x >> 11) / static_cast<double>(1ull << 53);
}

double slowness(const Job& job, int rank) {
  double f = 1.0;
  if (rank / job.ranksPerHost == job.slowHost) f *= 1.15;
  if (rank == job.slowRank) f *= 1.40;
  return f;
}

// The slowest any rank can be: every collective ends after it arrives.
double slowest(const Job& job) {
  double f = 1.0;
  for (int r = 0; r < job.ranks; r += 1) f = std::max(f, slowness(job, r));
  return f * 1.05;
}

constexpr int64_t kOpNs[kForwardOps] = {310000, 60000, 40000, 480000, 20000, 30000,
                                        310000, 60000, 40000, 480000, 20000, 30000};
constexpr int64_t kBucketBytes = 25 << 20;
constexpr int64_t kWireNs = 900000;
constexpr int64_t kOptimizerNs = 400000;

class RankWriter {
 public:
  RankWriter(const Job& job, int rank) : job_(job), rank_(rank) {}

  void write(const std::string& path) {
    std::FILE* out = std::fopen(path.c_str(), "wb");
    if (out == nullptr) throw ringx::IoError("cannot write " + path);
    // The rank's steady clock runs offsetNs behind rank 0's.
    const int64_t offsetNs =
        rank_ == 0 ? 0 : static_cast<int64_t>((unit(job_.seed, 7, rank_, 0) - 0.5) * 1e8);
    const int64_t startNs = 1'000'000'000'000 - offsetNs;
    enc_.magic();
    StreamHeader header;
    header.rank = rank_;
    header.worldSize = job_.ranks;
    header.pid = 10000 + rank_;
    header.host = "node" + std::to_string(rank_ / job_.ranksPerHost);
    header.startSteadyNs = startNs;
    header.startWallNs = 1'790'000'000'000'000'000;
    enc_.header(header);
    defineStrings();
    enc_.clockSync(ClockSync{startNs, offsetNs, 2000});
    const double f = slowness(job_, rank_), fMax = slowest(job_);
    int64_t stepStart = 1'000'000'000'000 + 1'000'000;  // rank 0's clock
    int64_t seq = 0;
    for (int64_t step = 0; step < job_.steps; ++step) {
      auto local = [&](int64_t aligned) { return aligned - offsetNs; };
      auto jitter = [&](int64_t ns, int op) {
        return static_cast<int64_t>(ns * f * (0.95 + 0.1 * unit(job_.seed, rank_, step, op)));
      };
      int64_t t = stepStart;
      const int64_t forwardBegin = t;
      for (int i = 0; i < kForwardOps; ++i) {
        const int64_t d = jitter(kOpNs[i], i);
        span(Category::kUser, compute_, ops_[i % 6], local(t), local(t + d));
        t += d + 5000;
      }
      span(Category::kDdp, ddp_, forward_, local(forwardBegin), local(t), stepArg(step));
      const int64_t backwardBegin = t;
      // When the slowest rank's backward has bucket k ready (gaps are not slowed).
      auto worstReady = [&](int k) {
        int64_t ns = 0;
        for (int i = 0; i < kForwardOps; ++i) ns += kOpNs[i];
        for (int i = 0; i < 3 * (k + 1); ++i) ns += 2 * kOpNs[kBackwardOps - 1 - i];
        return stepStart + static_cast<int64_t>(fMax * ns) + (kForwardOps + 3 * (k + 1)) * 5000;
      };
      int64_t lastEnd = 0;
      for (int i = 0; i < kBackwardOps; ++i) {
        const int64_t d = jitter(kOpNs[kBackwardOps - 1 - i] * 2, 100 + i);
        span(Category::kUser, compute_, ops_[(kBackwardOps - 1 - i) % 6], local(t), local(t + d));
        t += d + 5000;
        if (i % 3 == 2) {  // a bucket is ready every third op
          const int k = i / 3;
          const int64_t ready = t;
          const int64_t wireEnd =
              std::max(std::max(ready, worstReady(k)), lastEnd) + kWireNs + 1000 * k;
          lastEnd = wireEnd;
          allreduce(local(ready), local(wireEnd), seq++, local(ready));
          bucket(k, local(ready - jitter(50000, 200 + k)), local(wireEnd + 20000), step,
                 local(ready), local(wireEnd), wireEnd - std::max(t, ready));
        }
      }
      span(Category::kDdp, ddp_, backward_, local(backwardBegin), local(t), stepArg(step));
      const int64_t optBegin = std::max(t, lastEnd + 20000);
      span(Category::kDdp, ddp_, optimizer_, local(optBegin), local(optBegin + kOptimizerNs),
           stepArg(step));
      const int64_t stepEnd = optBegin + kOptimizerNs;
      span(Category::kStep, steps_, stepName_, local(stepStart), local(stepEnd), stepArg(step));
      counter(local(stepEnd), 2.0e9 + 1.0e6 * (step % 64) + 4096.0 * rank_);
      // Steps start together on rank 0's clock: the slowest rank's step sets it.
      stepStart += static_cast<int64_t>(fMax * 7'500'000) + 2'000'000;
      if (enc_.bytes().size() > (4u << 20)) flush(out);
    }
    flush(out);
    if (std::fclose(out) != 0) throw ringx::IoError("cannot write " + path);
  }

 private:
  uint32_t id(const std::string& text) {
    enc_.string(++lastId_, text);
    return lastId_;
  }
  void defineStrings() {
    compute_ = id("compute");
    comm_ = id("comm:world");
    ddp_ = id("ddp");
    steps_ = id("steps");
    memory_ = id("memory");
    for (int k = 0; k < kBuckets; ++k) buckets_[k] = id("ddp:bucket" + std::to_string(k));
    const char* ops[6] = {"aten::linear", "aten::layer_norm",
                          "aten::gelu",   "aten::scaled_dot_product_attention",
                          "aten::add",    "aten::dropout"};
    for (int i = 0; i < 6; ++i) ops_[i] = id(ops[i]);
    forward_ = id("forward");
    backward_ = id("backward");
    optimizer_ = id("optimizer");
    stepName_ = id("step");
    bucketName_ = id("bucket");
    allreduce_ = id("allreduce");
    rss_ = id(counters::kRss);
    kStep_ = id(arg::kStep);
    kBytes_ = id(arg::kBytes);
    kSeq_ = id(arg::kSeq);
    kGroup_ = id(arg::kGroup);
    kGroupRank_ = id(arg::kGroupRank);
    kGroupSize_ = id(arg::kGroupSize);
    kDtype_ = id(arg::kDtype);
    kReduceOp_ = id(arg::kReduceOp);
    kAlgorithm_ = id(arg::kAlgorithm);
    kTransport_ = id(arg::kTransport);
    kPeers_ = id(arg::kPeers);
    kEnqueue_ = id(arg::kEnqueueNs);
    kBucket_ = id(arg::kBucket);
    kReady_ = id(arg::kReadyNs);
    kParams_ = id(arg::kParams);
    kLaunch_ = id(arg::kLaunchNs);
    kWireStart_ = id(arg::kWireStartNs);
    kWireEnd_ = id(arg::kWireEndNs);
    kExposed_ = id(arg::kExposedNs);
    world_ = id("world");
    float32_ = id("float32");
    sum_ = id("sum");
    ring_ = id("ring");
    tcp_ = id(rank_ % job_.ranksPerHost == 0 || rank_ % job_.ranksPerHost == job_.ranksPerHost - 1
                  ? "shm+tcp"
                  : "shm");
    peers_ = id(std::to_string((rank_ + job_.ranks - 1) % job_.ranks) + "," +
                std::to_string((rank_ + 1) % job_.ranks));
  }
  std::vector<Arg> stepArg(int64_t step) { return {intArg(kStep_, step)}; }
  void span(Category category, uint32_t track, uint32_t name, int64_t begin, int64_t end,
            const std::vector<Arg>& args = {}) {
    Event e;
    e.kind = EventKind::kSpan;
    e.category = category;
    e.rank = rank_;
    e.track = track;
    e.name = name;
    e.beginNs = begin;
    e.endNs = end;
    e.argCount = static_cast<uint32_t>(args.size());
    enc_.event(e, args.data());
  }
  void allreduce(int64_t begin, int64_t end, int64_t seq, int64_t enqueue) {
    span(Category::kCollective, comm_, allreduce_, begin, end,
         {intArg(kBytes_, kBucketBytes), intArg(kSeq_, seq), stringArg(kGroup_, world_),
          intArg(kGroupRank_, rank_), intArg(kGroupSize_, job_.ranks), stringArg(kDtype_, float32_),
          stringArg(kReduceOp_, sum_), stringArg(kAlgorithm_, ring_), stringArg(kTransport_, tcp_),
          stringArg(kPeers_, peers_), intArg(kEnqueue_, enqueue)});
  }
  void bucket(int k, int64_t begin, int64_t end, int64_t step, int64_t ready, int64_t wireEnd,
              int64_t exposed) {
    span(Category::kDdp, buckets_[k], bucketName_, begin, end,
         {intArg(kBucket_, k), intArg(kStep_, step), intArg(kBytes_, kBucketBytes),
          intArg(kParams_, 40), intArg(kReady_, ready), intArg(kLaunch_, ready),
          intArg(kWireStart_, ready), intArg(kWireEnd_, wireEnd),
          intArg(kExposed_, std::max<int64_t>(exposed, 0))});
  }
  void counter(int64_t at, double value) {
    Event e;
    e.kind = EventKind::kCounter;
    e.category = Category::kMemory;
    e.rank = rank_;
    e.track = memory_;
    e.name = rss_;
    e.beginNs = e.endNs = at;
    e.value = value;
    enc_.event(e, nullptr);
  }
  void flush(std::FILE* out) {
    const std::string& bytes = enc_.bytes();
    if (std::fwrite(bytes.data(), 1, bytes.size(), out) != bytes.size())
      throw ringx::IoError("short write");
    enc_.clear();
  }

  const Job& job_;
  const int rank_;
  Encoder enc_;
  uint32_t lastId_ = 0;
  uint32_t compute_ = 0, comm_ = 0, ddp_ = 0, steps_ = 0, memory_ = 0, buckets_[kBuckets] = {},
           ops_[6] = {}, forward_ = 0, backward_ = 0, optimizer_ = 0, stepName_ = 0,
           bucketName_ = 0, allreduce_ = 0, rss_ = 0, kStep_ = 0, kBytes_ = 0, kSeq_ = 0,
           kGroup_ = 0, kGroupRank_ = 0, kGroupSize_ = 0, kDtype_ = 0, kReduceOp_ = 0,
           kAlgorithm_ = 0, kTransport_ = 0, kPeers_ = 0, kEnqueue_ = 0, kBucket_ = 0, kReady_ = 0,
           kParams_ = 0, kLaunch_ = 0, kWireStart_ = 0, kWireEnd_ = 0, kExposed_ = 0, world_ = 0,
           float32_ = 0, sum_ = 0, ring_ = 0, tcp_ = 0, peers_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Writes a synthetic ringx trace directory of a large DDP job.",
               "bench_make_scale_trace");
  ringx::cli::useConventions(app);
  std::string out;
  Job job;
  int64_t events = 100'000'000;
  app.add_option("--out", out, "the trace directory to write")->required();
  app.add_option("--ranks", job.ranks, "ranks of the job")->check(CLI::Range(1, 1 << 20));
  app.add_option("--events", events, "events in all (rounded to whole steps per rank)")
      ->check(CLI::PositiveNumber);
  app.add_option("--ranks-per-host", job.ranksPerHost, "ranks per host")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--seed", job.seed, "jitter seed");
  app.add_option("--slow-host", job.slowHost, "the host whose ranks compute 15% slower (-1: none)")
      ->capture_default_str();
  app.add_option("--slow-rank", job.slowRank, "the rank that computes 40% slower (-1: none)")
      ->capture_default_str();
  if (const int status = ringx::cli::parse(app, argc, argv); status >= 0) return status;
  job.steps = std::max<int64_t>(1, events / job.ranks / kEventsPerStep);
  std::filesystem::create_directories(out);
  Manifest manifest;
  manifest.worldSize = job.ranks;
  manifest.startWallNs = 1'790'000'000'000'000'000;
  for (int r = 0; r < job.ranks; ++r)
    manifest.ranks.push_back(ManifestRank{r, "node" + std::to_string(r / job.ranksPerHost),
                                          10000 + r, "rank-" + std::to_string(r) + ".ringx"});
  std::atomic<int> next{0};
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  const unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned w = 0; w < workers; ++w)
    threads.emplace_back([&] {
      for (int r = next++; r < job.ranks && !failed; r = next++) {
        try {
          RankWriter(job, r).write(rankFileName(out, r));
        } catch (const std::exception& e) {
          std::fprintf(stderr, "bench_make_scale_trace: %s\n", e.what());
          failed = true;
        }
      }
    });
  for (auto& t : threads) t.join();
  if (failed) return 1;
  writeManifest(out, manifest);
  std::printf("wrote %s: %d ranks on %d hosts, %lld steps, %lld events\n", out.c_str(), job.ranks,
              (job.ranks + job.ranksPerHost - 1) / job.ranksPerHost,
              static_cast<long long>(job.steps),
              static_cast<long long>(job.steps * kEventsPerStep * job.ranks));
  return 0;
}
