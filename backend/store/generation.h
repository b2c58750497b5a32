// Which instance of a group this is, agreed through a store that may still hold what earlier
// instances of "the same" group wrote.
//
// torch hands a group a store whose keys are scoped by the group's name, not by the job's
// attempt: torchrun's elastic agent (torch 2.13) reuses one TCPStore across restarts, and a
// program may build a second group on the store of a first. A rank that read a peer's
// address or the group's token straight from such a store could read an earlier instance's,
// dial a process that is gone (or, worse, one that is alive in the old group) and fail or
// join the wrong ring. So every instance first agrees on a generation, a number no earlier
// instance used, by atomic counters only, and keeps every key it writes or reads under
// "ringx/gen/<G>/" (scopedStore). Nothing outside that prefix is read before the agreement,
// so nothing stale can be.
//
// The agreement, with rank 0 as the coordinator of each generation R (counters are the
// store's add(); a key is "set" once):
//   1. Claim: rank r adds 1 to "R/slot/r". Getting 1 makes it generation R's rank r. More
//      than 1 means an earlier instance's rank r was there: R is not ours. Abandon it (next
//      line) and try R + 1.
//   2. Decide once: whoever makes "R/decided" 1 writes R's outcome, "formed <token>" (rank 0,
//      once every rank has acknowledged) or "abandoned" (a rank that found its slot taken),
//      and wakes whoever waits in R. A round decided before a rank claimed is over: try R+1.
//   3. Rank 0 claims, then publishes "R/ready"; every other rank waits for it, acknowledges
//      ("R/acks" += 1; the last one wakes rank 0) and waits for the outcome. Rank 0, woken,
//      decides "formed" unless someone abandoned R first.
// An acknowledgement can only come from a process that claimed its slot in R and saw rank
// 0's "ready" there, so a formed generation is made of live processes of this instance,
// even where an earlier one died half way (its claims make the next instance abandon those
// rounds). "hint" is where the search starts: rank 0 raises it past R before deciding R, so
// the ranks of a later instance skip the rounds used so far.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "backend/store/store.h"

namespace ringx {

struct Generation {
  int64_t number = 0;
  std::string token;   // the group's connection token, drawn by rank 0 for this generation
  std::string prefix;  // what every later key of the group is scoped by
};

// Agrees on this instance's generation with the other `size` ranks of the group (every rank
// calls it once per group it makes). Throws TimeoutError, naming `groupName` and what it
// waited for, when the others do not come before `deadline`.
Generation joinGeneration(Store& store, int rank, int size,
                          std::chrono::steady_clock::time_point deadline,
                          const std::string& groupName);

// `store` with every key under the generation's prefix.
std::shared_ptr<Store> scopedStore(const Generation& generation, std::shared_ptr<Store> store);

// 16 random bytes as hex, from /dev/urandom.
std::string randomToken();

}  // namespace ringx
