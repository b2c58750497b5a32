// A small job for the model's and the viewer's tests: 2 ranks with compute, a communication track
// of collectives, DDP phases and two buckets, an FSDP unit, steps and memory counters, shaped like
// what the backend and the engines record (schema.h).
#pragma once

#include <string>
#include <vector>

#include "tests/cpp/trace/trace_fixture.h"
#include "trace/model/trace_store.h"

namespace ringx::model::testing {

using trace::fixture::kMs;

using IntArgs = std::vector<std::pair<std::string, int64_t>>;
using StringArgs = std::vector<std::pair<std::string, std::string>>;

// An event's name, category and arguments, added to the store for `rank`.
template <typename Event>
Event namedEvent(TraceStore& store, RankData& rank, const std::string& category,
                 const std::string& name, const IntArgs& intArgs, const StringArgs& stringArgs) {
  std::vector<ArgValue> args;
  for (auto& [k, v] : intArgs) args.push_back(ArgValue::ofInt(store.strings().intern(k), v));
  for (auto& [k, v] : stringArgs)
    args.push_back(ArgValue::ofString(store.strings().intern(k), store.strings().intern(v)));
  Event e;
  e.name = store.strings().intern(name);
  e.category = store.category(category);
  e.firstArg = store.addArgs(rank, args.data(), args.size());
  e.argCount = uint16_t(args.size());
  return e;
}

inline void addSpan(TraceStore& store, int32_t rank, const std::string& track,
                    const std::string& category, const std::string& name, int64_t begin,
                    int64_t end, IntArgs intArgs = {}, StringArgs stringArgs = {}) {
  RankData& r = store.rank(rank);
  Span s = namedEvent<Span>(store, r, category, name, intArgs, stringArgs);
  s.begin = begin;
  s.end = end;
  store.addSpan(r, store.track(r, track), s);
}

inline void addInstant(TraceStore& store, int32_t rank, const std::string& track,
                       const std::string& category, const std::string& name, int64_t time,
                       IntArgs intArgs = {}, StringArgs stringArgs = {}) {
  RankData& r = store.rank(rank);
  Instant i = namedEvent<Instant>(store, r, category, name, intArgs, stringArgs);
  i.time = time;
  store.addInstant(r, store.track(r, track), i);
}

// A job of `hosts` x `perHost` ranks (hosts "host0", ...; one host name when
// `oneHost`): each 10 ms step, compute [0, 5) ms (half busy) and an allreduce
// (seq = step, group "world") from 6 ms + rank us to 8 ms, except `straggler`,
// which arrives at 7 ms: the last, 1 ms after the first.
inline void fillHostsStore(TraceStore& store, int hosts, int perHost, int32_t straggler,
                           int steps = 10, bool oneHost = false) {
  for (int32_t rank = 0; rank < hosts * perHost; ++rank) {
    store.rank(rank).host = oneHost ? "host0" : "host" + std::to_string(rank / perHost);
    for (int step = 0; step < steps; ++step) {
      const int64_t t = step * 10 * kMs;
      addSpan(store, rank, "compute", "user", "matmul", t, t + 5 * kMs);
      const int64_t arrive = rank == straggler ? t + 7 * kMs : t + 6 * kMs + rank * 1000;
      addSpan(store, rank, "comm:world", "collective", "allreduce", arrive, t + 8 * kMs,
              {{"seq", step}, {"bytes", 1 << 20}, {"group_size", hosts * perHost}},
              {{"group", "world"}});
    }
  }
  store.finalize();
}

// Iterations of 10 ms: forward [0, 3), backward [3, 8), optimizer [8, 9); on
// rank 1 everything starts 0.5 ms later (a straggler). A bucket allreduce per
// bucket in backward, FSDP unit events, memory counters rising to a peak.
inline void fillSampleStore(TraceStore& store, int iterations = 4) {
  for (int32_t rank = 0; rank < 2; ++rank) {
    const int64_t skew = rank * kMs / 2;
    int64_t seq = 0;
    for (int it = 0; it < iterations; ++it) {
      const int64_t t = it * 10 * kMs + skew;
      addSpan(store, rank, "ddp", "ddp", "forward", t, t + 3 * kMs, {{"step", it}});
      addSpan(store, rank, "ddp", "ddp", "backward", t + 3 * kMs, t + 8 * kMs, {{"step", it}});
      addSpan(store, rank, "ddp", "ddp", "optimizer", t + 8 * kMs, t + 9 * kMs, {{"step", it}});
      addSpan(store, rank, "compute", "user", "matmul", t, t + 2 * kMs);
      for (int b = 0; b < 2; ++b) {
        const int64_t ready = t + (5 + b) * kMs;
        const int64_t wireEnd = ready + kMs + (b == 1 ? kMs : 0);
        addSpan(store, rank, "ddp:bucket" + std::to_string(b), "ddp", "bucket", t + (4 + b) * kMs,
                wireEnd + kMs / 10,
                {{"step", it},
                 {"bucket", b},
                 {"bytes", 4 << 20},
                 {"params", 3},
                 {"first_grad_ns", t + (4 + b) * kMs},
                 {"ready_ns", ready},
                 {"launch_ns", ready},
                 {"wire_start_ns", ready},
                 {"wire_end_ns", wireEnd},
                 {"copy_back_ns", wireEnd},
                 {"exposed_ns", std::max<int64_t>(0, wireEnd - (t + 8 * kMs))}});
        addSpan(store, rank, "comm:world", "collective", "allreduce", ready, wireEnd,
                {{"bytes", 4 << 20},
                 {"seq", seq++},
                 {"group_rank", rank},
                 {"group_size", 2},
                 {"enqueue_ns", ready - kMs / 20}},
                {{"group", "world"}, {"dtype", "float32"}});
      }
      addSpan(store, rank, "fsdp:layers.0", "fsdp", "all_gather", t, t + kMs / 2,
              {{"step", it},
               {"bytes", 1 << 20},
               {"prefetched", 0},
               {"issue_ns", t},
               {"wire_start_ns", t},
               {"wire_end_ns", t + kMs / 2},
               {"exposed_ns", kMs / 2}},
              {{"phase", "forward"}});
      addSpan(store, rank, "fsdp:layers.0", "fsdp", "forward", t + kMs / 2, t + 2 * kMs,
              {{"step", it}});
      RankData& r = store.rank(rank);
      store.addCounter(r, "rss_bytes", t, 100e6 + it * 1e6);
      store.addCounter(r, "ddp.bucket_bytes", t + 4 * kMs, 4 << 20);
      store.addCounter(r, "ddp.bucket_bytes", t + 6 * kMs, it == 2 ? 8 << 20 : 6 << 20);
      store.addCounter(r, "ddp.bucket_bytes", t + 9 * kMs, 0);
    }
  }
  store.finalize();
}

// One run of a run diff: 2 ranks, three 4 MiB allreduces (seq 0, 1, 2) 10 ms
// apart, each 1 ms long, on a clock that starts at `clockStart` (two runs never
// share one); `slowerSeq1` ms more on seq 1 on both ranks.
inline void fillDiffRun(TraceStore& store, int64_t clockStart, int64_t slowerSeq1 = 0) {
  for (int32_t rank = 0; rank < 2; ++rank) {
    for (int64_t seq = 0; seq < 3; ++seq) {
      const int64_t begin = clockStart + (seq + 1) * 10 * kMs;
      const int64_t end = begin + kMs + (seq == 1 ? slowerSeq1 * kMs : 0);
      addSpan(store, rank, "comm:world", "collective", "allreduce", begin, end,
              {{"bytes", 4 << 20}, {"seq", seq}, {"group_rank", rank}, {"group_size", 2}},
              {{"group", "world"}});
    }
  }
  store.finalize();
}

}  // namespace ringx::model::testing
