// The parser of Chrome JSON ingest (chrome_reader.h): the top level, the event arrays in chunks,
// and each event into the Reader's pending state.
#include "trace/model/chrome_reader.h"

#include <charconv>
#include <cstring>

#include "base/error.h"

namespace ringx::model::chrome_detail {

uint8_t Reader::category(uint32_t cat) {
  if (cat >= categoryOf_.size()) categoryOf_.resize(cat + 1, -1);
  if (categoryOf_[cat] < 0) categoryOf_[cat] = cat == 0 ? 0 : store_.category(store_.str(cat));
  return static_cast<uint8_t>(categoryOf_[cat]);
}

void Reader::read(char* data, size_t size, size_t capacity) {
  data_ = data;
  size_ = size;
  capacity_ = capacity;
  std::memset(data + size, 0, capacity - size);  // the padding simdjson may read
  // Room for a guess at what the file holds (events take 100 to 300 bytes of
  // JSON): only the part used is ever touched, and growing a vector of
  // millions copies it, in fresh memory, again and again.
  events_.reserve(std::min<size_t>(size / 64, size_t{1} << 26));
  args_.reserve(std::min<size_t>(size / 24, size_t{1} << 27));
  const size_t first = skipSpace(0);
  if (first == size_) fail("the file is empty");
  if (data_[first] == '{') {
    topObject(first);
    if (!sawEvents_) fail("the top-level object has no \"traceEvents\" array");
  } else if (data_[first] == '[') {
    const size_t end = skipSpace(eventArray(first, true));
    if (end < size_) failAt(end, "unexpected text after the event array");
  } else {
    failAt(first, "the text does not start with '{' or '['");
  }
}

void Reader::topObject(size_t i) {
  i = skipSpace(i + 1);
  if (i < size_ && data_[i] == '}') {
    ++i;
  } else {
    for (;;) {
      if (i >= size_ || data_[i] != '"') failAt(i, "expected a key in the top-level object");
      const size_t keyEnd = skipString(i);
      if (keyEnd == npos) failAt(size_, "a key is not closed");
      const std::string_view key(data_ + i + 1, keyEnd - i - 2);  // raw: no escapes expected
      i = skipSpace(keyEnd);
      if (i >= size_ || data_[i] != ':') failAt(i, "expected ':' after a key");
      i = skipSpace(i + 1);
      if (key == "traceEvents") {
        if (i >= size_ || data_[i] != '[') failAt(i, "\"traceEvents\" is not an array");
        sawEvents_ = true;
        i = eventArray(i, false);
      } else {
        const size_t start = i;
        i = skipValue(i);
        if (i == npos) failAt(size_, strCat("the file ends inside the value of \"", key, "\""));
        if (i == kMalformed)
          failAt(start, strCat("the value of \"", key,
                               "\" is missing, or nested too deep, or its brackets do not match"));
        if (key == "distributedInfo" || key == "otherData") smallObject(key, start, i);
        // The value's text, less the spaces after it.
        const char* end = data_ + i;
        while (end > data_ + start && isSpace(end[-1])) --end;
        if (key == "host_name" && end - (data_ + start) >= 2 && data_[start] == '"' &&
            end[-1] == '"') {
          // Kineto: the host the rank ran on (a plain name: no escapes expected).
          kinetoHost_.assign(data_ + start + 1, static_cast<size_t>(end - 1 - (data_ + start + 1)));
        }
        if (key == "baseTimeNanoseconds") {
          // Kineto: "ts" counts microseconds from this Unix-epoch time.
          const auto parsed = std::from_chars(data_ + start, end, baseTimeNs_);
          haveBaseTime_ = parsed.ec == std::errc() && parsed.ptr == end;
        }
      }
      i = skipSpace(i);
      if (i < size_ && data_[i] == ',') {
        i = skipSpace(i + 1);
        continue;
      }
      if (i < size_ && data_[i] == '}') {
        ++i;
        break;
      }
      failAt(i, "expected ',' or '}' in the top-level object");
    }
  }
  i = skipSpace(i);
  if (i < size_) failAt(i, "unexpected text after the top-level object");
}

// Kineto's "distributedInfo" (the file's rank) and the ringx exporter's
// "otherData" (its time origin, which puts time arguments such as enqueue_ns
// on the events' time base): small, so parsed from a copy.
void Reader::smallObject(std::string_view key, size_t begin, size_t end) {
  const simdjson::padded_string text(data_ + begin, end - begin);
  od::document doc;
  error_code e = parser_.iterate(text).get(doc);
  if (e != simdjson::SUCCESS) failJson(e, begin);
  try {
    if (take(doc.type()) != od::json_type::object) return;
    for (auto fieldResult : take(doc.get_object())) {
      od::field field = take(std::move(fieldResult));
      const od::raw_json_string name = field.key();
      od::value v = field.value();
      bool bad = false;
      int64_t n = 0;
      if (key == "distributedInfo" && name == "rank") {
        if (number(v, &n, &bad) && n >= 0 && n <= std::numeric_limits<int32_t>::max()) {
          distributedRank_ = true;
          distributedRankValue_ = static_cast<int32_t>(n);
        }
      } else if (key == "distributedInfo" && name == "world_size") {
        if (number(v, &n, &bad) && n > 0) distributedWorldSize_ = n;
      } else if (key == "otherData" && name == "format") {
        std::string_view format;
        if (take(v.type()) == od::json_type::string) {
          checkSoft(v.get_string().get(format));
          ringxExport_ = format == "ringx-trace";
        }
      } else if (key == "otherData" && name == "time_origin_ns") {
        haveOrigin_ = number(v, &originNs_, &bad);
      }
    }
  } catch (const JsonFailure& failure) {
    failJson(failure.code, begin);
  }
}

// The event array whose '[' is at `open`; returns the offset after its ']'.
// `bare`: the array is the whole file, which the format lets a writer that was
// still running leave unclosed.
size_t Reader::eventArray(size_t open, bool bare) {
  size_t start = open;  // a chunk starts at the '[' or at the comma after the last chunk
  for (;;) {
    // The fast way: guess where about a megabyte of events ends (unless the
    // guesses keep missing: then each costs a parse for nothing).
    if (size_ - start > 2 * kChunkBytes && guessesMissed_ < 8) {
      const size_t end =
          guessChunkEnd(start + kChunkBytes, std::min(size_, start + 4 * kChunkBytes));
      if (end != npos && chunk(start, end, true)) {
        guessesMissed_ = 0;
        start = end;
        continue;
      }
      ++guessesMissed_;
    }
    // The exact way: scan event by event (the last chunk, and where guesses fail).
    size_t i = skipSpace(start + 1);
    size_t close = npos;  // where the chunk's ']' goes
    bool done = false;
    if (i < size_ && data_[i] == ']' && data_[start] == '[') {
      close = i;
      done = true;
    }
    while (!done) {
      if (i >= size_) {  // after '[' or ',': the array was never closed
        if (!bare) failAt(size_, "the file ends inside the \"traceEvents\" array");
        close = size_;  // the spare byte after the text
        done = true;
        break;
      }
      const size_t after = skipValue(i);
      if (after == npos && bare) {
        // A writer that died mid-event (the format lets a running writer leave
        // the array open): the events before this one are whole; read them.
        cutEvent_ = true;
        if (close == npos) return size_;  // nothing whole in this chunk
        chunk(start, close, false);
        return size_;
      }
      if (after == npos) failAt(size_, "the file ends inside an event");
      if (after == kMalformed)
        failAt(i, "an event is missing, or nested too deep, or its brackets do not match");
      i = skipSpace(after);
      if (i >= size_) {
        if (!bare) failAt(size_, "the file ends inside the \"traceEvents\" array");
        close = size_;
        done = true;
        break;
      }
      if (data_[i] == ']') {
        close = i;
        done = true;
        break;
      }
      if (data_[i] != ',') failAt(i, "expected ',' or ']' after an event");
      close = i;
      if (close - start >= kChunkBytes) break;
      i = skipSpace(i + 1);
    }
    if (close == size_) {
      // The format lets a writer that is still running leave the array open
      // ("[{...},{...},"), and chrome://tracing reads such files: close it, in
      // place of a trailing comma if there is one.
      unclosedArray_ = true;
      size_t last = close;
      while (last > start + 1 && isSpace(data_[last - 1])) --last;
      if (last > start + 1 && data_[last - 1] == ',') close = last - 1;
    }
    chunk(start, close, false);
    if (done) return std::min(close + 1, size_);
    start = close;
  }
}

// Parses the events between data_[open] and data_[close], which are made '['
// and ']' for the purpose. A guessed chunk is first checked to be exactly one
// array of whole events; false when it is not (nothing was used from it).
bool Reader::chunk(size_t open, size_t close, bool guess) {
  struct Restore {
    char* at;
    char saved;
    ~Restore() { *at = saved; }
  } restoreOpen{data_ + open, data_[open]}, restoreClose{data_ + close, data_[close]};
  data_[open] = '[';
  data_[close] = ']';
  const simdjson::padded_string_view text(data_ + open, close + 1 - open, capacity_ - open);
  od::document doc;
  error_code e = parser_.iterate(text).get(doc);
  if (e == simdjson::UTF8_ERROR) {
    // Names from some tools carry bytes that are not UTF-8; Perfetto shows
    // them as replacement characters rather than refusing the file, so do we.
    replacedBytes_ += replaceInvalidUtf8(data_ + open, close + 1 - open);
    e = parser_.iterate(text).get(doc);
  }
  if (e != simdjson::SUCCESS) {
    if (guess) return false;
    failJson(e, open);
  }
  if (guess) {
    try {
      for (auto element : take(doc.get_array())) take(std::move(element));
    } catch (const JsonFailure&) {
      return false;
    }
    if (offsetOf(doc) != npos) return false;  // the array closed before our ']'
    doc.rewind();
  }
  try {
    for (auto element : take(doc.get_array())) {
      event(take(std::move(element)));
      ++eventsSeen_;
    }
  } catch (const JsonFailure& failure) {
    failJson(failure.code, offsetOf(doc));
  }
  const size_t trailing = offsetOf(doc);
  if (trailing != npos) failAt(trailing, "unexpected text after an event");
  return true;
}

void Reader::parseArgs(od::value value, bool* bad) {
  if (take(value.type()) != od::json_type::object) {
    *bad = true;
    return;
  }
  for (auto fieldResult : take(value.get_object())) {
    od::field field = take(std::move(fieldResult));
    std::string_view keyText;
    const error_code keyError = field.unescaped_key().get(keyText);
    checkSoft(keyError);
    if (keyError != simdjson::SUCCESS) {
      *bad = true;
      continue;
    }
    const uint32_t key = intern(keyText);
    od::value v = field.value();
    switch (take(v.type())) {
      case od::json_type::number: {
        od::number n;
        const error_code e = v.get_number().get(n);
        checkSoft(e);
        if (e != simdjson::SUCCESS) {
          // Past what a double holds (a 40-digit id): keep the digits.
          std::string_view text = v.raw_json_token();
          while (!text.empty() && isSpace(text.back())) text.remove_suffix(1);
          scratch_.push_back(ArgValue::ofString(key, intern(text)));
        } else if (n.is_int64()) {
          scratch_.push_back(ArgValue::ofInt(key, n.get_int64()));
        } else {
          scratch_.push_back(ArgValue::ofDouble(key, n.as_double()));
        }
        break;
      }
      case od::json_type::string: {
        std::string_view text;
        const error_code e = v.get_string().get(text);
        checkSoft(e);
        if (e == simdjson::SUCCESS) {
          scratch_.push_back(ArgValue::ofString(key, intern(text)));
        } else {
          *bad = true;
        }
        break;
      }
      case od::json_type::boolean: {
        bool b = false;
        const error_code e = v.get_bool().get(b);
        checkSoft(e);
        if (e == simdjson::SUCCESS) {
          scratch_.push_back(ArgValue::ofInt(key, b ? 1 : 0));
        } else {
          *bad = true;
        }
        break;
      }
      case od::json_type::null: {
        bool isNull = false;
        checkSoft(v.is_null().get(isNull));
        scratch_.push_back(ArgValue::ofString(key, intern("null")));
        break;
      }
      case od::json_type::array:
        scratch_.push_back(ArgValue::ofString(key, intern(take(take(v.get_array()).raw_json()))));
        break;
      case od::json_type::object:
        scratch_.push_back(ArgValue::ofString(key, intern(take(take(v.get_object()).raw_json()))));
        break;
    }
  }
}

uint32_t Reader::processIndex(int64_t pid) {
  auto [it, added] = processOf_.emplace(pid, static_cast<uint32_t>(processes_.size()));
  if (added) {
    processes_.emplace_back();
    processes_.back().pid = pid;
  }
  return it->second;
}

uint32_t Reader::threadIndex(int64_t pid, int64_t tid) {
  if (lastThread_ != UINT32_MAX && pid == lastPid_ && tid == lastTid_) return lastThread_;
  auto [it, added] = threadOf_.emplace(std::make_pair(pid, tid), 0);
  if (added) {
    const uint32_t process = processIndex(pid);
    it->second = static_cast<uint32_t>(threads_.size());
    threads_.emplace_back();
    threads_.back().tid = tid;
    threads_.back().process = process;
  }
  lastPid_ = pid;
  lastTid_ = tid;
  lastThread_ = it->second;
  return it->second;
}

const ArgValue* Reader::scratchArg(uint32_t key) const {
  for (const ArgValue& a : scratch_)
    if (a.key == key) return &a;
  return nullptr;
}

void Reader::metadata(std::string_view name, int64_t pid, int64_t tid) {
  const ArgValue* label = scratchArg(nameKey_);
  const uint32_t textId = label != nullptr && label->kind == ArgKind::kString ? label->stringId : 0;
  const std::string_view text = store_.str(textId);
  if (name == "process_name") {
    Process& p = processes_[processIndex(pid)];
    int32_t rank = 0;
    if (ringxRank(text, &rank)) p.ringxRank = rank;
    p.facts = scratch_;
    p.nameText = textId;
  } else if (name == "thread_name") {
    threads_[threadIndex(pid, tid)].name = std::string(text);
  } else if (name == "process_labels") {
    // Kineto's "CPU" or "GPU N": which pid is the process and which a device. "CPU" is
    // kept apart: a process whose OS pid is also a device's index (pid 1 in a container)
    // is labelled both.
    const ArgValue* labels = scratchArg(labelsKey_);
    const uint32_t labelId =
        labels != nullptr && labels->kind == ArgKind::kString ? labels->stringId : 0;
    Process& p = processes_[processIndex(pid)];
    if (store_.str(labelId) == "CPU") {
      p.cpuLabel = true;
    } else {
      p.labelText = labelId;
    }
  } else {
    processIndex(pid);  // sort indices: the process exists, nothing else
  }
}

// The counter series an arg of counter `name` feeds: "<name>" when the event
// has one value (ringx's counters), else "<name>.<key>".
uint32_t Reader::counterSeries(uint32_t name, uint32_t key, bool single) {
  if (single) return name;
  const uint64_t k = (uint64_t{name} << 32) | key;
  auto it = seriesOf_.find(k);
  if (it != seriesOf_.end()) return it->second;
  const uint32_t id = intern(strCat(store_.str(name), ".", store_.str(key)));
  seriesOf_.emplace(k, id);
  return id;
}

void Reader::event(od::value value) {
  if (take(value.type()) != od::json_type::object) {
    ++skipped_[kNotObject];
    return;
  }
  scratch_.clear();
  std::string_view ph, name, cat, id, bindId, scope;
  bool havePh = false, haveTs = false, haveDur = false, bad = false;
  bool flowIn = false, flowOut = false;
  int64_t ts = 0, dur = 0, pid = 0, tid = 0;
  for (auto fieldResult : take(value.get_object())) {
    od::field field = take(std::move(fieldResult));
    const od::raw_json_string key = field.key();
    od::value v = field.value();
    // Dispatch on the raw key: keys with escapes are not ones we read.
    if (key == "ph") {
      if (take(v.type()) == od::json_type::string) {
        const error_code e = v.get_string().get(ph);
        checkSoft(e);
        havePh = e == simdjson::SUCCESS;
      }
    } else if (key == "ts") {
      haveTs = micros(v, &ts, &bad);
    } else if (key == "dur") {
      haveDur = micros(v, &dur, &bad);
    } else if (key == "name" || key == "cat") {
      std::string_view text;
      if (take(v.type()) == od::json_type::string) {
        const error_code e = v.get_string().get(text);
        checkSoft(e);
        bad |= e != simdjson::SUCCESS;
      } else {
        bad = true;
      }
      (key == "name" ? name : cat) = text;
    } else if (key == "pid") {
      entityId(v, &pid, &bad);
    } else if (key == "tid") {
      entityId(v, &tid, &bad);
    } else if (key == "args") {
      parseArgs(v, &bad);
    } else if (key == "id") {
      id = idText(v, &bad);
    } else if (key == "id2") {
      // {"local": ...} or {"global": ...}: its text is the id.
      if (take(v.type()) == od::json_type::object) {
        id = take(take(v.get_object()).raw_json());
      } else {
        bad = true;
      }
    } else if (key == "bind_id") {
      bindId = idText(v, &bad);
    } else if (key == "scope") {
      if (take(v.type()) == od::json_type::string) checkSoft(v.get_string().get(scope));
    } else if (key == "flow_in" || key == "flow_out") {
      bool b = false;
      if (take(v.type()) == od::json_type::boolean) checkSoft(v.get_bool().get(b));
      (key == "flow_in" ? flowIn : flowOut) = b;
    }
  }
  if (!havePh || ph.size() != 1) {
    ++skipped_[kNoPh];
    return;
  }
  const char kind = ph[0];
  if (kind == 'M') {
    metadata(name, pid, tid);
    return;
  }
  const bool known = kind == 'X' || kind == 'B' || kind == 'E' || kind == 'i' || kind == 'I' ||
                     kind == 'n' || kind == 'C' || kind == 'b' || kind == 'e' || kind == 's' ||
                     kind == 't' || kind == 'f';
  if (!known) {
    ++unknownPh_[std::string(ph)];
    return;
  }
  if (bad) {
    ++skipped_[kBadField];
    return;
  }
  if (!haveTs) {
    ++skipped_[kNoTs];
    return;
  }
  const uint32_t threadIdx = threadIndex(pid, tid);
  Thread& thread = threads_[threadIdx];
  const int64_t end = kind == 'X' && haveDur ? ts + std::max<int64_t>(dur, 0) : ts;
  lastTime_ = std::max(lastTime_, end);

  if (kind == 'C') {
    // Counters belong to the process (as in chrome://tracing), not the thread.
    const uint32_t counter = intern(name);
    const bool single = scratch_.size() == 1;
    for (const ArgValue& a : scratch_) {
      double v;
      if (a.kind == ArgKind::kInt) {
        v = static_cast<double>(a.intValue);
      } else if (a.kind == ArgKind::kDouble) {
        v = a.doubleValue;
      } else {
        continue;
      }
      counters_.push_back(
          PendingCounter{ts, counterSeries(counter, a.key, single), thread.process, v});
    }
    return;
  }
  const uint8_t categoryIdx = category(cat.empty() ? 0 : intern(cat));
  if (kind == 's' || kind == 't' || kind == 'f') {
    if (id.empty()) {
      ++skipped_[kBadField];
      return;
    }
    // A "f" binds to the slice that encloses it ("bp":"e") or to the next one;
    // either way its arrow ends at its time on its thread, so "bp" is not read.
    flowEnd(strCat("flow\x1f", cat, "\x1f", id), ts, threadIdx, intern(name),
            kind == 's'   ? kFlowStart
            : kind == 't' ? kFlowStep
                          : kFlowFinish);
    return;
  }
  if (kind == 'b' || kind == 'e' || (kind == 'n' && !id.empty())) {
    // Async events live on a lane of their process, one per category.
    const uint32_t lane =
        threadIndex(pid, namedId(strCat("async ", cat.empty() ? std::string_view("events") : cat)));
    asyncEvent(kind, strCat(pid, "\x1f", cat, "\x1f", scope, "\x1f", id), ts, lane, intern(name),
               categoryIdx);
    return;
  }
  if (kind == 'B') {
    OpenSpan open;
    open.begin = ts;
    open.name = intern(name);
    open.category = categoryIdx;
    open.firstArg = static_cast<uint32_t>(thread.openArgs.size());
    open.argCount = static_cast<uint32_t>(scratch_.size());
    thread.openArgs.insert(thread.openArgs.end(), scratch_.begin(), scratch_.end());
    thread.open.push_back(open);
    return;
  }

  PendingEvent e;
  e.begin = ts;
  e.end = end;
  e.thread = threadIdx;
  e.firstArg = static_cast<uint32_t>(args_.size());
  if (kind == 'E') {
    if (thread.open.empty()) {
      ++skipped_[kUnmatchedEnd];
      return;
    }
    // The span is the "B"'s, with the args of both (as chrome://tracing merges them).
    const OpenSpan open = thread.open.back();
    thread.open.pop_back();
    e.begin = open.begin;
    e.name = open.name;
    e.category = open.category;
    for (uint32_t i = 0; i < open.argCount; ++i)
      args_.push_back(thread.openArgs[open.firstArg + i]);
    thread.openArgs.resize(open.firstArg);
  } else {
    e.name = intern(name);
    e.category = categoryIdx;
    if (kind != 'X') e.bits |= kPendingInstant;
  }
  for (const ArgValue& a : scratch_) args_.push_back(a);
  addEvent(e);
  // Flow events of the newer form: the slice itself is the arrow's end.
  if (kind == 'X' && !bindId.empty()) {
    const std::string key = strCat("bind\x1f", bindId);
    if (flowOut) flowEnd(key, e.end, threadIdx, e.name, kFlowStart);
    if (flowIn) flowEnd(key, e.begin, threadIdx, e.name, kFlowFinish);
  }
}

// An async "b", "e" or "n" whose matching key (process, category, scope, id) is
// `key`, on lane `thread`.
void Reader::asyncEvent(char kind, const std::string& key, int64_t ts, uint32_t thread,
                        uint32_t name, uint8_t category) {
  std::vector<OpenAsync>& open = asyncOpen_[key];
  PendingEvent e;
  e.begin = e.end = ts;
  e.name = name;
  e.category = category;
  e.thread = thread;
  e.firstArg = static_cast<uint32_t>(args_.size());
  if (kind == 'b') {
    open.push_back(OpenAsync{ts, name, thread, category, scratch_});
    return;
  }
  if (kind == 'e') {
    // The innermost open "b" of the same name ("e" may leave its name out).
    auto match = open.rbegin();
    while (match != open.rend() && name != 0 && match->name != name) ++match;
    if (match == open.rend()) {
      ++skipped_[kUnmatchedEnd];
      return;
    }
    e.begin = match->begin;
    e.name = match->name;
    e.category = match->category;
    args_.insert(args_.end(), match->args.begin(), match->args.end());
    open.erase(std::next(match).base());
  } else {
    e.bits |= kPendingInstant;
  }
  args_.insert(args_.end(), scratch_.begin(), scratch_.end());
  addEvent(e);
}

void Reader::flowEnd(const std::string& key, int64_t time, uint32_t thread, uint32_t name,
                     FlowRole role) {
  auto [it, added] = flowKeys_.emplace(key, static_cast<uint32_t>(flowKeys_.size()));
  flowEnds_.push_back(PendingFlowEnd{time, it->second, thread, name, role});
}

}  // namespace ringx::model::chrome_detail
