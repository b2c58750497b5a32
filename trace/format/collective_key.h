// Which recorded span is one collective across the ranks of its group, and its key there.
//
// Every reader that lines a collective up across ranks (the trace directory's collective chains,
// the model's aggregate lanes, the analyses' collective matching and the summary) asks here, so
// they agree on what counts: a collective span with a sequence number (seq >= 0) that is not
// point-to-point (send and recv are matched by peer, not by their group's sequence). Its group is
// its "group" argument, or for traces that lack it, its communication track's ("comm:<group>").
// The key is (group, seq): the same collective has the same key on every rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ringx::trace {

// A collective's identity across ranks: its process group (an id of the
// reader's string table) and its sequence number in that group.
struct CollectiveKey {
  uint32_t group = 0;
  int64_t seq = 0;
  bool operator==(const CollectiveKey& o) const { return seq == o.seq && group == o.group; }
};
struct CollectiveKeyHash {
  size_t operator()(const CollectiveKey& k) const {
    uint64_t x = (uint64_t{k.group} << 40) ^ static_cast<uint64_t>(k.seq);
    x ^= x >> 33;  // murmur's finalizer: seqs are dense, a table wants spread bits
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return static_cast<size_t>(x);
  }
};

// Collectives that other producers' traces never numbered (NCCL kernels in profiler traces,
// trace/model/chrome_nccl.cc) get a seq from a rule; this argument names the rule, and the
// summary says which matched them.
inline constexpr const char* kMatchedByArg = "matched_by";

// send, recv and their variants: matched by peer, not by group sequence.
bool isPointToPoint(std::string_view op);

// The group of a collective span: `groupArg` (its "group" argument) when not empty, else what
// follows "comm:" in its track's name, else its track's name (a span recorded elsewhere is
// matched by its track).
std::string_view collectiveGroup(std::string_view groupArg, std::string_view trackName);

// Whether a collective span named `op`, with sequence number `seq` (-1: none), of `group` (its
// collectiveGroup()) is one collective across its group's ranks.
bool isCollectiveAcrossRanks(std::string_view op, int64_t seq, std::string_view group);

// The span's key across ranks, or none when it is not one collective across ranks (no sequence
// number, or point-to-point). `group` is its collectiveGroup(); `idOf(group)` the caller's id
// for that name (an id of its string table, or of its own).
template <typename IdOf>
std::optional<CollectiveKey> collectiveKeyOf(std::string_view op, int64_t seq,
                                             std::string_view group, IdOf&& idOf) {
  if (!isCollectiveAcrossRanks(op, seq, group)) return std::nullopt;
  return CollectiveKey{idOf(group), seq};
}

}  // namespace ringx::trace
