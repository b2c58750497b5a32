// One collective across ranks, as a chain of arrows: the spans that are the same
// collective (the same process group and sequence number on every rank), in the
// order the ranks arrived at it. `ringx-trace export` writes each chain as a
// Chrome flow ("s" -> "t" ... -> "f", one id per group and seq) and the viewer
// draws the same arrows from its own ingest, so Perfetto and ringx-viewer show
// a collective joined the same way.
//
// Why a chain in arrival order, from the first rank to begin the collective to
// the last: a collective cannot finish before its last rank arrives, so the
// chain ends on the rank everybody waited for (the arrow head points at the
// straggler), the horizontal extent of the whole chain is the arrival skew, and
// each arrow's slant is how long one rank waited for the next. A chain in rank
// order would zigzag back and forth in time and hide which rank was late; a fan
// of arrows into the last rank draws N-1 overlapping lines for the same fact.
// Ties (ranks beginning at the same nanosecond) go by rank.
//
// Matching follows the viewer's collectives panel and ringx-trace summary:
// collective spans with a `seq` argument, point-to-point ops excluded, the group
// from the `group` argument or else the "comm:<group>" track. A rank that
// records the same collective twice keeps its first span.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "trace/format/codec.h"
#include "trace/format/collective_key.h"

namespace ringx::trace {

// One rank's span of a collective. `track` and `name` are the caller's handles
// (a tid, a string id of its own table), carried through untouched.
struct CollectiveArrival {
  int32_t rank = 0;
  uint32_t track = 0;
  uint32_t name = 0;
  int64_t beginNs = 0;  // on the job's aligned clock
};

struct CollectiveChain {
  uint64_t id =
      0;  // unique per (group, seq) among the chains one CollectiveChains hands out; from 1
  std::string group;
  int64_t seq = 0;
  bool complete = false;                    // every member of the group arrived
  std::vector<CollectiveArrival> arrivals;  // by beginNs, then rank; one per rank
};

// Reads a stream's collective spans: the argument keys are looked up once.
class CollectiveKeys {
 public:
  explicit CollectiveKeys(const RankTrace& trace);
  // The group, seq and group size (-1 without a group_size argument) of `e`, or
  // false when `e` is not matched across ranks.
  bool read(const Event& e, std::string_view* group, int64_t* seq, int64_t* groupSize) const;

 private:
  const RankTrace& trace_;
  uint32_t seq_, group_, groupSize_;
};

class CollectiveChains {
 public:
  // At most `maxOpen` collectives wait for their other ranks (0: no limit); past
  // that the longest-waiting are handed out as they are, so that a live job
  // with a dead rank does not grow this without bound.
  explicit CollectiveChains(size_t maxOpen = 0) : maxOpen_(maxOpen) {}

  // One rank's span of collective (group, seq) of `groupSize` ranks.
  void add(std::string_view group, int64_t seq, int64_t groupSize,
           const CollectiveArrival& arrival);
  // Chains that every rank of their group reached since the last call (and any
  // pushed out by maxOpen), in the order they completed.
  std::vector<CollectiveChain> takeComplete();
  // Every chain of two or more arrivals, complete or not (the end of a file:
  // ranks that never arrived are simply not in it), by first arrival.
  std::vector<CollectiveChain> takeAll();
  size_t openCount() const { return open_.size(); }

 private:
  struct Open {
    int64_t groupSize = 0;
    std::vector<CollectiveArrival> arrivals;
  };
  void finish(const CollectiveKey& key, Open& open, bool complete,
              std::vector<CollectiveChain>* out);

  size_t maxOpen_;
  uint64_t nextId_ = 1;
  std::vector<std::string> groups_;
  std::unordered_map<std::string, uint32_t> groupIndex_;
  std::unordered_map<CollectiveKey, Open, CollectiveKeyHash> open_;
  std::deque<CollectiveKey>
      opened_;  // in order of first arrival, for maxOpen (may name finished keys)
  std::vector<CollectiveChain> done_;
};

}  // namespace ringx::trace
