// Collectives joined across ranks (see collective_chains.h).
#include "trace/read/collective_chains.h"

#include <algorithm>

#include "base/text.h"
#include "trace/format/collective_key.h"

namespace ringx::trace {

CollectiveKeys::CollectiveKeys(const RankTrace& trace)
    : trace_(trace),
      seq_(trace.findString(arg::kSeq)),
      group_(trace.findString(arg::kGroup)),
      groupSize_(trace.findString(arg::kGroupSize)) {}

bool CollectiveKeys::read(const Event& e, std::string_view* group, int64_t* seq,
                          int64_t* groupSize) const {
  if (e.kind != EventKind::kSpan || e.category != Category::kCollective || seq_ == 0) return false;
  *seq = -1;
  *groupSize = -1;
  *group = {};
  for (uint32_t i = e.firstArg; i < e.firstArg + e.argCount && i < trace_.args.size(); ++i) {
    const Arg& a = trace_.args[i];
    if (a.key == seq_ && a.type == ArgType::kInt) *seq = a.intValue;
    if (a.key == groupSize_ && a.type == ArgType::kInt) *groupSize = a.intValue;
    if (a.key == group_ && a.type == ArgType::kString) *group = trace_.str(a.stringId);
  }
  *group = collectiveGroup(*group, trace_.str(e.track));
  return isCollectiveAcrossRanks(trace_.str(e.name), *seq, *group);
}

void CollectiveChains::add(std::string_view group, int64_t seq, int64_t groupSize,
                           const CollectiveArrival& arrival) {
  auto [g, newGroup] =
      groupIndex_.try_emplace(std::string(group), static_cast<uint32_t>(groups_.size()));
  if (newGroup) groups_.emplace_back(group);
  const CollectiveKey key{g->second, seq};
  auto [it, added] = open_.try_emplace(key);
  Open& open = it->second;
  if (added) {
    opened_.push_back(key);
    open.groupSize = groupSize;
  }
  for (const CollectiveArrival& a : open.arrivals)
    if (a.rank == arrival.rank) return;  // the rank's first span of it stands
  open.arrivals.push_back(arrival);
  if (open.groupSize > 0 && static_cast<int64_t>(open.arrivals.size()) >= open.groupSize) {
    finish(key, open, /*complete=*/true, &done_);
    open_.erase(it);
  }
  // Evict the longest-waiting collectives (opened_ also names finished ones:
  // skip those) once too many wait.
  while (maxOpen_ > 0 && open_.size() > maxOpen_ && !opened_.empty()) {
    const CollectiveKey oldest = opened_.front();
    opened_.pop_front();
    auto o = open_.find(oldest);
    if (o == open_.end()) continue;
    finish(oldest, o->second, /*complete=*/false, &done_);
    open_.erase(o);
  }
  if (opened_.size() > 4 * open_.size() + 1024) {
    // Mostly finished keys: drop them so the queue stays proportional to open_.
    std::deque<CollectiveKey> live;
    for (const CollectiveKey& k : opened_)
      if (open_.count(k)) live.push_back(k);
    opened_.swap(live);
  }
}

void CollectiveChains::finish(const CollectiveKey& key, Open& open, bool complete,
                              std::vector<CollectiveChain>* out) {
  if (open.arrivals.size() < 2) return;  // one rank alone joins nothing
  CollectiveChain chain;
  chain.group = groups_[key.group];
  chain.seq = key.seq;
  chain.complete = complete;
  chain.arrivals = std::move(open.arrivals);
  std::sort(chain.arrivals.begin(), chain.arrivals.end(),
            [](const CollectiveArrival& a, const CollectiveArrival& b) {
              return a.beginNs != b.beginNs ? a.beginNs < b.beginNs : a.rank < b.rank;
            });
  out->push_back(std::move(chain));
}

std::vector<CollectiveChain> CollectiveChains::takeComplete() {
  std::vector<CollectiveChain> out;
  out.swap(done_);
  for (CollectiveChain& c : out) c.id = nextId_++;
  return out;
}

std::vector<CollectiveChain> CollectiveChains::takeAll() {
  std::vector<CollectiveChain> out;
  out.swap(done_);
  for (const CollectiveKey& key : opened_) {
    auto it = open_.find(key);
    if (it == open_.end()) continue;
    finish(key, it->second, /*complete=*/false, &out);
    open_.erase(it);
  }
  opened_.clear();
  open_.clear();
  std::stable_sort(out.begin(), out.end(), [](const CollectiveChain& a, const CollectiveChain& b) {
    return a.arrivals.front().beginNs < b.arrivals.front().beginNs;
  });
  for (CollectiveChain& c : out) c.id = nextId_++;
  return out;
}

}  // namespace ringx::trace
