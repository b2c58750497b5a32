#include "backend/store/store.h"

#include <string>

#include "base/error.h"

namespace ringx {

void InMemoryStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    values_[key] = value;
  }
  changed_.notify_all();
}

std::vector<uint8_t> InMemoryStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  bool found = changed_.wait_for(lock, timeout, [&] { return values_.count(key) > 0; });
  if (!found) {
    RINGX_THROW(TimeoutError, "ringx: timed out after ", timeout.count(),
                " ms waiting for store key '", key, "'");
  }
  return values_[key];
}

int64_t InMemoryStore::add(const std::string& key, int64_t delta) {
  int64_t value = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& stored = values_[key];
    if (!stored.empty()) value = std::stoll(std::string(stored.begin(), stored.end()));
    value += delta;
    const std::string text = std::to_string(value);
    stored.assign(text.begin(), text.end());
  }
  changed_.notify_all();
  return value;
}

bool InMemoryStore::check(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  return values_.count(key) > 0;
}

}  // namespace ringx
