// A process group as the torch-free core sees it: the ranks' connections, the
// collective sequence number, point-to-point, and what happens on failure.
//
// The group's ranks first agree on a generation through the store
// (store/generation.h) and keep every key under it, so a store that still holds an
// earlier instance's keys (a torchrun restart, a second group on the same store) is
// never read from where that instance wrote.
//
// Connections are made on demand (bootstrap/connector.h): a rank connects to a
// peer the first time a collective or a point-to-point call needs it, so a job
// of a thousand ranks that only runs rings and trees holds a handful of
// connections per rank. A collective connection to a peer always comes with a
// point-to-point one, because that is where failure notices travel (below).
//
// Collectives are run synchronously by the caller, which is the group's
// communication thread (see WorkQueue); the c10d layer only adapts tensors to
// pointers and sizes. When a collective fails, the group is aborted: the reason
// is sent to every peer as a failure notice on the point-to-point connections,
// every connection is closed so that peers blocked on this rank fail at once
// instead of at their timeout, and later calls raise the same reason. A peer
// that sees the connection drop appends the notice to its own error, so the
// error on every rank names the rank that failed first and why. The store is
// never used on a failure path: it may be what failed. Every collective is also
// kept in the group's flight recorder (flight_recorder.h), which the failing
// rank dumps before it raises, and a rank that receives a peer's failure notice
// dumps soon after.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/algorithms/algorithms.h"
#include "backend/bootstrap/connector.h"
#include "backend/group/collective_trace.h"
#include "backend/group/flight_recorder.h"
#include "backend/group/p2p.h"
#include "backend/group/trace_session.h"
#include "backend/store/store.h"
#include "backend/transport/context.h"
#include "backend/transport/mesh.h"

namespace ringx {

struct GroupOptions {
  int rank = 0;
  int size = 1;
  std::shared_ptr<Store> store;
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
  algorithms::Tuning tuning;
  // Which transports collectives may use (shared memory within a host by default).
  transport::MeshOptions mesh;
  // Shown in error messages ("group 'default'").
  std::string name = "default";
  // Entries of the flight recorder; -1: RINGX_FLIGHT_RECORDER_ENTRIES (default 2048), 0: off.
  int64_t flightRecorderEntries = -1;
  // Fake hosts for the algorithms: a host label per rank (any integers; rank 0's is used by
  // every rank). Empty: RINGX_FAKE_HOSTS=<ranks per host> when set (consecutive ranks), else
  // the real hosts. Lets ranks as threads of one process, or many processes on one machine,
  // run the hierarchical algorithms; transports are still chosen by the real hosts.
  std::vector<int> fakeHosts;
};

// Reads RINGX_SEGMENT_BYTES, RINGX_DIRECT_ALLREDUCE_MAX_BYTES, RINGX_DIRECT_BROADCAST_MAX_BYTES,
// RINGX_DIRECT_MAX_RANKS and RINGX_HIERARCHICAL (auto, on, off) over the defaults.
algorithms::Tuning tuningFromEnvironment();

// What one of this rank's connections has carried (Group::traffic()).
struct ConnectionTraffic {
  int peer;
  std::string channel;    // "collective" or "p2p"
  std::string transport;  // "shm", "tcp"
  uint64_t sent;          // payload bytes, cumulative since the group was made
  uint64_t received;
};

class Group {
 public:
  // Joins the group: starts listening and publishes this rank's address. Connections to the
  // other ranks are made when first needed.
  explicit Group(GroupOptions options);
  ~Group();

  int rank() const { return options_.rank; }
  int size() const { return options_.size; }
  std::chrono::milliseconds timeout() const { return std::chrono::milliseconds(timeoutMs_.load()); }
  // The timeout of collectives issued from now on (torch's ProcessGroup.set_timeout).
  void setTimeout(std::chrono::milliseconds timeout) { timeoutMs_.store(timeout.count()); }
  const algorithms::Tuning& tuning() const { return options_.tuning; }
  // The group's store, its keys scoped to this instance of the group (generation.h).
  Store& store() const { return *options_.store; }
  std::shared_ptr<Store> sharedStore() const { return options_.store; }
  // The host of every rank (the same on every rank of the group).
  const bootstrap::HostLayout& hosts() const { return context_->hosts(); }

  // Runs one collective: assigns the next sequence number, builds the
  // Collective with a deadline of `timeout` (the group's when zero) and calls
  // body(c). Errors are rethrown with the collective's name, sequence number and
  // this rank, after aborting the group. Call from the communication thread.
  // The trace and the flight recorder name `op` as asked (AVG, PREMUL_SUM); the
  // collective runs op.op.
  void run(algorithms::CollectiveKind kind, DataType dtype, const AskedReduce& op, int root,
           std::chrono::milliseconds timeout,
           const std::function<void(algorithms::Collective&)>& body);

  // Tells the next run() what the caller knows for its trace event (when it was
  // issued, its size). Call from the communication thread, right before run().
  void noteCall(const CallNote& note) { note_ = note; }

  PointToPoint& p2p() { return *p2p_; }
  // The group's flight recorder, or nullptr when it is off. Callers that issue
  // collectives ahead of run() record them with issue() and pass the entry in
  // CallNote::flightEntry.
  FlightRecorder* flightRecorder() { return flight_.get(); }

  // Starts the process's trace session with this group's ranks (collective:
  // every rank calls it). See trace_session.h.
  void startTracing(const TraceConfig& config);

  // Why the group failed: a deadline passed, a peer failed (its connection broke or it said
  // so), something on this rank, or an abort.
  enum class Failure { kNone, kTimeout, kPeer, kLocal, kAborted };
  // Fails the group for good; safe to call from any thread. The first failure is kept.
  void abort(const std::string& reason, Failure kind = Failure::kAborted);
  // The first failure and its reason (kNone, "" while the group works); any thread.
  std::pair<Failure, std::string> failure() const {
    std::lock_guard<std::mutex> lock(brokenMutex_);
    return {brokenKind_, broken_};
  }
  uint64_t collectivesIssued() const { return nextSeq_; }
  // The transport of each peer's collective connection ("shm", "tcp"; "self" for this rank;
  // "none" while not connected).
  std::vector<std::string> transports() const;
  // Bytes moved over each connection to another rank, as counted by the transports
  // themselves: what the collectives actually sent, not what a formula says they should.
  // One entry per peer and channel, in that order; transport "none" and zero bytes for a
  // connection not made. Safe to call from any thread (the counters only grow).
  std::vector<ConnectionTraffic> traffic() const;
  // The peers this rank holds a collective, or a point-to-point, connection to (ascending).
  // Safe to call from any thread.
  std::vector<int> collectivePeers() const;
  std::vector<int> pointToPointPeers() const;

 private:
  void runCollective(algorithms::CollectiveKind kind, DataType dtype, ReduceOp op, int root,
                     std::chrono::milliseconds timeout,
                     const std::function<void(algorithms::Collective&)>& body,
                     CollectiveOutcome* outcome, FlightRecorder::Entry flight);
  // Records the failure of `flight`, dumps the flight recorder and returns what
  // the error message says about the dump.
  std::string recordFailure(FlightRecorder::Entry flight, const std::string& message);

  GroupOptions options_;
  std::atomic<std::chrono::milliseconds::rep> timeoutMs_;
  std::string token_;  // the group's connection token (from the store)
  std::unique_ptr<transport::PairMaker> pairMaker_;
  std::unique_ptr<bootstrap::Connector> connector_;
  std::unique_ptr<transport::Context> context_;
  std::unique_ptr<PointToPoint> p2p_;
  uint64_t nextSeq_ = 0;
  CallNote note_;                             // for the next run()'s trace event
  std::unique_ptr<CollectiveTracer> tracer_;  // made when tracing is first on
  std::shared_ptr<FlightRecorder> flight_;    // null when off; shared with the dump registry
  algorithms::Workspace workspace_;           // only touched by the communication thread
  mutable std::mutex brokenMutex_;
  std::string broken_;
  Failure brokenKind_ = Failure::kNone;
};

}  // namespace ringx
