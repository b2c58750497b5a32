#include "backend/store/generation.h"

#include <algorithm>
#include <fstream>
#include <random>

#include "base/error.h"

namespace ringx {
namespace {

constexpr const char* kHintKey = "ringx/gen/hint";
constexpr const char* kFormed = "formed ";
constexpr const char* kAbandoned = "abandoned";

std::string roundKey(int64_t round, const std::string& what) {
  return strCat("ringx/gen/", round, "/", what);
}

// One generation's keys, and the steps every rank takes in it.
class Round {
 public:
  Round(Store& store, int64_t number, std::chrono::steady_clock::time_point deadline,
        const std::string& group, int rank)
      : store_(store), number_(number), deadline_(deadline), group_(group), rank_(rank) {}

  // Step 1: true when this rank's slot was free (now ours).
  bool claim() { return store_.add(key(strCat("slot/", rank_)), 1) == 1; }
  bool decided() { return store_.add(key("decided"), 0) > 0; }
  // Step 2: records `outcome` when nobody decided first; returns whether it did.
  bool decide(const std::string& outcome) {
    if (store_.add(key("decided"), 1) != 1) return false;
    store_.setString(key("outcome"), outcome);
    // Whoever waits in this round: the other ranks on "ready", rank 0 on "wake".
    store_.setString(key("ready"), "1");
    store_.setString(key("wake"), "1");
    return true;
  }
  void abandon() { decide(kAbandoned); }
  // The outcome when it is decided already ("" if not).
  std::string outcomeNow() {
    const std::string k = key("outcome");
    return store_.check(k) ? wait("outcome") : std::string();
  }
  std::string wait(const std::string& what) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline_ - std::chrono::steady_clock::now());
    try {
      return store_.getString(key(what), std::max(left, std::chrono::milliseconds(1)));
    } catch (const TimeoutError&) {
      RINGX_THROW(TimeoutError, "ringx: group '", group_, "' did not form: rank ", rank_,
                  " waited in vain for ",
                  what == "wake" ? "the other ranks to join" : "rank 0 to join", " (generation ",
                  number_,
                  " of this store's group; did every rank of the group start and create it? "
                  "Raise the timeout if some start much later)");
    }
  }
  std::string key(const std::string& what) const { return roundKey(number_, what); }

  Store& store_;
  const int64_t number_;
  const std::chrono::steady_clock::time_point deadline_;
  const std::string& group_;
  const int rank_;
};

}  // namespace

std::string randomToken() {
  unsigned char bytes[16];
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  if (!urandom.read(reinterpret_cast<char*>(bytes), sizeof(bytes))) {
    std::random_device device;
    for (auto& b : bytes) b = static_cast<unsigned char>(device());
  }
  static const char* hex = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) {
    token += hex[b >> 4];
    token += hex[b & 15];
  }
  return token;
}

Generation joinGeneration(Store& store, int rank, int size,
                          std::chrono::steady_clock::time_point deadline,
                          const std::string& groupName) {
  RINGX_CHECK(size >= 1 && rank >= 0 && rank < size, "ringx: rank ", rank,
              " is not within a group of size ", size);
  for (int64_t number = store.add(kHintKey, 0);; ++number) {
    Round round(store, number, deadline, groupName, rank);
    if (!round.claim()) {
      round.abandon();  // an earlier instance's: make sure nobody of ours waits in it
      continue;
    }
    if (round.decided()) continue;  // over before we came
    std::string outcome;
    if (rank == 0) {
      store.setString(round.key("ready"), "1");
      if (size > 1) round.wait("wake");  // every rank acknowledged, or someone abandoned
      if (!round.outcomeNow().empty()) continue;
      // Later instances start past this round, whatever its outcome.
      const int64_t hint = store.add(kHintKey, 0);
      if (hint <= number) store.add(kHintKey, number + 1 - hint);
      outcome = kFormed + randomToken();
      if (!round.decide(outcome)) continue;
    } else {
      round.wait("ready");
      if (!round.outcomeNow().empty()) continue;  // abandoned: "ready" woke us
      if (store.add(round.key("acks"), 1) == size - 1) store.setString(round.key("wake"), "1");
      outcome = round.wait("outcome");
    }
    if (outcome.rfind(kFormed, 0) != 0) continue;
    Generation generation;
    generation.number = number;
    generation.token = outcome.substr(std::string(kFormed).size());
    generation.prefix = strCat("ringx/gen/", number, "/group/");
    return generation;
  }
}

std::shared_ptr<Store> scopedStore(const Generation& generation, std::shared_ptr<Store> store) {
  return std::make_shared<PrefixedStore>(generation.prefix, std::move(store));
}

}  // namespace ringx
