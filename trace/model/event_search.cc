// Event search (see event_search.h).
#include "trace/model/event_search.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <string>

#include "trace/format/schema.h"

namespace ringx::model {
namespace {

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

// Whether `text` contains `needle` (already lower case), ignoring case.
bool containsFolded(std::string_view text, std::string_view needle) {
  if (needle.empty()) return true;
  if (text.size() < needle.size()) return false;
  const char first = needle[0];
  for (size_t i = 0; i + needle.size() <= text.size(); ++i) {
    if (lower(text[i]) != first) continue;
    size_t j = 1;
    while (j < needle.size() && lower(text[i + j]) == needle[j]) ++j;
    if (j == needle.size()) return true;
  }
  return false;
}

bool parseInt(std::string_view text, int64_t* out) {
  if (text.empty()) return false;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), *out);
  return r.ec == std::errc() && r.ptr == text.data() + text.size();
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

void EventSearch::start(const TraceStore& store, std::string_view text) {
  text_ = std::string(text);
  compile(store);
}

void EventSearch::compile(const TraceStore& store) {
  matches_.clear();
  stringMatches_.clear();
  rank_ = track_ = level_ = index_ = 0;
  scanned_ = 0;
  ++restarts_;
  store_ = &store;
  generation_ = store.generation();
  const std::string_view query = trimmed(text_);
  done_ = query.empty();
  if (done_) return;
  // key=value: the key is matched exactly (argument keys are few and named).
  std::string_view value = query;
  keyed_ = false;
  key_ = 0;
  const size_t eq = query.find('=');
  if (eq != std::string_view::npos && eq > 0) {
    keyed_ = true;
    key_ = store.strings().find(trimmed(query.substr(0, eq)));
    value = trimmed(query.substr(eq + 1));
  }
  anyValue_ = keyed_ && value.empty();
  hasNumber_ = parseInt(value, &number_);
  std::string needle(value);
  for (char& c : needle) c = lower(c);
  // The one pass over distinct strings.
  const StringPool& pool = store.strings();
  stringMatches_.assign(pool.size(), 0);
  if (!anyValue_)
    for (uint32_t id = 1; id < pool.size(); ++id)
      stringMatches_[id] = containsFolded(pool.str(id), needle) ? 1 : 0;
}

bool EventSearch::matchesEvent(const RankData& rank, uint32_t name, uint32_t firstArg,
                               uint16_t argCount) const {
  if (!keyed_ && name < stringMatches_.size() && stringMatches_[name]) return true;
  if (keyed_ && key_ == 0) return false;
  for (const ArgValue& a : ArgList(rank, firstArg, argCount)) {
    if (keyed_ && a.key != key_) continue;
    if (anyValue_) return true;
    switch (a.kind) {
      case ArgKind::kString:
        if (a.stringId < stringMatches_.size() && stringMatches_[a.stringId]) return true;
        break;
      case ArgKind::kInt:
        if (hasNumber_ && a.intValue == number_) return true;
        break;
      case ArgKind::kDouble:
        if (hasNumber_ && a.doubleValue == double(number_)) return true;
        break;
    }
  }
  return false;
}

bool EventSearch::advance(const TraceStore& store, size_t budget) {
  if (text_.empty()) return true;
  if (&store != store_ || store.generation() != generation_) compile(store);
  if (done_) return true;
  const auto& ranks = store.ranks();
  size_t left = budget;
  while (rank_ < ranks.size()) {
    const RankData& rank = ranks[rank_];
    if (track_ >= rank.tracks.size()) {
      ++rank_;
      track_ = level_ = index_ = 0;
      continue;
    }
    const Track& track = rank.tracks[track_];
    if (level_ < track.levels.size()) {
      const std::vector<Span>& spans = track.levels[level_];
      const size_t stop = spans.size() - index_ > left ? index_ + left : spans.size();
      for (size_t i = index_; i < stop; ++i) {
        const Span& s = spans[i];
        if (matchesEvent(rank, s.name, s.firstArg, s.argCount))
          matches_.push_back(SearchMatch{s.begin, s.end, rank.rank, int32_t(track_),
                                         int32_t(level_), uint32_t(i)});
      }
      left -= stop - index_;
      scanned_ += stop - index_;
      index_ = stop;
      if (index_ < spans.size()) return false;  // out of budget
      ++level_;
      index_ = 0;
      continue;
    }
    if (level_ == track.levels.size()) {
      const std::vector<Instant>& instants = track.instants;
      const size_t stop = instants.size() - index_ > left ? index_ + left : instants.size();
      for (size_t i = index_; i < stop; ++i) {
        const Instant& in = instants[i];
        if (matchesEvent(rank, in.name, in.firstArg, in.argCount))
          matches_.push_back(
              SearchMatch{in.time, in.time, rank.rank, int32_t(track_), -1, uint32_t(i)});
      }
      left -= stop - index_;
      scanned_ += stop - index_;
      index_ = stop;
      if (index_ < instants.size()) return false;
    }
    ++track_;
    level_ = index_ = 0;
  }
  std::sort(matches_.begin(), matches_.end(), [](const SearchMatch& a, const SearchMatch& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.rank != b.rank) return a.rank < b.rank;
    if (a.track != b.track) return a.track < b.track;
    if (a.level != b.level) return a.level < b.level;
    return a.index < b.index;
  });
  done_ = true;
  return true;
}

int64_t EventSearch::firstAtOrAfter(int64_t t) const {
  if (matches_.empty()) return -1;
  const auto it = std::lower_bound(matches_.begin(), matches_.end(), t,
                                   [](const SearchMatch& m, int64_t v) { return m.begin < v; });
  return it == matches_.end() ? 0 : it - matches_.begin();
}

int64_t EventSearch::lastAtOrBefore(int64_t t) const {
  if (matches_.empty()) return -1;
  const auto it = std::upper_bound(matches_.begin(), matches_.end(), t,
                                   [](int64_t v, const SearchMatch& m) { return v < m.begin; });
  return it == matches_.begin() ? int64_t(matches_.size()) - 1 : (it - matches_.begin()) - 1;
}

namespace {

// Calls f(event, begin, end) for every span and instant of the store.
template <typename F>
void forEveryEvent(const TraceStore& store, F&& f) {
  for (const RankData& rank : store.ranks()) {
    for (const Track& track : rank.tracks) {
      for (const auto& level : track.levels)
        for (const Span& s : level) f(rank, s, s.begin, s.end);
      for (const Instant& i : track.instants) f(rank, i, i.time, i.time);
    }
  }
}

}  // namespace

bool stepsExtent(const TraceStore& store, int64_t first, int64_t last, int64_t* begin,
                 int64_t* end) {
  const uint32_t stepKey = store.strings().find(trace::arg::kStep);
  bool found = false;
  auto widen = [&](int64_t b, int64_t e) {
    *begin = found ? std::min(*begin, b) : b;
    *end = found ? std::max(*end, e) : e;
    found = true;
  };
  forEveryEvent(store, [&](const RankData& rank, const auto& event, int64_t b, int64_t e) {
    const std::string_view name = store.str(event.name);
    if (name.rfind("ProfilerStep#", 0) == 0) {
      const std::string digits(name.substr(13));
      char* stop = nullptr;
      const long long n = std::strtoll(digits.c_str(), &stop, 10);
      if (stop != digits.c_str() && n >= first && n <= last) widen(b, e);
      return;
    }
    if (stepKey == 0 || event.argCount == 0) return;
    const ArgList args(rank, event);
    const ArgValue* step = args.find(stepKey);
    if (step != nullptr && step->kind == ArgKind::kInt && step->intValue >= first &&
        step->intValue <= last) {
      widen(b, e);
    }
  });
  return found;
}

bool firstEventNamed(const TraceStore& store, std::string_view name, int64_t* begin, int64_t* end) {
  const uint32_t id = store.strings().find(name);
  if (id == 0) return false;
  bool found = false;
  forEveryEvent(store, [&](const RankData&, const auto& event, int64_t b, int64_t e) {
    if (event.name != id || (found && b >= *begin)) return;
    *begin = b;
    *end = e;
    found = true;
  });
  return found;
}

}  // namespace ringx::model
