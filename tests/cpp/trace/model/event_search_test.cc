// Event search: names and string argument values by substring, ignoring case;
// numbers against integer arguments; key=value; instants; matches in time
// order; a scan in small budgets finds what one pass finds; a store that
// changes (a live job) or another store starts the scan over.
#include "trace/model/event_search.h"

#include <gtest/gtest.h>

#include "tests/cpp/trace/model/sample_store.h"

namespace ringx::model {
namespace {

using testing::kMs;

std::vector<std::string> namesOf(const TraceStore& store, const EventSearch& search) {
  std::vector<std::string> out;
  for (const SearchMatch& m : search.matches()) {
    const Track& t = store.findRank(m.rank)->tracks[size_t(m.track)];
    out.emplace_back(store.str(m.level >= 0 ? t.levels[size_t(m.level)][m.index].name
                                            : t.instants[m.index].name));
  }
  return out;
}

size_t count(TraceStore& store, std::string_view query) {
  EventSearch search;
  search.start(store, query);
  search.finish(store);
  return search.matches().size();
}

TEST(EventSearch, FindsNamesAndArgumentValuesInTimeOrder) {
  TraceStore store;
  testing::fillSampleStore(store);  // 2 ranks x 4 iterations
  EventSearch search;
  search.start(store, "AllReduce");  // case does not matter
  EXPECT_FALSE(search.done());
  EXPECT_TRUE(search.advance(store, SIZE_MAX));
  ASSERT_EQ(search.matches().size(), 16u);  // 2 ranks x 4 iterations x 2 buckets
  for (size_t i = 1; i < search.matches().size(); ++i)
    EXPECT_LE(search.matches()[i - 1].begin, search.matches()[i].begin);
  for (const std::string& name : namesOf(store, search)) EXPECT_EQ(name, "allreduce");
  // String argument values: dtype "float32" is only on the allreduces.
  EXPECT_EQ(count(store, "float3"), 16u);
  // "forward" names DDP's and FSDP's forward spans, and is the FSDP all_gather's
  // phase argument.
  EXPECT_EQ(count(store, "forward"), 8u + 8u + 8u);
  // key=value: only that argument; numbers equal, strings contain.
  EXPECT_EQ(count(store, "seq=5"), 2u);
  EXPECT_EQ(count(store, " seq = 5 "), 2u);
  EXPECT_EQ(count(store, "phase=forw"), 8u);
  EXPECT_EQ(count(store, "bucket=1"), 8u);
  EXPECT_EQ(count(store, "prefetched="), 8u);  // any value
  EXPECT_EQ(count(store, "nosuchkey=1"), 0u);
  // A bare number: integer arguments equal to it (seq 7, step 7: none, bucket 7: none).
  EXPECT_EQ(count(store, "7"), 2u);
  EXPECT_EQ(count(store, "no such thing"), 0u);
  EXPECT_EQ(count(store, ""), 0u);
}

TEST(EventSearch, NextAndPreviousPositionsWrapAroundTheTrace) {
  TraceStore store;
  testing::fillSampleStore(store);
  EventSearch search;
  search.start(store, "optimizer");  // at 8, 8.5, 18, 18.5, ... ms
  search.finish(store);
  ASSERT_EQ(search.matches().size(), 8u);
  EXPECT_EQ(search.firstAtOrAfter(0), 0);
  EXPECT_EQ(search.firstAtOrAfter(8 * kMs + 1), 1);
  EXPECT_EQ(search.firstAtOrAfter(100 * kMs), 0);  // past the last: wraps
  EXPECT_EQ(search.lastAtOrBefore(100 * kMs), 7);
  EXPECT_EQ(search.lastAtOrBefore(18 * kMs), 2);
  EXPECT_EQ(search.lastAtOrBefore(0), 7);  // before the first: wraps
}

TEST(EventSearch, ASmallBudgetFindsWhatOnePassFindsAndInstantsMatchToo) {
  TraceStore store;
  testing::fillSampleStore(store, 20);
  RankData& r = store.rank(1);
  Instant mark;
  mark.time = 55 * kMs;
  mark.name = store.strings().intern("checkpoint");
  store.addInstant(r, store.track(r, "steps"), mark);
  store.finalize();
  EventSearch whole, sliced;
  whole.start(store, "e");  // most names
  whole.finish(store);
  sliced.start(store, "e");
  int calls = 1;
  while (!sliced.advance(store, 7)) ++calls;
  EXPECT_GT(calls, 50);
  EXPECT_EQ(sliced.scanned(), store.eventCount() - 8 * 20);  // counters are not events to find
  ASSERT_EQ(sliced.matches().size(), whole.matches().size());
  for (size_t i = 0; i < whole.matches().size(); ++i) {
    EXPECT_EQ(sliced.matches()[i].begin, whole.matches()[i].begin);
    EXPECT_EQ(sliced.matches()[i].index, whole.matches()[i].index);
  }
  EventSearch instant;
  instant.start(store, "checkpoint");
  instant.finish(store);
  ASSERT_EQ(instant.matches().size(), 1u);
  EXPECT_EQ(instant.matches()[0].level, -1);
  EXPECT_EQ(instant.matches()[0].begin, 55 * kMs);
}

TEST(EventSearch, AChangedStoreIsScannedAgain) {
  TraceStore store;
  testing::fillSampleStore(store, 2);
  EventSearch search;
  search.start(store, "allreduce");
  search.finish(store);
  EXPECT_EQ(search.matches().size(), 8u);
  const uint64_t restarts = search.restarts();
  testing::addSpan(store, 0, "comm:world", "collective", "allreduce", 90 * kMs, 91 * kMs);
  store.finalize();
  EXPECT_FALSE(search.advance(store, 1));  // starts over
  EXPECT_GT(search.restarts(), restarts);
  search.finish(store);
  EXPECT_EQ(search.matches().size(), 9u);
  TraceStore other;
  testing::fillSampleStore(other, 1);
  search.finish(other);
  EXPECT_EQ(search.matches().size(), 4u);
}

}  // namespace
}  // namespace ringx::model
