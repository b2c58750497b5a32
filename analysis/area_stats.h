// Statistics of an area of the timeline: the spans of chosen tracks (or every track) that overlap
// a time range (or the whole trace), grouped by what a person asks ("bucket 3 on ranks 0-7, in
// steps 40-60" is an area grouped by bucket), as Perfetto's area selection and pivot tables and
// Tracy's time-limited statistics answer it. A span that sticks out of the range counts whole,
// as statsForRange counts it (a selection never changes a collective's time).
//
// Per group: count, failed, total, self time (the span's time less its children's: the spans one
// level deeper on its track inside it), mean, p50, p99 (nearest rank), max, bytes (the "bytes"
// arguments) and bus bandwidth (the median over spans with bytes, figures.h).
#pragma once

#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "analysis/trace_analyses.h"
#include "base/delimited_text.h"

namespace ringx::analysis {

// The tracks of an area: (rank, index in RankData::tracks); empty: every track.
struct Area {
  std::vector<std::pair<int32_t, uint32_t>> tracks;
  int64_t t0 = std::numeric_limits<int64_t>::min();
  int64_t t1 = std::numeric_limits<int64_t>::max();
};

enum class AreaGroupBy { kName, kTrack, kRank, kGroup, kBucketOrUnit, kOp, kSizeClass };
inline constexpr AreaGroupBy kAllAreaGroupings[] = {
    AreaGroupBy::kName,         AreaGroupBy::kTrack, AreaGroupBy::kRank,     AreaGroupBy::kGroup,
    AreaGroupBy::kBucketOrUnit, AreaGroupBy::kOp,    AreaGroupBy::kSizeClass};
const char* areaGroupByName(AreaGroupBy by);  // "name", "track", "rank", "group", ...

struct AreaRow {
  std::string key;  // the group: a name, "comm:world", "rank 3", "bucket 2", "64 KiB-256 KiB"
  uint64_t count = 0;
  uint64_t failed = 0;
  int64_t totalNs = 0, selfNs = 0, meanNs = 0, p50Ns = 0, p99Ns = 0, maxNs = 0;
  int64_t bytes = 0;
  double busbwGBps = 0;
};

// Rows by total time, largest first (ties by key).
std::vector<AreaRow> areaStats(const TraceStore& store, const Area& area, AreaGroupBy by);

// Durations on a log scale, as Tracy's find-zone histogram shows them: `binsPerDecade` bins per
// factor of ten, from the shortest span to the longest, over the spans named `nameId` (0: every
// span) in the area. A bin is [lowNs, highNs); the last one's high end is past the longest.
struct DurationBin {
  int64_t lowNs = 0, highNs = 0;
  uint64_t count = 0;
};
struct DurationHistogram {
  std::vector<DurationBin> bins;  // empty: no span
  uint64_t spans = 0;
  int64_t minNs = 0, maxNs = 0;
};
DurationHistogram durationHistogram(const TraceStore& store, const Area& area, uint32_t nameId,
                                    int binsPerDecade = 10);
// The spans of a histogram's bin [lowNs, highNs), the longest first, at most `limit`.
std::vector<SpanRef> spansWithDuration(const TraceStore& store, const Area& area, uint32_t nameId,
                                       int64_t lowNs, int64_t highNs, size_t limit);

// The rows as delimited text, a header first (times in ns): what the panel copies.
void writeAreaTable(const std::vector<AreaRow>& rows, AreaGroupBy by, std::ostream& out,
                    Delimiter delimiter);

}  // namespace ringx::analysis
