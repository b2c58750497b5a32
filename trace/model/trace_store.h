// The viewer's trace store: every rank's events on one aligned clock, indexed
// for drawing a million events per frame. No ImGui here (Tracy's Worker/View
// split): the model builds and is tested without a window.
//
// Layout. A store has ranks; a rank has tracks (lanes: "compute", "comm:world",
// "ddp:bucket3", "fsdp:layers.0", ...) and counter series ("rss_bytes", ...).
// A track keeps its spans in *levels*: spans are sorted by begin and each is put
// on the first level whose last span has ended (interval partitioning), so
// nested spans stack (a bucket inside a backward) and, within one level, spans
// never overlap. That makes every level sorted by begin *and* by end, so the
// visible part of a level is found by binary search, and a run of spans too
// narrow to see is skipped by binary search as well (visitLevel below): a frame
// costs O(pixels x log n), not O(n).
//
// Times are nanoseconds on rank 0's clock (ringx streams are aligned with their
// clock sync records when ingested; Chrome traces are taken as they are).
//
// Building: add spans, instants and counter samples in any order, then
// finalize(); adding more later (live streams) and finalizing again re-sorts only
// the tracks that changed.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ringx::trace {
struct TorchFlightSet;
}

namespace ringx::model {

class AggregateLanes;

// Interned strings shared by every rank of a store (names, tracks, arg keys and
// string values). Id 0 is "". Every call may come from any thread (the parallel
// load's workers intern while the window draws); a view stays valid for the
// pool's life.
class StringPool {
 public:
  StringPool();
  uint32_t intern(std::string_view text);
  // The id of `text`, or 0 when it was never interned.
  uint32_t find(std::string_view text) const;
  std::string_view str(uint32_t id) const {
    std::lock_guard<std::mutex> lock(lock_.mutex);
    return id < strings_.size() ? std::string_view(strings_[id]) : std::string_view();
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(lock_.mutex);
    return strings_.size();
  }

 private:
  std::deque<std::string> strings_;  // a deque keeps the views in ids_ valid
  std::unordered_map<std::string_view, uint32_t> ids_;
  // A pool moves with its strings; the lock stays behind (a moved pool is not shared yet).
  struct Lock {
    std::mutex mutex;
    Lock() = default;
    Lock(Lock&&) noexcept {}
    Lock& operator=(Lock&&) noexcept { return *this; }
  };
  mutable Lock lock_;
};

enum class ArgKind : uint8_t { kInt, kDouble, kString };

// One argument of an event; key (and a string value) are StringPool ids.
struct ArgValue {
  uint32_t key = 0;
  ArgKind kind = ArgKind::kInt;
  union {
    int64_t intValue;
    double doubleValue;
    uint32_t stringId;
  };
  ArgValue() : intValue(0) {}
  static ArgValue ofInt(uint32_t key, int64_t v);
  static ArgValue ofDouble(uint32_t key, double v);
  static ArgValue ofString(uint32_t key, uint32_t id);
};

// A span on a track: [begin, end] in aligned ns. Its argCount args are packed
// in RankData::argBytes from byte firstArg on (read them with ArgList).
struct Span {
  int64_t begin = 0;
  int64_t end = 0;
  uint32_t name = 0;
  uint32_t firstArg = 0;
  uint16_t argCount = 0;
  uint8_t category = 0;  // TraceStore::categories() index
  uint8_t flags = 0;     // kSpanFailed, ...
  int64_t duration() const { return end - begin; }
};
static_assert(sizeof(Span) == 32, "a span is 32 bytes: 10M events must fit in memory");
inline constexpr uint8_t kSpanFailed = 1;  // carries an "error" argument

struct Instant {
  int64_t time = 0;
  uint32_t name = 0;
  uint32_t firstArg = 0;
  uint16_t argCount = 0;
  uint8_t category = 0;
};

// What a track is for: orders lanes within a rank and lets panels find theirs.
enum class TrackKind : uint8_t {
  kCompute,
  kComm,       // "comm:<group>"
  kDevice,     // "cuda:comm": what a device's stream ran for the collectives (their GPU time)
  kSteps,      // "steps"
  kDdp,        // "ddp": forward / backward / optimizer
  kDdpBucket,  // "ddp:bucket<N>"
  kFsdp,       // "fsdp": forward / backward / optimizer
  kFsdpUnit,   // "fsdp:<unit>"
  kUser,
  kOther,  // anything else (Chrome traces' threads)
};
TrackKind classifyTrack(std::string_view name);

struct Track {
  uint32_t name = 0;
  TrackKind kind = TrackKind::kOther;
  std::vector<std::vector<Span>> levels;  // level -> spans sorted by begin, disjoint
  // level -> busy[k] = summed durations of levels[level][0, k * kBusyStride): how
  // much of a folded block's time its spans cover, in O(kBusyStride) per block
  // (busyNs) for half a byte per span.
  std::vector<std::vector<int64_t>> busy;
  std::vector<Instant> instants;  // sorted by time
  uint64_t spanCount = 0;
  // Spans and instants added since the last finalize().
  std::vector<Span> pendingSpans;
  std::vector<Instant> pendingInstants;
};

// An arrow from one event to another, on any ranks: a Chrome trace's flow
// events ("s"/"t"/"f", or "bind_id" with "flow_out"/"flow_in"), such as the
// profiler's CPU-to-GPU launch links. Ends name their track (a StringPool id,
// stable across finalize(), which reorders tracks) and a time on it.
struct FlowEnd {
  int32_t rank = 0;
  uint32_t track = 0;
  int64_t time = 0;
};
struct Flow {
  FlowEnd from;
  FlowEnd to;
  uint32_t name = 0;
};

struct CounterSeries {
  uint32_t name = 0;
  std::vector<int64_t> times;  // sorted
  std::vector<double> values;
  double maxValue = 0;
  int64_t maxTime = 0;  // first time the maximum was reached
  bool dirty = false;
};

struct RankData {
  int32_t rank = 0;
  std::string host;
  int64_t pid = 0;
  int64_t worldSize = 0;      // the job's, where the file says it (Kineto's distributedInfo)
  std::string source;         // file or HOST:PORT
  std::vector<Track> tracks;  // in display order after finalize()
  std::vector<CounterSeries> counters;
  // Every event's args, packed (see ArgList): about 3 bytes per argument, not the
  // 16 of an ArgValue, which is what keeps an event under 64 bytes.
  std::vector<uint8_t> argBytes;
  bool truncated = false;    // the file was cut off inside a record
  bool clockAligned = true;  // false: no clock samples and not the reference
  int64_t clockUncertaintyNs = 0;
  // ringx streams only: the clock the others align to, and this rank's offset
  // to it at its first event (clockKnown is false for other producers' files).
  bool clockKnown = false;
  bool clockReference = false;
  int64_t clockOffsetNs = 0;
  uint64_t dropped = 0;
  uint64_t events = 0;
  // False for a rank of a trace opened as an index (loader.h): its name, host,
  // file (source), event count and extent are known, its events not yet.
  bool eventsLoaded = true;
  // A rank of a live attach followed through its SUMMARY stream (live_source.h):
  // its collectives and steps are here, its compute, engine and user events and
  // its counters are not (so no compute share can be told for it).
  bool summaryOnly = false;
  // Earliest begin and latest end of the rank's events (finalize(); 0, 0 when none).
  int64_t beginNs = 0;
  int64_t endNs = 0;
  // A ringx stream's clock reference: aligned time = Unix-epoch ns +
  // wallToAlignedNs (from the (steady, wall) pair its header took at start).
  // Other producers' files on this rank (the profiler's) align through it.
  bool hasWallClock = false;
  int64_t wallToAlignedNs = 0;

  // Index of the track named `name` (a StringPool id), or -1.
  int findTrack(uint32_t name) const;
  const CounterSeries* findCounter(uint32_t name) const;
};

// An event's arguments, unpacked from the rank's argBytes. Packed, an argument is
// a varint of (key << 2 | kind) and then its value: a zigzag varint (int), 8
// bytes (double) or a varint (string id). A list lives on the stack; events with
// more than kInline args spill to the heap.
class ArgList {
 public:
  static constexpr size_t kInline = 24;
  ArgList(const RankData& rank, uint32_t first, uint16_t count);
  template <typename Event>
  ArgList(const RankData& rank, const Event& event)
      : ArgList(rank, event.firstArg, event.argCount) {}
  ArgList(const ArgList&) = delete;
  ArgList& operator=(const ArgList&) = delete;

  const ArgValue* begin() const { return data_; }
  const ArgValue* end() const { return data_ + size_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const ArgValue& operator[](size_t i) const { return data_[i]; }
  // The argument with key id `key`, or nullptr (also for key 0).
  const ArgValue* find(uint32_t key) const;

 private:
  ArgValue inline_[kInline];
  std::vector<ArgValue> heap_;
  const ArgValue* data_ = inline_;
  size_t size_ = 0;
};

// Appends `count` packed arguments to `bytes`.
void packArgs(std::vector<uint8_t>& bytes, const ArgValue* args, size_t count);

// One level's spans between t0 and t1, with runs of spans narrower than minNs
// folded into one item (count > 1).
struct LevelItem {
  int64_t begin = 0;
  int64_t end = 0;
  uint32_t first = 0;  // index of the first span in the level
  uint32_t count = 1;  // spans covered: > 1 is a folded "N events" block
};

class TraceStore {
 public:
  TraceStore();

  StringPool& strings() { return strings_; }
  const StringPool& strings() const { return strings_; }
  std::string_view str(uint32_t id) const { return strings_.str(id); }

  // ---- building -------------------------------------------------------------
  // The rank's data, created when new (ranks stay sorted; references stay valid
  // until the next call that creates a rank).
  RankData& rank(int32_t rank);
  // The track's index in ranks' tracks, created when new.
  uint32_t track(RankData& rank, std::string_view name);
  // A category's index (0..255; names past 255 share the last index).
  uint8_t category(std::string_view name);
  // Packs args into the rank's argBytes and returns where they start (an event's firstArg).
  uint32_t addArgs(RankData& rank, const ArgValue* args, size_t count);
  void addSpan(RankData& rank, uint32_t track, const Span& span);
  void addInstant(RankData& rank, uint32_t track, const Instant& instant);
  void addCounter(RankData& rank, std::string_view name, int64_t time, double value);
  void addFlow(const Flow& flow);
  void addWarning(std::string warning) { warnings_.push_back(std::move(warning)); }
  // Sorts what was added, assigns levels, orders tracks, updates bounds.
  void finalize();

  // ---- building ranks in parallel ---------------------------------------------
  // A worker thread may build a RankData of its own with addArgs/track/addSpan/
  // addInstant/addCounter (they touch only that rank and the string pool), sort
  // it with sortRank() (the heavy part of finalize()), and hand it over with
  // adoptRank() under the caller's lock. category() must only find categories
  // registered before the workers start.
  static void sortRank(RankData& rank);
  // Sets a sorted rank's beginNs/endNs from its spans, instants and counter
  // samples (0, 0 and false when it has none).
  static bool measureExtent(RankData& rank);
  // Gives back what the rank's vectors hold beyond their size (a loaded rank
  // that will not grow; a live one would pay a copy on every finalize()).
  static void compactRank(RankData& rank);
  // Moves `rank` into the store; a rank already present gets its events added
  // (or, when it was a placeholder without events, is replaced).
  void adoptRank(RankData&& rank);

  // ---- reading --------------------------------------------------------------
  const std::vector<RankData>& ranks() const { return ranks_; }
  const RankData* findRank(int32_t rank) const;
  // Every rank's number (RankData::rank), ascending.
  std::vector<int32_t> rankNumbers() const;
  const std::vector<std::string>& categories() const { return categories_; }
  // The index of the category named `name`, or -1 when no event has it.
  int findCategory(std::string_view name) const;
  const std::vector<std::string>& warnings() const { return warnings_; }
  // Sorted by the time of their start.
  const std::vector<Flow>& flows() const { return flows_; }
  uint64_t eventCount() const { return events_; }  // as of the last finalize()
  bool empty() const { return events_ == 0; }
  // Earliest begin and latest end of any event (0, 0 when empty).
  int64_t beginNs() const { return begin_; }
  int64_t endNs() const { return end_; }
  // Bumped by every finalize() that changed something (views cache on it).
  uint64_t generation() const { return generation_; }

  // An argument of an event by key text (ArgList::find by id is the fast way).
  std::optional<ArgValue> findArg(const RankData& rank, uint32_t first, uint16_t count,
                                  std::string_view key) const;
  int64_t intArg(const RankData& rank, const Span& span, std::string_view key,
                 int64_t fallback = -1) const;
  std::string_view stringArg(const RankData& rank, const Span& span, std::string_view key) const;
  // An argument's value as text.
  std::string argText(const ArgValue& arg) const;

  // Approximate bytes held (for the 10M-event report).
  size_t memoryBytes() const;

  // Aggregate lanes (aggregate_lanes.h) built for the store as it is now, or
  // null (none built, or built before the last finalize() that changed it).
  const AggregateLanes* aggregates() const;
  void setAggregates(std::shared_ptr<const AggregateLanes> lanes) {
    aggregates_ = std::move(lanes);
  }

  // The torch Flight Recorder dumps the store holds the entries of (torch_flight_ingest.h), for
  // what the hang report says of them (the collectives panel); null when it holds none.
  const trace::TorchFlightSet* torchFlight() const { return torchFlight_.get(); }
  void setTorchFlight(std::shared_ptr<const trace::TorchFlightSet> set) {
    torchFlight_ = std::move(set);
  }

 private:
  StringPool strings_;
  std::vector<std::string> categories_;
  std::vector<RankData> ranks_;
  std::vector<std::string> warnings_;
  std::vector<Flow> flows_;
  void markDirty() {
    if (!dirty_.value.load(std::memory_order_relaxed))
      dirty_.value.store(true, std::memory_order_relaxed);
  }
  std::shared_ptr<const AggregateLanes> aggregates_;
  std::shared_ptr<const trace::TorchFlightSet> torchFlight_;
  uint64_t events_ = 0;  // summed over ranks by finalize()
  int64_t begin_ = 0;
  int64_t end_ = 0;
  uint64_t generation_ = 0;
  // Set by adds from any worker; read by finalize() after they are done.
  struct Flag {
    std::atomic<bool> value{false};
    Flag() = default;
    Flag(Flag&& o) noexcept : value(o.value.load()) {}
    Flag& operator=(Flag&& o) noexcept {
      value = o.value.load();
      return *this;
    }
  };
  Flag dirty_;
};

// The time the spans of a drawn item cover (a level's spans are disjoint, so
// this over the item's extent is its busy fraction): O(1) with Track::busy.
inline constexpr size_t kBusyStride = 16;
inline int64_t busyPrefixNs(const Track& track, size_t level, size_t spans) {
  const std::vector<Span>& l = track.levels[level];
  const size_t block = spans / kBusyStride;
  int64_t sum = track.busy[level][block];
  for (size_t i = block * kBusyStride; i < spans; ++i) sum += l[i].duration();
  return sum;
}
inline int64_t busyNs(const Track& track, size_t level, const LevelItem& item) {
  return busyPrefixNs(track, level, item.first + item.count) -
         busyPrefixNs(track, level, item.first);
}

// Visits the spans of `level` that intersect [t0, t1]: f(const LevelItem&).
// Spans shorter than minNs are folded with their neighbours: a run of spans each
// narrower than minNs, whose gaps are narrower than minNs too, becomes one item.
// Costs O(items x log n).
template <typename F>
void visitLevel(const std::vector<Span>& level, int64_t t0, int64_t t1, int64_t minNs, F&& f) {
  const size_t n = level.size();
  // The first span ending at or after t0 (ends are sorted within a level).
  size_t i = std::lower_bound(level.begin(), level.end(), t0,
                              [](const Span& s, int64_t t) { return s.end < t; }) -
             level.begin();
  auto firstBeginAtOrAfter = [&](size_t from, int64_t t) {
    return static_cast<size_t>(
        std::lower_bound(level.begin() + from, level.end(), t,
                         [](const Span& s, int64_t v) { return s.begin < v; }) -
        level.begin());
  };
  while (i < n && level[i].begin <= t1) {
    const Span& s = level[i];
    if (s.end - s.begin >= minNs) {
      f(LevelItem{s.begin, s.end, static_cast<uint32_t>(i), 1});
      ++i;
      continue;
    }
    LevelItem item{s.begin, s.end, static_cast<uint32_t>(i), 0};
    size_t j = i;
    // Extend the block a pixel at a time (in time, minNs) while the next span is
    // narrow and starts close to the block's end.
    while (j < n && level[j].end - level[j].begin < minNs && level[j].begin - item.end < minNs) {
      size_t next = std::max(j + 1, firstBeginAtOrAfter(j + 1, level[j].begin + minNs));
      // Only the last span of a jump can be wide (spans in a level are disjoint).
      if (next - 1 > j && level[next - 1].end - level[next - 1].begin >= minNs) --next;
      item.end = std::max(item.end, level[next - 1].end);
      j = next;
      if (level[j - 1].begin > t1) break;
    }
    item.count = static_cast<uint32_t>(j - i);
    f(item);
    i = j;
  }
}

// Counter samples reduced to one min/max pair per pixel column.
struct CounterColumn {
  double min = 0;
  double max = 0;
  bool valid = false;  // no sample at or before this column
};
// Columns of width (t1 - t0) / columns; a column without samples repeats the
// value in force (counters are step functions).
std::vector<CounterColumn> decimateCounter(const CounterSeries& series, int64_t t0, int64_t t1,
                                           int columns);

}  // namespace ringx::model
