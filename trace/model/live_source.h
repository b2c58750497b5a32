// The viewer's live attach ("ringx-viewer --attach HOST:PORT"): follows a running
// job through its live trace servers (trace/record/live_server.h) and feeds what
// arrives into a TraceStore frame by frame.
//
// A background thread asks rank 0's server for the directory of every rank's
// endpoint (retrying while the job is not up yet), opens one LiveStream per rank
// and waits on all of them with poll(2). The UI thread never touches a socket: it
// calls drainInto() each frame, which ingests only what arrived since the last
// call. A stream that ends is reconnected with backoff; the server replays its
// recent backlog to every new client, so the events of a new stream that repeat
// what an earlier one delivered are recognised and skipped (each rank keeps one
// accumulated RankTrace that survives reconnects, and the store never counts an
// event twice).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "trace/model/trace_store.h"
#include "trace/read/collective_chains.h"
#include "trace/read/live_client.h"

namespace ringx::model {

// One rank's connection, for the UI's status panel.
struct LiveRankStatus {
  enum State {
    kConnecting,    // not connected yet (first attempts)
    kConnected,     // streaming
    kDisconnected,  // was streaming; the stream ended (message says why), reconnecting
    kFailed,        // the server refused us (wrong token, not a ringx server); retrying slowly
  };
  int32_t rank = 0;
  std::string endpoint;  // "HOST:PORT" from the directory
  State state = kConnecting;
  std::string message;  // why it is not connected ("" while connected)
  uint64_t bytes = 0;   // received over every connection to this rank
  uint64_t events = 0;  // distinct events received (replayed backlog not counted twice)
  int reconnects = 0;   // streams opened after the first one
  // Followed through its SUMMARY stream (collectives and steps only): a rank
  // outside --ranks with --summary-others.
  bool summary = false;
};

const char* liveStateName(LiveRankStatus::State state);

namespace live_detail {
struct Attempt;  // a connection attempt on its own thread (live_source.cc)
struct Failure;
}  // namespace live_detail

class LiveSource {
 public:
  // Starts following the job whose rank 0 serves its live trace at `hostPort`.
  // `token` is the job's RINGX_TRACE_TOKEN ("" for none). `ranks` (ascending),
  // when not empty, are the only ranks followed: every rank serves its own
  // stream, so a subset is a choice of which directory entries to connect to,
  // and a 1,000-rank job can be watched 8 ranks at a time. Throws
  // InvalidArgument for an address parseHostPort() refuses, port 0, or a token
  // the protocol cannot carry; everything later (refusals, dead ranks) shows in
  // status(). With `summarizeOthers` (and a subset), every rank outside `ranks`
  // is followed too, through its server's SUMMARY stream: the store then has the
  // subset's every event and every rank's collectives and steps, which is what
  // the timeline's aggregate lanes (comm busy share, stragglers) need, for about
  // a tenth of the bytes. Those ranks' RankData::summaryOnly is set.
  LiveSource(std::string hostPort, std::string token, std::vector<int32_t> ranks = {},
             bool summarizeOthers = false);
  // Stops the thread and closes every stream at once: the thread's waits end on
  // a wake-up pipe, and connection attempts (blocking calls that cannot be
  // interrupted) run on threads of their own that finish alone.
  ~LiveSource();
  LiveSource(const LiveSource&) = delete;
  LiveSource& operator=(const LiveSource&) = delete;

  const std::string& hostPort() const { return hostPort_; }

  // Every rank of the directory, by rank (empty until the directory arrived).
  std::vector<LiveRankStatus> status() const;
  // The whole attach: kConnecting while fetching the directory or until every
  // rank connected, kConnected when all are, kDisconnected when some rank's
  // stream ended, kFailed when rank 0 (or some rank) refused us.
  LiveRankStatus::State state() const;
  // One line for the status bar: "fetching the directory from HOST:PORT (last
  // try: <why>)", "connected to 4/4 ranks", "connected to 3/4 ranks; rank 2
  // disconnected: <why>", with summaries "connected to 8/8 ranks, summaries
  // from 56/56", or the refusal ("live trace server HOST:PORT refused
  // the DIRECTORY request: invalid token").
  std::string stateText() const;

  // Ingests every rank's events received since the last call into `store` (on
  // rank 0's clock, with each rank's clock syncs received so far) and finalizes
  // it. Returns true when the store changed (events, or rank metadata such as a
  // dropped count). Cheap when nothing arrived: one atomic load. Drain into the
  // same store every time; call restartDrain() before draining into another (or
  // a cleared) store, so that it gets everything from the start. A collective
  // gets its arrows across ranks once every rank of its group has sent its span
  // (or, with a rank gone, once many later ones wait).
  bool drainInto(TraceStore& store);
  void restartDrain();

  // Writes what was received to `dir` (created if needed) as a trace directory
  // trace::readTrace() reads: rank-N.ringx per rank that sent its header, and
  // manifest.json. Throws IoError when a file cannot be written.
  void saveTo(const std::string& dir) const;

 private:
  struct Rank;
  void run();
  void fetchDirectoryLoop();
  void streamLoop();
  void startConnect(Rank& rank);
  void finishConnect(Rank& rank);
  void connectFailed(Rank& rank, const live_detail::Failure& failure);
  void pump(Rank& rank);
  void mergeLocked(Rank& rank);  // with mutex_ held
  void endStream(Rank& rank, std::string reason);
  // Waits up to `ms` or until stop; false when stopping.
  bool sleepUnlessStopped(std::chrono::milliseconds ms);
  // Waits for the attempt to finish; false when stopping.
  bool waitForAttempt(const live_detail::Attempt& attempt);

  const std::string hostPort_;
  const std::string token_;
  const std::vector<int32_t> only_;  // the ranks to follow; empty: all
  const bool summarizeOthers_;       // and the others' SUMMARY streams
  trace::HostPort address_;

  std::atomic<bool> stop_{false};
  int wakeRead_ = -1;  // a pipe: the destructor writes to wake the thread at once
  int wakeWrite_ = -1;
  // Set by the thread whenever it changed something drainInto() would ingest.
  std::atomic<bool> fresh_{false};

  mutable std::mutex mutex_;  // guards everything below, and Rank's shared fields
  bool haveDirectory_ = false;
  LiveRankStatus::State directoryState_ = LiveRankStatus::kConnecting;
  std::string directoryMessage_;
  std::vector<std::unique_ptr<Rank>> ranks_;  // by rank; fixed once the directory arrived
  // Collectives waiting for their other ranks' spans (drainInto, under mutex_).
  static constexpr size_t kMaxOpenCollectives = 1 << 16;
  trace::CollectiveChains chains_{kMaxOpenCollectives};

  std::thread thread_;  // last: starts after every member above exists
};

}  // namespace ringx::model
