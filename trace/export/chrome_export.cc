// Chrome Trace Event JSON writer.
//
// Written as text into a buffer flushed every megabyte: no JSON library and no
// document in memory, and every string of a rank (names, tracks, argument keys,
// string values) escaped once, not once per event that uses it.
//
// Collectives are joined across ranks by flow events (collective_chains.h says
// why a chain in arrival order): "s" on the first rank to begin, "t" on each
// next, "f" on the last, at each span's begin on its own thread, one id per
// (group, seq), category "collective.flow" (scripts that pick the collective
// spans by category "collective" do not meet them). "t" and "f" bind to the
// slice enclosing them ("bp":"e", the span that begins there), as "s" always
// does. They are written after every span, so a reader that replays events in
// file order at equal timestamps has opened the slice before its flow point
// arrives.
#include "trace/export/chrome_export.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <ostream>
#include <set>

#include "base/json_text.h"
#include "trace/read/alignment.h"
#include "trace/read/collective_chains.h"

namespace ringx::trace {
namespace {

constexpr size_t kFlushBytes = 1 << 20;

// Tracks in the order a reader wants them top to bottom: step markers, work,
// communication, then memory; unknown tracks last, by name.
int trackOrder(std::string_view name) {
  if (name == track::kSteps) return 0;
  if (name == track::kCompute) return 1;
  if (name == track::kDdp) return 2;
  if (name == track::kFsdp) return 3;
  if (name.rfind(track::kCommPrefix, 0) == 0) return 4;
  if (name == track::kUser) return 5;
  if (name == track::kMemory) return 6;
  return 7;
}

class JsonOut {
 public:
  explicit JsonOut(std::ostream& os) : os_(os) { buf_.reserve(kFlushBytes + (64 << 10)); }

  void raw(std::string_view text) { buf_.append(text.data(), text.size()); }
  void str(std::string_view text) { appendJsonString(buf_, text); }
  void integer(int64_t v) {
    char tmp[24];
    const auto r = std::to_chars(tmp, tmp + sizeof(tmp), v);
    buf_.append(tmp, r.ptr);
  }
  // Shortest text that reads back as the same double; JSON has no NaN or
  // infinity, so those become null.
  void number(double v) {
    if (!std::isfinite(v)) {
      buf_ += "null";
      return;
    }
    char tmp[32];
    const auto r = std::to_chars(tmp, tmp + sizeof(tmp), v);
    buf_.append(tmp, r.ptr);
  }
  // Nanoseconds as microseconds with up to three decimals, exactly (formatting
  // the integer avoids a double's rounding on long traces).
  void micros(int64_t ns) {
    if (ns < 0) {
      buf_ += '-';
      ns = -ns;  // trace times are far from INT64_MIN
    }
    integer(ns / 1000);
    int frac = static_cast<int>(ns % 1000);
    if (frac == 0) return;
    char digits[4] = {'.', static_cast<char>('0' + frac / 100),
                      static_cast<char>('0' + frac / 10 % 10), static_cast<char>('0' + frac % 10)};
    size_t n = 4;
    while (digits[n - 1] == '0') --n;
    buf_.append(digits, n);
  }
  // Called between events: hands the buffer to the stream once it is large.
  void maybeFlush() {
    if (buf_.size() >= kFlushBytes) flush();
  }
  void flush() {
    os_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    buf_.clear();
    if (!os_) RINGX_THROW(IoError, "error writing the exported trace");
  }

 private:
  std::ostream& os_;
  std::string buf_;
};

// What the exporter needs about one rank, computed before writing its events.
struct RankView {
  const RankTrace* trace = nullptr;
  ClockModel clock;
  std::vector<std::string> escaped;  // by string id, JSON literals with quotes
  std::vector<int> tidOfTrack;       // by string id; 0 for ids no event uses as track
  int64_t firstNs = 0, lastNs = 0;   // local times of the first and last event
  bool hasEvents = false;
};

void writeArgValue(JsonOut& out, const RankView& view, const Arg& a) {
  switch (a.type) {
    case ArgType::kInt:
      out.integer(a.intValue);
      return;
    case ArgType::kDouble:
      out.number(a.doubleValue);
      return;
    case ArgType::kString:
      out.raw(view.escaped[a.stringId]);
      return;
  }
  out.raw("null");
}

// Clock and loss facts about one rank, as JSON object members (no braces).
void writeRankFacts(JsonOut& out, const RankView& view) {
  const RankTrace& t = *view.trace;
  const ClockModel& clock = view.clock;
  out.raw("\"rank\":");
  out.integer(t.header.rank);
  out.raw(",\"host\":");
  out.str(t.header.host);
  out.raw(",\"os_pid\":");
  out.integer(t.header.pid);
  out.raw(",\"events\":");
  out.integer(static_cast<int64_t>(t.events.size()));
  out.raw(",\"dropped_events\":");
  out.integer(static_cast<int64_t>(t.dropped));
  out.raw(",\"truncated\":");
  out.raw(t.truncated ? "true" : "false");
  out.raw(",\"clock_reference\":");
  out.raw(clock.isReference() ? "true" : "false");
  out.raw(",\"clock_aligned\":");
  out.raw(clock.aligned() ? "true" : "false");
  out.raw(",\"clock_samples\":");
  out.integer(static_cast<int64_t>(clock.samples().size()));
  // The offsets applied at the rank's first and last event: their difference
  // is the drift the model corrected over the trace.
  out.raw(",\"clock_offset_ns\":");
  out.integer(clock.offsetAt(view.firstNs));
  out.raw(",\"clock_offset_end_ns\":");
  out.integer(clock.offsetAt(view.lastNs));
  out.raw(",\"clock_uncertainty_ns\":");
  out.integer(clock.maxUncertaintyNs());
}

std::string processLabel(const RankView& view) {
  const RankTrace& t = *view.trace;
  std::string label;
  if (view.clock.isReference()) {
    label = "clock reference";
  } else if (view.clock.aligned()) {
    label = strCat("clock offset ", view.clock.offsetAt(view.firstNs), " ns +- ",
                   view.clock.maxUncertaintyNs(), " ns");
  } else {
    label = "clock not aligned (no clock-sync samples)";
  }
  if (t.dropped > 0) label += strCat(", ", t.dropped, " events dropped");
  if (t.truncated) label += ", file cut off";
  return label;
}

}  // namespace

ExportStats writeChromeTrace(const TraceSet& trace, std::ostream& os) {
  // ---- pass 1: clocks, the time origin, and one tid per track name for the job
  std::vector<RankView> views(trace.ranks.size());
  std::set<std::string_view> trackNames;
  int64_t origin = std::numeric_limits<int64_t>::max();
  for (size_t r = 0; r < trace.ranks.size(); ++r) {
    RankView& v = views[r];
    const RankTrace& t = trace.ranks[r];
    v.trace = &t;
    v.clock = ClockModel::forRank(t);
    v.tidOfTrack.assign(t.strings.size(), 0);
    for (const Event& e : t.events) {
      if (!v.hasEvents) {
        v.firstNs = v.lastNs = e.beginNs;
        v.hasEvents = true;
      }
      v.firstNs = std::min(v.firstNs, e.beginNs);
      v.lastNs = std::max(v.lastNs, e.endNs);
      origin = std::min(origin, v.clock.align(e.beginNs));
      v.tidOfTrack[e.track] = -1;  // used; numbered below
    }
    if (!v.hasEvents) v.firstNs = v.lastNs = t.header.startSteadyNs;
    for (size_t id = 0; id < t.strings.size(); ++id) {
      if (v.tidOfTrack[id] != 0) trackNames.insert(t.strings[id]);
    }
    v.escaped.resize(t.strings.size());
    for (size_t id = 0; id < t.strings.size(); ++id) {
      appendJsonString(v.escaped[id], t.strings[id]);
    }
  }
  if (origin == std::numeric_limits<int64_t>::max()) {
    origin = 0;
    for (size_t r = 0; r < views.size(); ++r) {
      const int64_t start = views[r].clock.align(trace.ranks[r].header.startSteadyNs);
      origin = r == 0 ? start : std::min(origin, start);
    }
  }
  std::vector<std::string_view> ordered(trackNames.begin(), trackNames.end());
  std::stable_sort(ordered.begin(), ordered.end(), [](std::string_view a, std::string_view b) {
    return trackOrder(a) < trackOrder(b);
  });
  std::map<std::string_view, int> tidOfName;
  for (size_t i = 0; i < ordered.size(); ++i) tidOfName[ordered[i]] = static_cast<int>(i) + 1;
  for (size_t r = 0; r < views.size(); ++r) {
    for (size_t id = 0; id < views[r].tidOfTrack.size(); ++id) {
      if (views[r].tidOfTrack[id] != 0) {
        views[r].tidOfTrack[id] = tidOfName[trace.ranks[r].strings[id]];
      }
    }
  }

  JsonOut out(os);
  ExportStats stats;
  stats.originNs = origin;
  out.raw("{\"traceEvents\":[\n");
  bool first = true;
  auto next = [&] {
    if (!first) out.raw(",\n");
    first = false;
  };

  // ---- metadata: process and thread names, sort order, clock facts
  for (const RankView& v : views) {
    const RankTrace& t = *v.trace;
    const int64_t pid = int64_t{t.header.rank} + 1;
    next();
    out.raw("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":");
    out.integer(pid);
    out.raw(",\"tid\":0,\"args\":{\"name\":");
    out.str(t.header.host.empty() ? strCat("rank ", t.header.rank)
                                  : strCat("rank ", t.header.rank, " (", t.header.host, ")"));
    out.raw(",");
    writeRankFacts(out, v);
    out.raw("}}");
    next();
    out.raw("{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":");
    out.integer(pid);
    out.raw(",\"tid\":0,\"args\":{\"sort_index\":");
    out.integer(t.header.rank);
    out.raw("}}");
    next();
    out.raw("{\"ph\":\"M\",\"name\":\"process_labels\",\"pid\":");
    out.integer(pid);
    out.raw(",\"tid\":0,\"args\":{\"labels\":");
    out.str(processLabel(v));
    out.raw("}}");
    for (size_t id = 0; id < v.tidOfTrack.size(); ++id) {
      const int tid = v.tidOfTrack[id];
      if (tid == 0) continue;
      next();
      out.raw("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":");
      out.integer(pid);
      out.raw(",\"tid\":");
      out.integer(tid);
      out.raw(",\"args\":{\"name\":");
      out.raw(v.escaped[id]);
      out.raw("}}");
      next();
      out.raw("{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":");
      out.integer(pid);
      out.raw(",\"tid\":");
      out.integer(tid);
      out.raw(",\"args\":{\"sort_index\":");
      out.integer(tid);
      out.raw("}}");
    }
  }

  // ---- events
  std::string categories[kCategoryCount + 1];
  for (int c = 1; c <= kCategoryCount; ++c) {
    appendJsonString(categories[c], categoryName(static_cast<Category>(c)));
  }
  CollectiveChains chains;
  std::map<int32_t, const RankView*> viewOfRank;
  for (const RankView& v : views) {
    const RankTrace& t = *v.trace;
    const int64_t pid = int64_t{t.header.rank} + 1;
    const uint32_t errorKey = t.findString(arg::kError);
    const CollectiveKeys collectiveKeys(t);
    viewOfRank.emplace(t.header.rank, &v);
    for (const Event& e : t.events) {
      next();
      const int64_t begin = v.clock.align(e.beginNs);
      std::string_view group;
      int64_t seq, groupSize;
      if (collectiveKeys.read(e, &group, &seq, &groupSize)) {
        chains.add(group, seq, groupSize > 0 ? groupSize : t.header.worldSize,
                   CollectiveArrival{t.header.rank, static_cast<uint32_t>(v.tidOfTrack[e.track]),
                                     e.name, begin});
      }
      switch (e.kind) {
        case EventKind::kSpan:
          out.raw("{\"ph\":\"X\"");
          break;
        case EventKind::kInstant:
          out.raw("{\"ph\":\"i\",\"s\":\"t\"");
          break;
        case EventKind::kCounter:
          out.raw("{\"ph\":\"C\"");
          break;
      }
      out.raw(",\"pid\":");
      out.integer(pid);
      out.raw(",\"tid\":");
      out.integer(v.tidOfTrack[e.track]);
      out.raw(",\"ts\":");
      out.micros(begin - origin);
      if (e.kind == EventKind::kSpan) {
        // Aligned separately: the offset may change (drift) during the span.
        // Clamped, since samples with a steep slope could otherwise make it negative.
        out.raw(",\"dur\":");
        out.micros(std::max<int64_t>(0, v.clock.align(e.endNs) - begin));
      }
      out.raw(",\"name\":");
      out.raw(v.escaped[e.name]);
      out.raw(",\"cat\":");
      out.raw(categories[static_cast<int>(e.category)]);
      out.raw(",\"args\":{");
      bool failed = false;
      if (e.kind == EventKind::kCounter) {
        // A counter's args are its series: one, named after the counter.
        out.raw(v.escaped[e.name]);
        out.raw(":");
        out.number(e.value);
      } else {
        for (uint32_t i = 0; i < e.argCount; ++i) {
          const Arg& a = t.args[e.firstArg + i];
          if (i > 0) out.raw(",");
          out.raw(v.escaped[a.key]);
          out.raw(":");
          writeArgValue(out, v, a);
          failed = failed || (errorKey != 0 && a.key == errorKey);
        }
      }
      out.raw("}");
      if (failed) out.raw(",\"cname\":\"terrible\"");  // chrome://tracing colours it red
      out.raw("}");
      out.maybeFlush();
      ++stats.events;
    }
  }
  for (const CollectiveChain& chain : chains.takeAll()) {
    // Every point carries the first arrival's name: readers key flows by
    // category, name and id, and a chain of ranks that disagree on the op
    // (a mismatch) must still be one flow.
    const CollectiveArrival& head = chain.arrivals.front();
    const std::string& name = viewOfRank.at(head.rank)->escaped[head.name];
    for (size_t i = 0; i < chain.arrivals.size(); ++i) {
      const CollectiveArrival& a = chain.arrivals[i];
      next();
      out.raw(i == 0                          ? "{\"ph\":\"s\""
              : i + 1 < chain.arrivals.size() ? "{\"ph\":\"t\",\"bp\":\"e\""
                                              : "{\"ph\":\"f\",\"bp\":\"e\"");
      out.raw(",\"id\":");
      out.integer(static_cast<int64_t>(chain.id));
      out.raw(",\"pid\":");
      out.integer(int64_t{a.rank} + 1);
      out.raw(",\"tid\":");
      out.integer(a.track);
      out.raw(",\"ts\":");
      out.micros(a.beginNs - origin);
      out.raw(",\"name\":");
      out.raw(name);
      out.raw(",\"cat\":\"collective.flow\"}");
      out.maybeFlush();
    }
    stats.flows += chain.arrivals.size() - 1;
  }

  // ---- job facts
  out.raw("\n],\n\"otherData\":{\"format\":\"ringx-trace\",\"schema_version\":");
  out.integer(kSchemaVersion);
  out.raw(",\"source\":");
  out.str(trace.path);
  out.raw(",\"world_size\":");
  out.integer(trace.worldSize());
  out.raw(",\"time_origin_ns\":");
  out.integer(origin);
  out.raw(",\"time_base\":\"microseconds since time_origin_ns of rank 0's steady clock\"");
  if (trace.manifest) {
    out.raw(",\"start_wall_ns\":");
    out.integer(trace.manifest->startWallNs);
  }
  out.raw(",\"ranks\":[");
  for (size_t r = 0; r < views.size(); ++r) {
    out.raw(r == 0 ? "{" : ",{");
    writeRankFacts(out, views[r]);
    out.raw("}");
  }
  out.raw("],\"warnings\":[");
  for (size_t i = 0; i < trace.warnings.size(); ++i) {
    if (i > 0) out.raw(",");
    out.str(trace.warnings[i]);
  }
  out.raw("]}}\n");
  out.flush();
  os.flush();
  if (!os) RINGX_THROW(IoError, "error writing the exported trace");
  return stats;
}

ExportStats writeChromeTraceFile(const TraceSet& trace, const std::string& path) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) RINGX_THROW(IoError, "cannot create ", path, ": ", std::strerror(errno));
  ExportStats stats = writeChromeTrace(trace, file);
  file.close();
  if (!file) RINGX_THROW(IoError, "error writing ", path, " (disk full?)");
  return stats;
}

}  // namespace ringx::trace
