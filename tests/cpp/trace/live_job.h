// A job's live trace servers in-process, for tests that attach to them: two
// (or more) ranks' LiveServers wired like RINGX_TRACE_LISTEN (rank 0 publishes
// the directory), fed with encoded batches the way the recorder feeds its sinks.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "trace/format/codec.h"
#include "trace/record/live_server.h"

namespace ringx::trace::testing {

// One rank's stream as the recorder hands it to its sinks: a preamble (magic
// and header), then batches that define their new strings first.
class RankFeed {
 public:
  // `host` "": "node-<rank>".
  explicit RankFeed(int rank, int worldSize = 2, std::string host = "")
      : rank_(rank), worldSize_(worldSize) {
    trace::Encoder enc;
    enc.magic();
    trace::StreamHeader h;
    h.rank = rank;
    h.worldSize = worldSize;
    h.pid = 4000 + rank;
    h.host = host.empty() ? "node-" + std::to_string(rank) : host;
    h.startSteadyNs = 1000;
    h.startWallNs = 1700000000000000000;
    enc.header(h);
    preamble_ = enc.bytes();
  }
  const std::string& preamble() const { return preamble_; }

  // A collective span; with seq >= 0 it also carries seq and group_size (the
  // world size), so that the viewer can join it across ranks.
  RankFeed& span(const std::string& track, const std::string& name, int64_t begin, int64_t end,
                 int64_t bytes, int64_t seq = -1) {
    trace::Arg a;
    a.key = id(trace::arg::kBytes);
    a.intValue = bytes;
    trace::Arg g;
    g.key = id(trace::arg::kGroup);
    g.type = trace::ArgType::kString;
    g.stringId = id("world");
    trace::Arg q;
    q.key = id(trace::arg::kSeq);
    q.intValue = seq;
    trace::Arg n;
    n.key = id(trace::arg::kGroupSize);
    n.intValue = worldSize_;
    const trace::Arg args[4] = {a, g, q, n};
    trace::Event e;
    e.kind = trace::EventKind::kSpan;
    e.category = trace::Category::kCollective;
    e.rank = rank_;
    e.track = id(track);
    e.name = id(name);
    e.beginNs = begin;
    e.endNs = end;
    e.argCount = seq >= 0 ? 4 : 2;
    records_.event(e, args);
    ++events_;
    return *this;
  }
  // An event without arguments: a compute span (Category::kUser), a step, a
  // counter (kind kCounter, `value`), ...
  RankFeed& event(trace::Category category, trace::EventKind kind, const std::string& track,
                  const std::string& name, int64_t begin, int64_t end, double value = 0) {
    trace::Event e;
    e.kind = kind;
    e.category = category;
    e.rank = rank_;
    e.track = id(track);
    e.name = id(name);
    e.beginNs = begin;
    e.endNs = kind == trace::EventKind::kSpan ? end : begin;
    e.value = value;
    records_.event(e, nullptr);
    ++events_;
    return *this;
  }
  RankFeed& clockSync(int64_t localNs, int64_t offsetNs) {
    records_.clockSync(trace::ClockSync{localNs, offsetNs, 50});
    return *this;
  }
  RankFeed& dropped(uint64_t count) {
    records_.dropped(trace::Dropped{0, count, 0});
    return *this;
  }
  // What was added since the last take(), as one batch.
  trace::Batch take() {
    trace::Batch b{strings_.bytes(), records_.bytes(), events_};
    strings_.clear();
    records_.clear();
    events_ = 0;
    return b;
  }

 private:
  uint32_t id(const std::string& text) {
    for (size_t i = 0; i < defined_.size(); ++i) {
      if (defined_[i] == text) return static_cast<uint32_t>(i + 1);
    }
    defined_.push_back(text);
    strings_.string(static_cast<uint32_t>(defined_.size()), text);
    return static_cast<uint32_t>(defined_.size());
  }

  int rank_;
  int worldSize_;
  std::string preamble_;
  std::vector<std::string> defined_;
  trace::Encoder strings_;
  trace::Encoder records_;
  uint64_t events_ = 0;
};

// `ranks` ranks' live servers (two by default), wired like a job with
// RINGX_TRACE_LISTEN. With ranksPerHost > 0 the headers name hosts "node-<i>"
// of that many ranks each (else one host per rank).
struct Job {
  explicit Job(std::string token = "", int ranks = 2, int ranksPerHost = 0) {
    trace::LiveServer::Options options;
    options.token = token;
    std::vector<trace::DirectoryEntry> directory;
    for (int r = 0; r < ranks; ++r) {
      feeds.emplace_back(r, ranks,
                         ranksPerHost > 0 ? "node-" + std::to_string(r / ranksPerHost) : "");
      servers.push_back(std::make_unique<trace::LiveServer>(options));
      servers[r]->begin(feeds[r].preamble());
      directory.push_back({r, "127.0.0.1", servers[r]->port()});
    }
    servers[0]->setDirectory(directory);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(servers[0]->port()); }
  void write(int rank) { servers[rank]->write(feeds[rank].take()); }

  std::vector<RankFeed> feeds;
  std::vector<std::unique_ptr<trace::LiveServer>> servers;
};

}  // namespace ringx::trace::testing
