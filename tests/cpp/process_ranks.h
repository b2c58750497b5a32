// Test harness for transports that are about processes (shared memory): runs
// every rank as a forked child process, rendezvousing through a directory-based
// store, and reports each child's failure text back to the test.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backend/group/group.h"
#include "backend/store/store.h"
#include "base/error.h"
#include "tests/cpp/rank_threads.h"  // groupOptions

namespace ringx::testing {

// One file per key; a value appears atomically (written aside, then renamed).
class DirectoryStore : public Store {
 public:
  explicit DirectoryStore(std::string dir) : dir_(std::move(dir)) {}
  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    std::string path = pathOf(key), temp = path + ".tmp" + std::to_string(::getpid());
    std::ofstream(temp, std::ios::binary)
        .write(reinterpret_cast<const char*>(value.data()),
               static_cast<std::streamsize>(value.size()));
    std::rename(temp.c_str(), path.c_str());
  }
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!check(key)) {
      if (std::chrono::steady_clock::now() > deadline) {
        RINGX_THROW(TimeoutError, "store key ", key, " did not appear");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::ifstream in(pathOf(key), std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    std::string text = buffer.str();
    return std::vector<uint8_t>(text.begin(), text.end());
  }
  bool check(const std::string& key) override {
    struct stat info;
    return ::stat(pathOf(key).c_str(), &info) == 0;
  }
  // Under an exclusive lock of the directory's lock file: the processes' adds are atomic.
  int64_t add(const std::string& key, int64_t delta) override {
    const int lock = ::open((dir_ + "/.add-lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    RINGX_CHECK(lock >= 0, "cannot open the store's lock file in ", dir_);
    ::flock(lock, LOCK_EX);
    int64_t value = 0;
    if (check(key)) {
      const auto bytes = get(key, std::chrono::milliseconds(1));
      value = std::stoll(std::string(bytes.begin(), bytes.end()));
    }
    value += delta;
    const std::string text = std::to_string(value);
    set(key, std::vector<uint8_t>(text.begin(), text.end()));
    ::flock(lock, LOCK_UN);
    ::close(lock);
    return value;
  }

 private:
  std::string pathOf(const std::string& key) const {
    std::string safe = key;
    for (char& c : safe) {
      if (c == '/') c = '_';
    }
    return dir_ + "/" + safe;
  }
  std::string dir_;
};

// The options of a group whose ranks are runProcesses' children (30 s timeout).
inline GroupOptions processOptions(int rank, int size, std::shared_ptr<Store> store) {
  return groupOptions(rank, size, std::move(store), std::chrono::seconds(30));
}

// Forks `size` children running body(rank, store); returns each child's error
// text ("" for success; "killed by signal N" when it did not exit).
// `pids`, when given, receives the children's process ids.
inline std::vector<std::string> runProcesses(
    int size, const std::function<void(int rank, std::shared_ptr<Store> store)>& body,
    std::vector<pid_t>* pids = nullptr) {
  char pattern[] = "/tmp/ringx-test-XXXXXX";
  std::string dir = ::mkdtemp(pattern);
  std::vector<pid_t> children;
  std::vector<std::string> reports;
  for (int rank = 0; rank < size; ++rank) {
    reports.push_back(dir + "/report-" + std::to_string(rank));
    pid_t pid = ::fork();
    if (pid == 0) {
      std::string error;
      try {
        body(rank, std::make_shared<DirectoryStore>(dir));
      } catch (const std::exception& e) {
        error = e.what();
        if (error.empty()) error = "exception";
      }
      std::ofstream(reports.back()) << error;
      std::fflush(nullptr);
      ::_exit(error.empty() ? 0 : 1);
    }
    children.push_back(pid);
  }
  std::vector<std::string> errors;
  for (int rank = 0; rank < size; ++rank) {
    int status = 0;
    ::waitpid(children[rank], &status, 0);
    if (WIFSIGNALED(status)) {
      errors.push_back("killed by signal " + std::to_string(WTERMSIG(status)));
      continue;
    }
    std::ifstream in(reports[rank]);
    std::stringstream text;
    text << in.rdbuf();
    errors.push_back(WEXITSTATUS(status) == 0 ? "" : text.str() + " (exit)");
  }
  std::filesystem::remove_all(dir);
  if (pids != nullptr) *pids = children;
  return errors;
}

// Names in /dev/shm that ringx created; with `creators`, only those made by
// these processes (segment names start "ringx-<pid>-"), so that tests running
// in parallel do not see each other's segments.
inline std::vector<std::string> ringxShmEntries(const std::vector<pid_t>& creators = {}) {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    std::string name = entry.path().filename();
    if (name.rfind("ringx-", 0) != 0) continue;
    bool mine = creators.empty();
    for (pid_t pid : creators) mine |= name.rfind("ringx-" + std::to_string(pid) + "-", 0) == 0;
    if (mine) out.push_back(name);
  }
  return out;
}

}  // namespace ringx::testing
