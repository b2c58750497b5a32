#include "backend/store/store.h"

#include <future>
#include <thread>

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

std::optional<std::string> callWithin(std::shared_ptr<Store> store,
                                      std::chrono::milliseconds budget,
                                      std::function<std::string(Store&)> call) {
  auto result = std::make_shared<std::promise<std::string>>();
  std::future<std::string> answer = result->get_future();
  // Detached: joining it would wait out the store's own timeout, which is what we avoid.
  std::thread([store = std::move(store), result, call = std::move(call)] {
    try {
      result->set_value(call(*store));
    } catch (...) {
      result->set_exception(std::current_exception());
    }
  }).detach();
  if (answer.wait_for(budget) != std::future_status::ready) return std::nullopt;
  try {
    return answer.get();
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace ringx
