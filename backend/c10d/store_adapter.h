// Lets the torch-free core rendezvous through torch's c10d::Store (the
// PrefixStore that torch hands every process group).
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "backend/store/store.h"
#include "base/error.h"

namespace ringx::c10d_glue {

class C10dStore : public ::ringx::Store {
 public:
  explicit C10dStore(c10::intrusive_ptr<::c10d::Store> store) : store_(std::move(store)) {}

  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    store_->set(key, value);
  }
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override {
    try {
      store_->wait({key}, timeout);
    } catch (const std::exception& e) {
      RINGX_THROW(TimeoutError, "ringx: waiting for store key '", key, "' failed after ",
                  timeout.count(), " ms (did every rank of the group start?): ", e.what());
    }
    return store_->get(key);
  }
  bool check(const std::string& key) override { return store_->check({key}); }
  int64_t add(const std::string& key, int64_t delta) override { return store_->add(key, delta); }

 private:
  c10::intrusive_ptr<::c10d::Store> store_;
};

}  // namespace ringx::c10d_glue
