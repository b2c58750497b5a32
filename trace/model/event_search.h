// Finding events in a big trace by name or argument value (the timeline's
// search box; no ImGui here).
//
// The store interns every name and string argument value, so a query is
// matched against the StringPool first: one pass over its distinct strings
// (thousands, even for ten million events) marks the ids that match, and the
// events are then scanned comparing ids, an array lookup per name and per
// string argument rather than a string compare per event. The scan is
// incremental: advance() looks at a bounded number of events per call, so a
// frame never stalls while the user types into a ten-million-event trace; the
// matches are put in time order once the scan is done.
//
// Queries (case-insensitive):
//   text        events whose name or some string argument value contains text;
//               a number also matches integer arguments equal to it (seq, bytes, step)
//   key=value   only argument `key`: a string value containing `value`, or a
//               number equal to it ("seq=17", "group=world", "bucket=3"); "key=" any value
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trace/model/trace_store.h"

namespace ringx::model {

// One matching event: a span (level >= 0) or an instant (level -1), addressed
// like the timeline addresses events (rank number, index in RankData::tracks).
struct SearchMatch {
  int64_t begin = 0;
  int64_t end = 0;
  int32_t rank = 0;
  int32_t track = 0;
  int32_t level = 0;
  uint32_t index = 0;
};

class EventSearch {
 public:
  // A new query (empty: no search). Marks the matching strings now; the events
  // are scanned by advance().
  void start(const TraceStore& store, std::string_view text);
  // Scans up to `budget` more events (spans and instants); true once every event
  // was scanned and the matches are in time order. A store that changed since
  // start (a live job's new events), or another store, is scanned again from
  // the beginning.
  bool advance(const TraceStore& store, size_t budget);
  void finish(const TraceStore& store) { advance(store, SIZE_MAX); }

  const std::string& text() const { return text_; }
  bool active() const { return !text_.empty(); }
  bool done() const { return done_; }
  uint64_t scanned() const { return scanned_; }
  // Bumped whenever the matches start over (a new query, a changed store).
  uint64_t restarts() const { return restarts_; }
  // In time order (begin, then rank, track, level, index) once done(); partial before.
  const std::vector<SearchMatch>& matches() const { return matches_; }
  // Index of the first match beginning at or after t (0 when none does), and of
  // the last beginning at or before t (the last match when none does); -1 when
  // there are no matches. Only once done().
  int64_t firstAtOrAfter(int64_t t) const;
  int64_t lastAtOrBefore(int64_t t) const;

 private:
  void compile(const TraceStore& store);
  bool matchesEvent(const RankData& rank, uint32_t name, uint32_t firstArg,
                    uint16_t argCount) const;

  std::string text_;
  // Compiled query.
  std::vector<uint8_t> stringMatches_;  // by string id: contains the text (or value)
  uint32_t key_ = 0;                    // key=value: the key's id
  bool keyed_ = false;                  // key=value form (key_ 0: no event has that key)
  bool anyValue_ = false;               // "key=": any value
  bool hasNumber_ = false;
  int64_t number_ = 0;
  // The store scanned (another one, or a new generation of it, starts over).
  const TraceStore* store_ = nullptr;
  uint64_t generation_ = 0;
  // Scan position: rank, track, level (levels.size() = the instants), index.
  size_t rank_ = 0, track_ = 0, level_ = 0, index_ = 0;
  uint64_t scanned_ = 0;
  uint64_t restarts_ = 0;
  bool done_ = true;
  std::vector<SearchMatch> matches_;
};

// Where a trace holds something to look at, for a view chosen before a person looks (screenshots,
// --zoom-steps, --zoom-event):
// the time steps first..last took: every event with a "step" argument in that range (the
// engines' phases, ringx.trace.mark_step) and the profiler's "ProfilerStep#N" spans, from the
// earliest begin to the latest end; false when there is none.
bool stepsExtent(const TraceStore& store, int64_t first, int64_t last, int64_t* begin,
                 int64_t* end);
// The earliest event named `name` (span or instant): its begin and end; false when none.
bool firstEventNamed(const TraceStore& store, std::string_view name, int64_t* begin, int64_t* end);

}  // namespace ringx::model
