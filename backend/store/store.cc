#include "backend/store/store.h"

#include "backend/common/error.h"

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

bool InMemoryStore::check(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  return values_.count(key) > 0;
}

}  // namespace ringx
