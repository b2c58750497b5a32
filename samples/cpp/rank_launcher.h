// What the C++ samples share: their command line and starting one process per
// rank. Without --rank a sample starts --world-size copies of itself (ranks
// 0..N-1) that meet through a torch FileStore, as torchrun-started ranks would
// meet through a TCPStore.
#pragma once

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

extern char** environ;

namespace ringx::samples {

struct RankArgs {
  int worldSize = 2;
  int rank = -1;
  int steps = 30;
  std::string store;
  std::string trace;
};

inline RankArgs parseRankArgs(int argc, char** argv, const char* program, int defaultSteps) {
  RankArgs a;
  a.steps = defaultSteps;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s: %s needs a value\n", program, flag.c_str());
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
                   "usage: %s [--world-size N] [--steps S] [--trace DIR]\n"
                   "unknown argument: %s\n",
                   program, flag.c_str());
      std::exit(2);
    }
  }
  if (a.worldSize < 1) {
    std::fprintf(stderr, "%s: --world-size must be at least 1\n", program);
    std::exit(2);
  }
  return a;
}

// Starts one process per rank and waits for all of them; 0 when all succeeded.
inline int launchRanks(const RankArgs& args, const char* self, const char* program) {
  char storeTemplate[] = "/tmp/ringx-sample-XXXXXX";
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
  if (failures) std::fprintf(stderr, "%s: %d rank(s) failed\n", program, failures);
  return failures ? 1 : 0;
}

}  // namespace ringx::samples
