// What a job of N ranks costs each rank, for N up to a thousand, on one machine and without
// torch: set-up time, connections, file descriptors and memory per rank, and the latency of
// small and medium allreduce, small broadcast and barrier, next to log2(N) and N; and the same
// allreduces in their hierarchical form (hierarchical_allreduce.cc) beside the flat ones.
//
//   bench_scale_cost [N,N,...] [--iters K] [--ranks-per-process R] [--ranks-per-host H]
//
// Ranks run as threads, R to a process (default 256: a process may hold 20000 file
// descriptors here, and a rank holds a few dozen), the processes forked from this one and
// meeting through a directory store (tests/cpp/process_ranks.h). Connections are TCP over
// loopback: shared memory would reserve 2 x 4 MiB per pair and measure /dev/shm, not ringx.
// File descriptors and memory are per process, so the table shows each process's growth over
// its start (what its ranks added) divided by its ranks. "setup" runs from the fork to the
// end of the first 4 KiB allreduce on the slowest rank, as the issue measured it for gloo.
// Latencies are per call on the slowest rank, K calls back to back (K/4 for 256 KiB).
//
// Hosts are faked (GroupOptions::fakeHosts): H consecutive ranks per "host" (default 8). The
// columns without "hier" run the flat algorithms (RINGX_HIERARCHICAL is ignored), the "hier"
// ones the hierarchical allreduce over those hosts, in the same processes right after; peers,
// fds, memory and threads are taken before the hierarchical calls, so they are the flat
// algorithms' alone. Every "host" is still this machine: the hierarchical form's gain here is
// fewer steps, not the shared memory within a host nor the links between hosts.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backend/group/group.h"
#include "base/command_line.h"
#include "tests/cpp/process_ranks.h"

namespace {

using ringx::DataType;
using ringx::Group;
using ringx::ReduceOp;
using ringx::algorithms::Collective;
using ringx::algorithms::CollectiveKind;
using Clock = std::chrono::steady_clock;

int openFds() {
  int count = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
    ++count;
  return count;
}

long residentKiB() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * (::sysconf(_SC_PAGESIZE) / 1024);
}

double microsSince(Clock::time_point start, int iterations) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / iterations;
}

// What one process measured, as one line of its report file.
struct Report {
  double setupSeconds = 0;  // slowest rank of the process
  double fdsPerRank = 0;
  double kibPerRank = 0;
  double peersPerRank = 0;
  int threadsPerRank = 0;
  // Microseconds per call on the slowest rank (calls run back to back, K per collective).
  double allreduceSmall = 0, allreduceMedium = 0, broadcast = 0, barrier = 0;
  // The same allreduces in their hierarchical form.
  double hierarchicalSmall = 0, hierarchicalMedium = 0;
};

void barrier(Group& group) {
  group.run(CollectiveKind::kBarrier, DataType::kUInt8, ReduceOp::kSum, -1, {},
            [&](Collective& c) { ringx::algorithms::barrier(c, group.tuning()); });
}

// One allreduce of `data` with `tuning` (the group's, or its hierarchical twin).
void allreduce(Group& group, std::vector<float>& data, const ringx::algorithms::Tuning& tuning) {
  group.run(CollectiveKind::kAllreduce, DataType::kFloat32, ReduceOp::kSum, -1, {},
            [&](Collective& c) {
              ringx::algorithms::allreduce(c, data.data(), data.size(), DataType::kFloat32,
                                           ReduceOp::kSum, tuning);
            });
}

void runRank(Group& group, int iterations, Report* report, std::mutex* mutex) {
  auto run = [&](CollectiveKind kind, int root, const std::function<void(Collective&)>& body) {
    group.run(kind, DataType::kFloat32, ReduceOp::kSum, root, {}, body);
  };
  auto barrier = [&] { ::barrier(group); };
  std::vector<float> small(1024, 1.0f), medium(64 * 1024, 1.0f);
  auto allreduce = [&](std::vector<float>& data) { ::allreduce(group, data, group.tuning()); };
  barrier();
  auto start = Clock::now();
  for (int i = 0; i < iterations; ++i) allreduce(small);
  const double allreduceSmall = microsSince(start, iterations);
  barrier();
  const int mediumIterations = std::max(1, iterations / 4);
  start = Clock::now();
  for (int i = 0; i < mediumIterations; ++i) allreduce(medium);
  const double allreduceMedium = microsSince(start, mediumIterations);
  barrier();
  start = Clock::now();
  for (int i = 0; i < iterations; ++i) {
    run(CollectiveKind::kBroadcast, 0, [&](Collective& c) {
      ringx::algorithms::broadcast(c, small.data(), small.size() * sizeof(float), 0,
                                   group.tuning());
    });
  }
  const double broadcast = microsSince(start, iterations);
  barrier();
  start = Clock::now();
  for (int i = 0; i < iterations; ++i) barrier();
  const double barrierTime = microsSince(start, iterations);
  std::lock_guard<std::mutex> lock(*mutex);
  report->peersPerRank += static_cast<double>(group.collectivePeers().size());
  report->allreduceSmall = std::max(report->allreduceSmall, allreduceSmall);
  report->allreduceMedium = std::max(report->allreduceMedium, allreduceMedium);
  report->broadcast = std::max(report->broadcast, broadcast);
  report->barrier = std::max(report->barrier, barrierTime);
}

// The 4 KiB and 256 KiB allreduces again in their hierarchical form, each after one untimed
// call that makes its connections.
void runRankHierarchical(Group& group, int iterations, Report* report, std::mutex* mutex) {
  ringx::algorithms::Tuning tuning = group.tuning();
  tuning.hierarchical = ringx::algorithms::Tuning::Hierarchy::kOn;
  std::vector<float> small(1024, 1.0f), medium(64 * 1024, 1.0f);
  allreduce(group, small, tuning);
  allreduce(group, medium, tuning);
  barrier(group);
  auto start = Clock::now();
  for (int i = 0; i < iterations; ++i) allreduce(group, small, tuning);
  const double hierarchicalSmall = microsSince(start, iterations);
  barrier(group);
  const int mediumIterations = std::max(1, iterations / 4);
  start = Clock::now();
  for (int i = 0; i < mediumIterations; ++i) allreduce(group, medium, tuning);
  const double hierarchicalMedium = microsSince(start, mediumIterations);
  std::lock_guard<std::mutex> lock(*mutex);
  report->hierarchicalSmall = std::max(report->hierarchicalSmall, hierarchicalSmall);
  report->hierarchicalMedium = std::max(report->hierarchicalMedium, hierarchicalMedium);
}

// One process: ranks [first, last) as threads.
Report runProcess(int size, int first, int last, int iterations, int ranksPerHost,
                  Clock::time_point start, std::shared_ptr<ringx::Store> store) {
  const int fdsBefore = openFds();
  const long kibBefore = residentKiB();
  const int ranks = last - first;
  Report report;
  std::mutex mutex;
  std::atomic<int> measured{0};
  std::atomic<int> threadsAtPeak{0};
  std::vector<std::thread> threads;
  std::vector<std::string> errors(ranks);
  int fdsAfter = 0;
  long kibAfter = 0;
  for (int rank = first; rank < last; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        ringx::GroupOptions options;
        options.rank = rank;
        options.size = size;
        options.store = store;
        options.timeout = std::chrono::seconds(600);
        options.mesh.sharedMemory = false;
        options.flightRecorderEntries = 0;
        options.tuning = ringx::tuningFromEnvironment();
        options.tuning.hierarchical = ringx::algorithms::Tuning::Hierarchy::kOff;
        for (int r = 0; r < size; ++r) options.fakeHosts.push_back(r / ranksPerHost);
        Group group(options);
        std::vector<float> first(1024, 1.0f);
        group.run(CollectiveKind::kAllreduce, DataType::kFloat32, ReduceOp::kSum, -1, {},
                  [&](Collective& c) {
                    ringx::algorithms::allreduce(c, first.data(), first.size(), DataType::kFloat32,
                                                 ReduceOp::kSum, group.tuning());
                  });
        const double setup = std::chrono::duration<double>(Clock::now() - start).count();
        {
          std::lock_guard<std::mutex> lock(mutex);
          report.setupSeconds = std::max(report.setupSeconds, setup);
        }
        runRank(group, iterations, &report, &mutex);
        // Everyone of this process measured: the process is at its peak now.
        if (++measured == ranks) {
          std::lock_guard<std::mutex> lock(mutex);
          fdsAfter = openFds();
          kibAfter = residentKiB();
          int threadCount = 0;
          for ([[maybe_unused]] const auto& e :
               std::filesystem::directory_iterator("/proc/self/task"))
            ++threadCount;
          threadsAtPeak = threadCount;
        }
        while (measured < ranks) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        runRankHierarchical(group, iterations, &report, &mutex);
        // Leave together: a rank that destroys its group while a peer still connects to it
        // would fail that peer.
        group.run(CollectiveKind::kBarrier, DataType::kUInt8, ReduceOp::kSum, -1, {},
                  [&](Collective& c) { ringx::algorithms::barrier(c, group.tuning()); });
      } catch (const std::exception& e) {
        errors[rank - first] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) {
    if (!e.empty()) throw std::runtime_error(e);
  }
  report.fdsPerRank = static_cast<double>(fdsAfter - fdsBefore) / ranks;
  report.kibPerRank = static_cast<double>(kibAfter - kibBefore) / ranks;
  report.threadsPerRank = static_cast<int>(std::lround(static_cast<double>(threadsAtPeak) / ranks));
  return report;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes = {16, 64, 256};
  int iterations = 20;
  int ranksPerProcess = 256;
  int ranksPerHost = 8;
  CLI::App app{
      "What a job of N ranks costs each rank: set-up, connections, descriptors, memory "
      "and collective latency (allreduce flat and hierarchical over faked hosts), ranks as "
      "threads of forked processes.",
      "bench_scale_cost"};
  ringx::cli::useConventions(app);
  app.add_option("N", sizes, "world sizes (comma-separated)")
      ->delimiter(',')
      ->check(CLI::Range(2, 100000))
      ->capture_default_str();
  app.add_option("--iters", iterations, "timed calls per collective (a quarter for 256 KiB)")
      ->check(CLI::Range(4, 1000000))
      ->capture_default_str();
  app.add_option("--ranks-per-process", ranksPerProcess, "ranks (threads) per forked process")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--ranks-per-host", ranksPerHost,
                 "consecutive ranks per faked host, for the hierarchical allreduce")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  if (const int status = ringx::cli::parse(app, argc, argv); status >= 0) return status;
  struct rlimit files;
  ::getrlimit(RLIMIT_NOFILE, &files);
  files.rlim_cur = files.rlim_max;  // as many descriptors as this process may have
  ::setrlimit(RLIMIT_NOFILE, &files);
  std::printf(
      "ranks as threads, %d per process (processes forked from this one), TCP loopback; "
      "fd limit per process %llu; %u cores\n",
      ranksPerProcess, static_cast<unsigned long long>(files.rlim_cur),
      std::thread::hardware_concurrency());
  std::printf(
      "fds, memory and threads: each process's growth over its start, per rank; "
      "latencies: us per call on the slowest rank; hier: hierarchical allreduce, %d ranks per "
      "faked host\n\n",
      ranksPerHost);
  std::printf("%6s %5s %6s %8s %7s %7s %9s %8s %11s %12s %10s %10s %12s %14s\n", "N", "procs",
              "log2N", "setup_s", "peers", "fds", "rss_KiB", "threads", "ar_4KiB_us",
              "ar_256KiB_us", "bc_4KiB_us", "barrier_us", "hier_4KiB_us", "hier_256KiB_us");
  for (int size : sizes) {
    char pattern[] = "/tmp/ringx-scale-XXXXXX";
    const std::string dir = ::mkdtemp(pattern);
    const int processes = (size + ranksPerProcess - 1) / ranksPerProcess;
    std::fflush(stdout);  // or the children print it again
    const auto start = Clock::now();
    std::vector<pid_t> children;
    for (int p = 0; p < processes; ++p) {
      const int first = p * ranksPerProcess, last = std::min(size, first + ranksPerProcess);
      pid_t pid = ::fork();
      if (pid == 0) {
        std::ofstream out(dir + "/report-" + std::to_string(p));
        try {
          auto store = std::make_shared<ringx::testing::DirectoryStore>(dir);
          const Report r = runProcess(size, first, last, iterations, ranksPerHost, start, store);
          out << "ok " << r.setupSeconds << " " << r.fdsPerRank << " " << r.kibPerRank << " "
              << r.peersPerRank << " " << r.threadsPerRank << " " << r.allreduceSmall << " "
              << r.allreduceMedium << " " << r.broadcast << " " << r.barrier << " "
              << r.hierarchicalSmall << " " << r.hierarchicalMedium << "\n";
        } catch (const std::exception& e) {
          out << "error " << e.what() << "\n";
        }
        out.close();
        std::fflush(nullptr);
        ::_exit(0);
      }
      children.push_back(pid);
    }
    Report total;
    double peers = 0, fds = 0, kib = 0;
    int threads = 0;
    std::string error;
    for (int p = 0; p < processes; ++p) {
      int status = 0;
      ::waitpid(children[p], &status, 0);
      std::ifstream in(dir + "/report-" + std::to_string(p));
      std::string word;
      in >> word;
      if (word != "ok") {
        std::string rest;
        std::getline(in, rest);
        error = WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                    : word + rest;
        continue;
      }
      Report r;
      in >> r.setupSeconds >> r.fdsPerRank >> r.kibPerRank >> r.peersPerRank >> r.threadsPerRank >>
          r.allreduceSmall >> r.allreduceMedium >> r.broadcast >> r.barrier >>
          r.hierarchicalSmall >> r.hierarchicalMedium;
      const int ranks = std::min(size, (p + 1) * ranksPerProcess) - p * ranksPerProcess;
      total.setupSeconds = std::max(total.setupSeconds, r.setupSeconds);
      peers += r.peersPerRank;  // a sum over the process's ranks
      fds += r.fdsPerRank * ranks;
      kib += r.kibPerRank * ranks;
      threads = std::max(threads, r.threadsPerRank);
      total.allreduceSmall = std::max(total.allreduceSmall, r.allreduceSmall);
      total.allreduceMedium = std::max(total.allreduceMedium, r.allreduceMedium);
      total.broadcast = std::max(total.broadcast, r.broadcast);
      total.barrier = std::max(total.barrier, r.barrier);
      total.hierarchicalSmall = std::max(total.hierarchicalSmall, r.hierarchicalSmall);
      total.hierarchicalMedium = std::max(total.hierarchicalMedium, r.hierarchicalMedium);
    }
    std::filesystem::remove_all(dir);
    if (!error.empty()) {
      std::printf("%6d %5d  failed: %s\n", size, processes, error.c_str());
      continue;
    }
    std::printf(
        "%6d %5d %6.1f %8.2f %7.1f %7.1f %9.0f %8d %11.0f %12.0f %10.0f %10.0f %12.0f %14.0f\n",
        size, processes, std::log2(size), total.setupSeconds, peers / size, fds / size, kib / size,
        threads, total.allreduceSmall, total.allreduceMedium, total.broadcast, total.barrier,
        total.hierarchicalSmall, total.hierarchicalMedium);
    std::fflush(stdout);
  }
  return 0;
}
