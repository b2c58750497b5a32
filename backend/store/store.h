// The key-value store that ranks rendezvous through.
//
// The c10d layer adapts torch's c10d::Store (TCPStore, FileStore, PrefixStore)
// to this interface; tests use InMemoryStore with ranks as threads. Keys are
// already scoped to one process group by the caller (torch hands every group a
// PrefixStore).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ringx {

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const std::vector<uint8_t>& value) = 0;
  // Blocks until `key` exists or `timeout` passes (then throws TimeoutError).
  virtual std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Non-blocking: whether `key` exists now.
  virtual bool check(const std::string& key) = 0;
  // Atomically adds `delta` to the integer at `key` (0 when absent, which creates it) and
  // returns the sum; add(key, 0) reads it. Keys used with add hold decimal text, as
  // torch's stores keep them.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;

  void setString(const std::string& key, const std::string& value) {
    set(key, std::vector<uint8_t>(value.begin(), value.end()));
  }
  std::string getString(const std::string& key, std::chrono::milliseconds timeout) {
    auto bytes = get(key, timeout);
    return std::string(bytes.begin(), bytes.end());
  }
};

// A thread-safe store for tests that run every rank as a thread of one process.
class InMemoryStore : public Store {
 public:
  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override;
  bool check(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::vector<uint8_t>> values_;
};

// Prepends a prefix to every key, so that several groups can share one store.
class PrefixedStore : public Store {
 public:
  PrefixedStore(std::string prefix, std::shared_ptr<Store> inner)
      : prefix_(std::move(prefix)), inner_(std::move(inner)) {}
  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    inner_->set(prefix_ + key, value);
  }
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override {
    return inner_->get(prefix_ + key, timeout);
  }
  bool check(const std::string& key) override { return inner_->check(prefix_ + key); }
  int64_t add(const std::string& key, int64_t delta) override {
    return inner_->add(prefix_ + key, delta);
  }

 private:
  std::string prefix_;
  std::shared_ptr<Store> inner_;
};

}  // namespace ringx
