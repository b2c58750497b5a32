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

#include "base/command_line.h"

extern char** environ;

namespace ringx::samples {

struct RankArgs {
  int worldSize = 2;
  int rank = -1;
  int steps = 30;
  std::string store;
  std::string trace;
};

// The samples' command line (CLI11, as every ringx program's): --help lists it;
// a bad value prints what was wrong and exits 2.
inline RankArgs parseRankArgs(int argc, char** argv, const char* program, int defaultSteps) {
  RankArgs a;
  a.steps = defaultSteps;
  CLI::App app{"Trains a small model on backend \"ringx\", one process per rank.", program};
  cli::useConventions(app);
  app.add_option("--world-size", a.worldSize, "ranks to start, one process each")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--steps", a.steps, "training steps")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--trace", a.trace, "record a ringx trace into DIR")->type_name("DIR");
  // Set by the launcher for the processes it starts, not by users: hidden from --help.
  app.add_option("--rank", a.rank, "this process's rank")->group("");
  app.add_option("--store", a.store, "the rank processes' FileStore")->group("");
  if (const int status = cli::parse(app, argc, argv); status >= 0) std::exit(status);
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
