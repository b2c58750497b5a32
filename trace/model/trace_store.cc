// The trace store (see trace_store.h): building, level assignment and lookups.
#include "trace/model/trace_store.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <limits>

#include "base/release.h"
#include "base/text.h"
#include "trace/model/aggregate_lanes.h"

namespace ringx::model {

StringPool::StringPool() { intern(""); }

uint32_t StringPool::intern(std::string_view text) {
  std::lock_guard<std::mutex> lock(lock_.mutex);
  auto it = ids_.find(text);
  if (it != ids_.end()) return it->second;
  strings_.emplace_back(text);
  const uint32_t id = static_cast<uint32_t>(strings_.size() - 1);
  ids_.emplace(std::string_view(strings_.back()), id);
  return id;
}

uint32_t StringPool::find(std::string_view text) const {
  std::lock_guard<std::mutex> lock(lock_.mutex);
  auto it = ids_.find(text);
  return it == ids_.end() ? 0 : it->second;
}

ArgValue ArgValue::ofInt(uint32_t key, int64_t v) {
  ArgValue a;
  a.key = key;
  a.kind = ArgKind::kInt;
  a.intValue = v;
  return a;
}
ArgValue ArgValue::ofDouble(uint32_t key, double v) {
  ArgValue a;
  a.key = key;
  a.kind = ArgKind::kDouble;
  a.doubleValue = v;
  return a;
}
ArgValue ArgValue::ofString(uint32_t key, uint32_t id) {
  ArgValue a;
  a.key = key;
  a.kind = ArgKind::kString;
  a.stringId = id;
  return a;
}

TrackKind classifyTrack(std::string_view name) {
  if (name == "compute") return TrackKind::kCompute;
  if (startsWith(name, "comm:")) return TrackKind::kComm;
  if (startsWith(name, "cuda:")) return TrackKind::kDevice;
  if (name == "steps") return TrackKind::kSteps;
  if (name == "ddp") return TrackKind::kDdp;
  if (startsWith(name, "ddp:bucket")) return TrackKind::kDdpBucket;
  if (name == "fsdp") return TrackKind::kFsdp;
  if (startsWith(name, "fsdp:")) return TrackKind::kFsdpUnit;
  if (name == "user") return TrackKind::kUser;
  return TrackKind::kOther;
}

int RankData::findTrack(uint32_t name) const {
  for (size_t i = 0; i < tracks.size(); ++i)
    if (tracks[i].name == name) return static_cast<int>(i);
  return -1;
}

const CounterSeries* RankData::findCounter(uint32_t name) const {
  for (const auto& c : counters)
    if (c.name == name) return &c;
  return nullptr;
}

TraceStore::TraceStore() { category("other"); }

RankData& TraceStore::rank(int32_t rank) {
  auto it = std::lower_bound(ranks_.begin(), ranks_.end(), rank,
                             [](const RankData& r, int32_t v) { return r.rank < v; });
  if (it != ranks_.end() && it->rank == rank) return *it;
  RankData data;
  data.rank = rank;
  return *ranks_.insert(it, std::move(data));
}

uint32_t TraceStore::track(RankData& rank, std::string_view name) {
  const uint32_t id = strings_.intern(name);
  const int found = rank.findTrack(id);
  if (found >= 0) return static_cast<uint32_t>(found);
  Track t;
  t.name = id;
  t.kind = classifyTrack(name);
  rank.tracks.push_back(std::move(t));
  return static_cast<uint32_t>(rank.tracks.size() - 1);
}

std::vector<int32_t> TraceStore::rankNumbers() const {
  std::vector<int32_t> out;
  out.reserve(ranks_.size());
  for (const RankData& r : ranks_) out.push_back(r.rank);
  return out;
}

int TraceStore::findCategory(std::string_view name) const {
  for (size_t i = 0; i < categories_.size(); ++i)
    if (categories_[i] == name) return static_cast<int>(i);
  return -1;
}

uint8_t TraceStore::category(std::string_view name) {
  if (const int i = findCategory(name); i >= 0) return static_cast<uint8_t>(i);
  if (categories_.size() >= 255) return 254;
  categories_.emplace_back(name);
  return static_cast<uint8_t>(categories_.size() - 1);
}

namespace {
void putVarint(std::vector<uint8_t>& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(uint8_t(v) | 0x80);
    v >>= 7;
  }
  out.push_back(uint8_t(v));
}
uint64_t getVarint(const uint8_t*& p, const uint8_t* end) {
  uint64_t v = 0;
  for (int shift = 0; p < end && shift < 64; shift += 7) {
    const uint8_t b = *p++;
    v |= uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) break;
  }
  return v;
}
}  // namespace

void packArgs(std::vector<uint8_t>& bytes, const ArgValue* args, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const ArgValue& a = args[i];
    putVarint(bytes, uint64_t(a.key) << 2 | uint64_t(a.kind));
    switch (a.kind) {
      case ArgKind::kInt:
        putVarint(bytes, (uint64_t(a.intValue) << 1) ^ uint64_t(a.intValue >> 63));
        break;
      case ArgKind::kDouble: {
        uint8_t raw[8];
        std::memcpy(raw, &a.doubleValue, 8);
        bytes.insert(bytes.end(), raw, raw + 8);
        break;
      }
      case ArgKind::kString:
        putVarint(bytes, a.stringId);
        break;
    }
  }
}

ArgList::ArgList(const RankData& rank, uint32_t first, uint16_t count) {
  const uint8_t* p = rank.argBytes.data() + std::min<size_t>(first, rank.argBytes.size());
  const uint8_t* end = rank.argBytes.data() + rank.argBytes.size();
  if (count > kInline) {
    heap_.resize(count);
    data_ = heap_.data();
  }
  ArgValue* out = const_cast<ArgValue*>(data_);
  for (size_t i = 0; i < count && p < end; ++i) {
    const uint64_t head = getVarint(p, end);
    ArgValue a;
    a.key = uint32_t(head >> 2);
    a.kind = ArgKind(head & 3);
    switch (a.kind) {
      case ArgKind::kInt: {
        const uint64_t z = getVarint(p, end);
        a.intValue = int64_t(z >> 1) ^ -int64_t(z & 1);
        break;
      }
      case ArgKind::kDouble:
        if (end - p < 8) return;
        std::memcpy(&a.doubleValue, p, 8);
        p += 8;
        break;
      case ArgKind::kString:
        a.stringId = uint32_t(getVarint(p, end));
        break;
      default:
        return;  // not packed by packArgs: stop rather than misread
    }
    out[size_++] = a;
  }
}

const ArgValue* ArgList::find(uint32_t key) const {
  if (key == 0) return nullptr;
  for (const ArgValue& a : *this)
    if (a.key == key) return &a;
  return nullptr;
}

uint32_t TraceStore::addArgs(RankData& rank, const ArgValue* args, size_t count) {
  const uint32_t first = static_cast<uint32_t>(rank.argBytes.size());
  packArgs(rank.argBytes, args, count);
  return first;
}

void TraceStore::addSpan(RankData& rank, uint32_t track, const Span& span) {
  Span s = span;
  if (s.end < s.begin) s.end = s.begin;
  rank.tracks[track].pendingSpans.push_back(s);
  ++rank.events;
  markDirty();
}

void TraceStore::addInstant(RankData& rank, uint32_t track, const Instant& instant) {
  rank.tracks[track].pendingInstants.push_back(instant);
  ++rank.events;
  markDirty();
}

void TraceStore::addFlow(const Flow& flow) {
  flows_.push_back(flow);
  markDirty();
}

void TraceStore::addCounter(RankData& rank, std::string_view name, int64_t time, double value) {
  const uint32_t id = strings_.intern(name);
  CounterSeries* series = nullptr;
  for (auto& c : rank.counters)
    if (c.name == id) series = &c;
  if (!series) {
    rank.counters.emplace_back();
    series = &rank.counters.back();
    series->name = id;
  }
  if (!series->times.empty() && time < series->times.back()) series->dirty = true;
  // The peak is kept as samples arrive (the earliest time on ties, whatever the
  // arrival order), so finalize() need not rescan every series of a live job.
  if (series->times.empty() || value > series->maxValue ||
      (value == series->maxValue && time < series->maxTime)) {
    series->maxValue = value;
    series->maxTime = time;
  }
  series->times.push_back(time);
  series->values.push_back(value);
  ++rank.events;
  markDirty();
}

namespace {

// Parents before their children: earlier begin first, longer first on ties.
bool parentsFirst(const Span& a, const Span& b) {
  return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
}

// Puts each span (in parentsFirst order, after every span already placed) on
// the first level whose last span has ended by its begin.
void placeOnLevels(Track& track, const std::vector<Span>& sorted) {
  if (track.levels.empty()) {
    // A fresh layout: find each level's size first, so that every level is
    // allocated once at its size (vectors grown by doubling hold up to twice
    // their spans, which at 32 B a span is most of an event's memory).
    std::vector<int64_t> lastEnd;
    std::vector<size_t> sizes;
    for (const Span& s : sorted) {
      size_t level = 0;
      while (level < lastEnd.size() && lastEnd[level] > s.begin) ++level;
      if (level == lastEnd.size()) {
        lastEnd.push_back(s.end);
        sizes.push_back(0);
      }
      lastEnd[level] = s.end;
      ++sizes[level];
    }
    track.levels.resize(sizes.size());
    for (size_t l = 0; l < sizes.size(); ++l) track.levels[l].reserve(sizes[l]);
  }
  for (const Span& s : sorted) {
    size_t level = 0;
    while (level < track.levels.size() && !track.levels[level].empty() &&
           track.levels[level].back().end > s.begin)
      ++level;
    if (level == track.levels.size()) track.levels.emplace_back();
    track.levels[level].push_back(s);
  }
}

// Adds a track's pending spans to its levels. When they all begin after every
// span already there (a live stream's usual case) they are placed after them,
// which is what sorting everything again would give; otherwise the track is
// sorted and laid out anew.
void addPendingSpans(Track& track) {
  std::vector<Span> pending;
  pending.swap(track.pendingSpans);
  std::sort(pending.begin(), pending.end(), parentsFirst);
  int64_t lastBegin = std::numeric_limits<int64_t>::min();
  for (const auto& level : track.levels) lastBegin = std::max(lastBegin, level.back().begin);
  track.spanCount += pending.size();
  if (pending.front().begin > lastBegin) {
    placeOnLevels(track, pending);
  } else {
    std::vector<Span> all;
    all.reserve(track.spanCount);
    for (auto& level : track.levels) all.insert(all.end(), level.begin(), level.end());
    all.insert(all.end(), pending.begin(), pending.end());
    std::sort(all.begin(), all.end(), parentsFirst);
    track.levels.clear();
    track.busy.clear();
    placeOnLevels(track, all);
  }
  // Busy-time prefix sums, one per kBusyStride spans: appended spans extend
  // them, a new layout rebuilds them.
  track.busy.resize(track.levels.size());
  for (size_t l = 0; l < track.levels.size(); ++l) {
    std::vector<int64_t>& busy = track.busy[l];
    const std::vector<Span>& level = track.levels[l];
    if (busy.empty()) busy.push_back(0);
    for (size_t k = busy.size(); k <= level.size() / kBusyStride; ++k) {
      int64_t sum = busy.back();
      for (size_t i = (k - 1) * kBusyStride; i < k * kBusyStride; ++i) sum += level[i].duration();
      busy.push_back(sum);
    }
  }
}

int trackOrder(TrackKind kind) {
  switch (kind) {
    case TrackKind::kSteps:
      return 0;
    case TrackKind::kCompute:
      return 1;
    case TrackKind::kComm:
    case TrackKind::kDevice:  // the GPU side of the collectives, right below their host side
      return 2;
    case TrackKind::kDdp:
      return 3;
    case TrackKind::kDdpBucket:
      return 4;
    case TrackKind::kFsdp:
      return 5;
    case TrackKind::kFsdpUnit:
      return 6;
    case TrackKind::kUser:
      return 7;
    case TrackKind::kOther:
      return 8;
  }
  return 9;
}

// Natural order: "ddp:bucket2" before "ddp:bucket10".
bool naturalLess(std::string_view a, std::string_view b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const bool da = a[i] >= '0' && a[i] <= '9', db = b[j] >= '0' && b[j] <= '9';
    if (da && db) {
      size_t ie = i, je = j;
      while (ie < a.size() && a[ie] >= '0' && a[ie] <= '9') ++ie;
      while (je < b.size() && b[je] >= '0' && b[je] <= '9') ++je;
      if (ie - i != je - j) return ie - i < je - j;
      const int c = a.substr(i, ie - i).compare(b.substr(j, je - j));
      if (c != 0) return c < 0;
      i = ie;
      j = je;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

}  // namespace

void TraceStore::compactRank(RankData& rank) {
  rank.argBytes.shrink_to_fit();
  for (Track& track : rank.tracks) {
    track.pendingSpans.shrink_to_fit();
    track.instants.shrink_to_fit();
    for (auto& b : track.busy) b.shrink_to_fit();
  }
}

void TraceStore::sortRank(RankData& rank) {
  for (Track& track : rank.tracks) {
    if (!track.pendingSpans.empty()) addPendingSpans(track);
    if (!track.pendingInstants.empty()) {
      track.instants.insert(track.instants.end(), track.pendingInstants.begin(),
                            track.pendingInstants.end());
      releaseMemory(track.pendingInstants);
      std::stable_sort(track.instants.begin(), track.instants.end(),
                       [](const Instant& a, const Instant& b) { return a.time < b.time; });
    }
  }
  for (CounterSeries& c : rank.counters) {
    if (!c.dirty) continue;
    std::vector<size_t> order(c.times.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return c.times[a] < c.times[b]; });
    std::vector<int64_t> t(order.size());
    std::vector<double> v(order.size());
    for (size_t i = 0; i < order.size(); ++i) {
      t[i] = c.times[order[i]];
      v[i] = c.values[order[i]];
    }
    c.times.swap(t);
    c.values.swap(v);
    c.dirty = false;
  }
}

void TraceStore::adoptRank(RankData&& data) {
  markDirty();
  auto it = std::lower_bound(ranks_.begin(), ranks_.end(), data.rank,
                             [](const RankData& r, int32_t v) { return r.rank < v; });
  if (it == ranks_.end() || it->rank != data.rank) {
    ranks_.insert(it, std::move(data));
    return;
  }
  if (!it->eventsLoaded) {  // a placeholder: the events it stood for are here
    *it = std::move(data);
    return;
  }
  // The rank is here already (two inputs for one rank): add the events, with
  // their args moved behind the ones it holds.
  RankData& into = *it;
  const uint32_t argShift = static_cast<uint32_t>(into.argBytes.size());
  into.argBytes.insert(into.argBytes.end(), data.argBytes.begin(), data.argBytes.end());
  auto shifted = [&](auto event) {
    event.firstArg += argShift;
    return event;
  };
  for (Track& from : data.tracks) {
    Track& to = into.tracks[track(into, strings_.str(from.name))];
    for (const Span& s : from.pendingSpans) to.pendingSpans.push_back(shifted(s));
    for (const auto& level : from.levels)
      for (const Span& s : level) to.pendingSpans.push_back(shifted(s));
    for (const Instant& in : from.instants) to.pendingInstants.push_back(shifted(in));
    for (const Instant& in : from.pendingInstants) to.pendingInstants.push_back(shifted(in));
  }
  for (const CounterSeries& c : data.counters)
    for (size_t i = 0; i < c.times.size(); ++i) {
      addCounter(into, strings_.str(c.name), c.times[i], c.values[i]);
      --into.events;  // counted below with the rest
    }
  into.events += data.events;
  into.dropped += data.dropped;
  into.truncated |= data.truncated;
}

bool TraceStore::measureExtent(RankData& rank) {
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  for (const Track& track : rank.tracks) {
    for (const auto& level : track.levels) {
      if (level.empty()) continue;
      lo = std::min(lo, level.front().begin);
      hi = std::max(hi, level.back().end);
    }
    if (!track.instants.empty()) {
      lo = std::min(lo, track.instants.front().time);
      hi = std::max(hi, track.instants.back().time);
    }
  }
  for (const CounterSeries& c : rank.counters) {
    if (c.times.empty()) continue;
    lo = std::min(lo, c.times.front());
    hi = std::max(hi, c.times.back());
  }
  const bool recorded = lo <= hi;
  rank.beginNs = recorded ? lo : 0;  // nothing recorded: 0, 0
  rank.endNs = recorded ? hi : 0;
  return recorded;
}

void TraceStore::finalize() {
  if (!dirty_.value) return;
  dirty_.value = false;
  ++generation_;
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  events_ = 0;
  for (RankData& rank : ranks_) {
    events_ += rank.events;
    if (!rank.eventsLoaded) {  // its extent was taken when it was indexed
      if (rank.events > 0) {
        lo = std::min(lo, rank.beginNs);
        hi = std::max(hi, rank.endNs);
      }
      continue;
    }
    sortRank(rank);
    std::stable_sort(rank.tracks.begin(), rank.tracks.end(), [&](const Track& a, const Track& b) {
      const int oa = trackOrder(a.kind), ob = trackOrder(b.kind);
      if (oa != ob) return oa < ob;
      return naturalLess(strings_.str(a.name), strings_.str(b.name));
    });
    if (measureExtent(rank)) {
      lo = std::min(lo, rank.beginNs);
      hi = std::max(hi, rank.endNs);
    }
  }
  auto byStart = [](const Flow& a, const Flow& b) { return a.from.time < b.from.time; };
  if (!std::is_sorted(flows_.begin(), flows_.end(), byStart))
    std::stable_sort(flows_.begin(), flows_.end(), byStart);
  if (lo > hi) lo = hi = 0;
  begin_ = lo;
  end_ = hi;
}

const RankData* TraceStore::findRank(int32_t rank) const {
  auto it = std::lower_bound(ranks_.begin(), ranks_.end(), rank,
                             [](const RankData& r, int32_t v) { return r.rank < v; });
  return it != ranks_.end() && it->rank == rank ? &*it : nullptr;
}

std::optional<ArgValue> TraceStore::findArg(const RankData& rank, uint32_t first, uint16_t count,
                                            std::string_view key) const {
  const uint32_t id = strings_.find(key);
  if (id == 0) return std::nullopt;
  const ArgList args(rank, first, count);
  if (const ArgValue* a = args.find(id)) return *a;
  return std::nullopt;
}

int64_t TraceStore::intArg(const RankData& rank, const Span& span, std::string_view key,
                           int64_t fallback) const {
  const std::optional<ArgValue> a = findArg(rank, span.firstArg, span.argCount, key);
  if (!a) return fallback;
  if (a->kind == ArgKind::kInt) return a->intValue;
  if (a->kind == ArgKind::kDouble) return static_cast<int64_t>(a->doubleValue);
  return fallback;
}

std::string_view TraceStore::stringArg(const RankData& rank, const Span& span,
                                       std::string_view key) const {
  const std::optional<ArgValue> a = findArg(rank, span.firstArg, span.argCount, key);
  return a && a->kind == ArgKind::kString ? str(a->stringId) : std::string_view();
}

std::string TraceStore::argText(const ArgValue& arg) const {
  char buf[64];
  switch (arg.kind) {
    case ArgKind::kInt:
      std::snprintf(buf, sizeof buf, "%" PRId64, arg.intValue);
      return buf;
    case ArgKind::kDouble:
      std::snprintf(buf, sizeof buf, "%g", arg.doubleValue);
      return buf;
    case ArgKind::kString:
      return std::string(str(arg.stringId));
  }
  return {};
}

const AggregateLanes* TraceStore::aggregates() const {
  if (!aggregates_) return nullptr;
  return aggregates_->fromFiles() || aggregates_->generation() == generation_ ? aggregates_.get()
                                                                              : nullptr;
}

size_t TraceStore::memoryBytes() const {
  size_t bytes = 0;
  for (const auto& r : ranks_) {
    bytes += r.argBytes.capacity();
    for (const auto& t : r.tracks) {
      for (const auto& l : t.levels) bytes += l.capacity() * sizeof(Span);
      for (const auto& b : t.busy) bytes += b.capacity() * sizeof(int64_t);
      bytes += t.instants.capacity() * sizeof(Instant);
    }
    for (const auto& c : r.counters)
      bytes += c.times.capacity() * sizeof(int64_t) + c.values.capacity() * sizeof(double);
  }
  bytes += flows_.capacity() * sizeof(Flow);
  for (size_t i = 0; i < strings_.size(); ++i)
    bytes += strings_.str(static_cast<uint32_t>(i)).size() + 48;
  return bytes;
}

std::vector<CounterColumn> decimateCounter(const CounterSeries& series, int64_t t0, int64_t t1,
                                           int columns) {
  std::vector<CounterColumn> out(static_cast<size_t>(std::max(columns, 0)));
  if (columns <= 0 || t1 <= t0 || series.times.empty()) return out;
  const double nsPerColumn = double(t1 - t0) / columns;
  // The sample in force at t0: the last one at or before it.
  size_t i = std::upper_bound(series.times.begin(), series.times.end(), t0) - series.times.begin();
  bool haveValue = i > 0;
  double value = haveValue ? series.values[i - 1] : 0;
  for (int c = 0; c < columns; ++c) {
    const int64_t columnEnd = t0 + static_cast<int64_t>((c + 1) * nsPerColumn);
    CounterColumn col;
    if (haveValue) col = {value, value, true};
    while (i < series.times.size() && series.times[i] <= columnEnd) {
      value = series.values[i++];
      if (!col.valid) {
        col = {value, value, true};
      } else {
        col.min = std::min(col.min, value);
        col.max = std::max(col.max, value);
      }
      haveValue = true;
    }
    out[static_cast<size_t>(c)] = col;
  }
  return out;
}

}  // namespace ringx::model
