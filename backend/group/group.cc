#include "backend/group/group.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/bootstrap/sockets.h"
#include "backend/store/generation.h"
#include "backend/transport/registry.h"
#include "base/environment.h"
#include "base/error.h"
#include "trace/record/recorder.h"

namespace ringx {
namespace {

// How long a rank whose connection broke waits for the peer's failure notice (the reason
// the peer gave up), which travels on another connection and may arrive a little later.
constexpr std::chrono::milliseconds kFailureNoticeWait{250};

// What dumps call the group (never the token itself: it lets a process join the group's rings).
std::string tokenHash(const std::string& token) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a
  for (unsigned char c : token) h = (h ^ c) * 1099511628211ull;
  static const char* hex = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4) out[i] = hex[h & 15];
  return out;
}

}  // namespace

algorithms::Tuning tuningFromEnvironment() {
  algorithms::Tuning tuning;
  tuning.segmentBytes =
      std::max<size_t>(4096, sizeFromEnvironment("RINGX_SEGMENT_BYTES", tuning.segmentBytes));
  tuning.directAllreduceMaxBytes =
      sizeFromEnvironment("RINGX_DIRECT_ALLREDUCE_MAX_BYTES", tuning.directAllreduceMaxBytes);
  tuning.directBroadcastMaxBytes =
      sizeFromEnvironment("RINGX_DIRECT_BROADCAST_MAX_BYTES", tuning.directBroadcastMaxBytes);
  tuning.directMaxRanks = static_cast<int>(std::max<size_t>(
      1,
      sizeFromEnvironment("RINGX_DIRECT_MAX_RANKS", static_cast<size_t>(tuning.directMaxRanks))));
  if (const char* text = std::getenv("RINGX_HIERARCHICAL"); text && *text) {
    const std::string mode = text;
    RINGX_CHECK(mode == "auto" || mode == "on" || mode == "off", "ringx: RINGX_HIERARCHICAL='",
                mode, "' is not one of auto, on, off");
    using Hierarchy = algorithms::Tuning::Hierarchy;
    tuning.hierarchical = mode == "on"    ? Hierarchy::kOn
                          : mode == "off" ? Hierarchy::kOff
                                          : Hierarchy::kAuto;
  }
  return tuning;
}

Group::Group(GroupOptions options)
    : options_(std::move(options)), timeoutMs_(options_.timeout.count()) {
  RINGX_CHECK(options_.size >= 1 && options_.rank >= 0 && options_.rank < options_.size,
              "ringx: rank ", options_.rank, " is not within a group of size ", options_.size);
  RINGX_CHECK(options_.store != nullptr, "ringx: a store is required");
  const auto deadline = Clock::now() + options_.timeout;
  // This instance of the group agrees on a generation before it reads anything else: the
  // store may hold what earlier instances wrote (generation.h). From here on every key is
  // the generation's own. Rank 0 drew the group's token; only members can read it.
  const Generation generation =
      joinGeneration(*options_.store, options_.rank, options_.size, deadline, options_.name);
  options_.store = scopedStore(generation, options_.store);
  Store& store = *options_.store;
  const std::string token = generation.token;
  token_ = token;
  const int rank = options_.rank, size = options_.size;
  connector_ = std::make_unique<bootstrap::Connector>(store, rank, size, token);
  pairMaker_ = std::make_unique<transport::PairMaker>(rank, token, "coll", options_.mesh);
  // Until the host layout says otherwise, as many of the group's ranks may share this host as
  // the group has: peers may connect before this rank has read the layout.
  pairMaker_->setLocalRanks(size);
  // Point-to-point stays on TCP: its progress thread sleeps in poll(), and its
  // traffic is not where the bandwidth goes.
  // A peer's failure notice: this rank may have no error of its own (it never got to
  // the collective the others gave up on), and its dump shows exactly that.
  auto onNotice = [name = options_.name](const std::string& notice) {
    flight::requestDump(strCat("a rank of group '", name, "' gave up: ", notice));
  };
  p2p_ = std::make_unique<PointToPoint>(
      rank, size,
      [this](int peer) {
        connector_->connect(bootstrap::Connector::kPointToPoint, peer, Clock::now() + timeout());
      },
      onNotice);
  connector_->setChannel(bootstrap::Connector::kCollective,
                         [maker = pairMaker_.get()](int peer, int fd, Deadline deadline) {
                           return maker->makePair(peer, fd, deadline);
                         });
  connector_->setChannel(
      bootstrap::Connector::kPointToPoint,
      [mesh = options_.mesh](int peer, int fd, Deadline) {
        return transport::pointToPointPair(peer, fd, mesh);
      },
      [p2p = p2p_.get()](int peer, std::unique_ptr<bootstrap::Connection> pair) {
        p2p->adopt(peer, transport::asPair(std::move(pair)));
      });
  connector_->start();
  // A collective connection brings the point-to-point one first: a rank that sees a
  // collective connection break looks there for the peer's reason (abort()), and the peer
  // has it in place before any collective byte arrives.
  auto connectCollective = [this](int peer, Deadline deadline) {
    connector_->connect(bootstrap::Connector::kPointToPoint, peer, deadline);
    return transport::asPair(
        connector_->connect(bootstrap::Connector::kCollective, peer, deadline));
  };
  // Which host every rank is on, for the hierarchical algorithms: rank 0 decides (fake hosts
  // when asked for) and every rank reads its one key.
  RINGX_CHECK(options_.fakeHosts.empty() || options_.fakeHosts.size() == static_cast<size_t>(size),
              "ringx: fake hosts for ", options_.fakeHosts.size(), " ranks given to a group of ",
              size);
  const char* fakeText = std::getenv("RINGX_FAKE_HOSTS");
  const bool faked = !options_.fakeHosts.empty() || (fakeText && *fakeText);
  std::unique_ptr<bootstrap::HostLayout> fake;
  if (rank == 0 && !options_.fakeHosts.empty()) {
    fake = std::make_unique<bootstrap::HostLayout>(options_.fakeHosts);
  } else if (rank == 0 && faked) {
    const size_t perHost = sizeFromEnvironment("RINGX_FAKE_HOSTS", 0);
    RINGX_CHECK(perHost >= 1, "ringx: RINGX_FAKE_HOSTS='", fakeText,
                "' must be a number of ranks per host, 1 or more");
    fake = std::make_unique<bootstrap::HostLayout>(
        bootstrap::HostLayout::blocks(size, static_cast<int>(std::min<size_t>(perHost, size))));
  }
  bootstrap::HostLayout layout = size > 1 ? connector_->hostLayout(deadline, fake.get())
                                          : bootstrap::HostLayout::oneHost(size);
  // Ranks of this host weigh in the Context's spin policy; without shared memory it never spins.
  // Fake hosts are one machine's ranks: all of them share its cores.
  int localRanks = 1;
  if (options_.mesh.sharedMemory && size > 1) {
    localRanks = faked ? size : layout.ranksOnHost(layout.hostOf(rank));
    pairMaker_->setLocalRanks(localRanks);
  }
  context_ = std::make_unique<transport::Context>(rank, size, connectCollective, localRanks,
                                                  std::move(layout));
  const bootstrap::HostLayout& hosts = context_->hosts();
  // The peers of the structured algorithms (ring neighbours, trees, recursive doubling:
  // ranks at distance 2^k either way) are read from the store now, so that their first
  // collective needs no store round trip; other peers' addresses are read when first needed.
  // Where the group spans hosts, the hierarchical algorithms' peers too: a leader's, the ranks
  // of its host next to this one, and (on a leader) the leaders at distance 2^k.
  std::vector<int> structured;
  for (int distance = 1; distance < size; distance *= 2) {
    structured.push_back((rank + distance) % size);
    structured.push_back((rank - distance % size + size) % size);
  }
  if (hosts.hosts() > 1 && hosts.largestHost() > 1) {
    const std::vector<int> local = hosts.ranksOn(hosts.hostOf(rank));
    const auto at = std::find(local.begin(), local.end(), rank) - local.begin();
    const int n = static_cast<int>(local.size());
    structured.push_back(local[0]);
    structured.push_back(local[(at + 1) % n]);
    structured.push_back(local[(at + n - 1) % n]);
    if (hosts.isLeader(rank)) {
      const std::vector<int>& leaders = hosts.leaders();
      const int h = hosts.hostOf(rank), count = hosts.hosts();
      for (int distance = 1; distance < count; distance *= 2) {
        structured.push_back(leaders[(h + distance) % count]);
        structured.push_back(leaders[(h - distance % count + count) % count]);
      }
    }
  }
  structured.erase(std::remove(structured.begin(), structured.end(), rank), structured.end());
  std::sort(structured.begin(), structured.end());
  structured.erase(std::unique(structured.begin(), structured.end()), structured.end());
  connector_->prefetchAddresses(structured, deadline);
  const int64_t entries = options_.flightRecorderEntries >= 0
                              ? options_.flightRecorderEntries
                              : static_cast<int64_t>(FlightRecorder::entriesFromEnvironment());
  if (entries > 0) {
    flight_ = std::make_shared<FlightRecorder>(options_.name, tokenHash(token), options_.rank,
                                               options_.size, static_cast<size_t>(entries));
    flight::add(flight_);
  }
}

Group::~Group() {
  if (flight_) flight::remove(flight_.get());
  // The listener hands pairs to p2p_ and context_: stop it before they go.
  connector_.reset();
}

void Group::startTracing(const TraceConfig& config) {
  TraceSession::start(config, *options_.store, rank(), size(), token_, options_.timeout);
}

std::vector<std::string> Group::transports() const {
  std::vector<std::string> out;
  for (int peer = 0; peer < size(); ++peer) {
    const transport::Pair* pair = context_->connectedPair(peer);
    out.push_back(peer == rank() ? "self" : pair ? pair->transportName() : "none");
  }
  return out;
}

std::vector<ConnectionTraffic> Group::traffic() const {
  std::vector<ConnectionTraffic> out;
  auto entry = [](int peer, const char* channel, const transport::Pair* pair) {
    if (!pair) return ConnectionTraffic{peer, channel, "none", 0, 0};
    return ConnectionTraffic{peer, channel, pair->transportName(), pair->sendCompleted(),
                             pair->recvCompleted()};
  };
  for (int peer = 0; peer < size(); ++peer) {
    if (peer == rank()) continue;
    out.push_back(entry(peer, "collective", context_->connectedPair(peer)));
    out.push_back(entry(peer, "p2p", p2p_->pair(peer)));
  }
  return out;
}

std::vector<int> Group::collectivePeers() const {
  std::vector<int> out;
  for (int peer = 0; peer < size(); ++peer) {
    if (context_->connectedPair(peer)) out.push_back(peer);
  }
  return out;
}

std::vector<int> Group::pointToPointPeers() const {
  std::vector<int> out;
  for (int peer = 0; peer < size(); ++peer) {
    if (peer != rank() && p2p_->pair(peer)) out.push_back(peer);
  }
  return out;
}

void Group::abort(const std::string& reason, Failure kind) {
  {
    std::lock_guard<std::mutex> lock(brokenMutex_);
    if (!broken_.empty()) return;
    broken_ = reason;
    brokenKind_ = kind;
  }
  // Tell the peers first, then break the connections: a peer that sees the break finds the
  // reason already on its point-to-point connection. Peers that dial this rank from now on
  // are told it is gone.
  p2p_->announceFailure(reason);
  connector_->close();
  context_->shutdown();
  p2p_->abort(reason);
}

void Group::run(algorithms::CollectiveKind kind, DataType dtype, const AskedReduce& op, int root,
                std::chrono::milliseconds timeout,
                const std::function<void(algorithms::Collective&)>& body) {
  const CallNote note = note_;
  note_ = CallNote{};
  const bool reduces = kind == algorithms::CollectiveKind::kAllreduce ||
                       kind == algorithms::CollectiveKind::kReduce ||
                       kind == algorithms::CollectiveKind::kReduceScatter;
  FlightRecorder::Entry flight = 0;
  if (flight_) {
    flight = flight_->start(note.flightEntry, static_cast<int64_t>(nextSeq_),
                            algorithms::collectiveName(kind), dtype, reduces, op, root, note.bytes);
  }
  if (!trace::Recorder::enabled()) {
    runCollective(kind, dtype, op.op, root, timeout, body, nullptr, flight);
    return;
  }
  if (!tracer_) tracer_ = std::make_unique<CollectiveTracer>(options_.name, rank(), size());
  CollectiveOutcome outcome;
  outcome.op = algorithms::collectiveName(kind);
  outcome.seq = nextSeq_;
  outcome.dtype = dtype;
  outcome.reduceOp = op;
  outcome.reduces = reduces;
  outcome.root = root;
  const int64_t startNs = trace::nowNs();
  try {
    runCollective(kind, dtype, op.op, root, timeout, body, &outcome, flight);
  } catch (const std::exception& e) {
    tracer_->record(outcome, note, startNs, trace::nowNs(), e.what());
    throw;
  }
  tracer_->record(outcome, note, startNs, trace::nowNs(), nullptr);
}

void Group::runCollective(algorithms::CollectiveKind kind, DataType dtype, ReduceOp op, int root,
                          std::chrono::milliseconds timeout,
                          const std::function<void(algorithms::Collective&)>& body,
                          CollectiveOutcome* outcome, FlightRecorder::Entry flight) {
  const uint64_t seq = nextSeq_++;
  const char* name = algorithms::collectiveName(kind);
  {
    std::unique_lock<std::mutex> lock(brokenMutex_);
    if (!broken_.empty()) {
      const std::string message =
          strCat("ringx: ", name, " #", seq, " cannot run on rank ", rank(),
                 ": this process group failed earlier and cannot be used again (", broken_,
                 "). Destroy it and create a new one, or restart the job.");
      lock.unlock();
      if (flight_) flight_->fail(flight, message);  // dumped when it failed
      RINGX_THROW(Error, message);
    }
  }
  if (timeout.count() <= 0) timeout = this->timeout();
  algorithms::CallSignature call;
  call.kind = kind;
  call.seq = seq;
  call.dtype = dtype;
  call.op = op;
  call.root = root;
  auto fail = [&](const std::exception& e) {
    // Aborted on this rank while it ran (abort(), SHRINK_ABORT): the abort is why, the broken
    // connection only how it showed.
    const std::pair<Failure, std::string> first = failure();
    const std::string why = first.first == Failure::kAborted
                                ? strCat(first.second, " (", e.what(), ")")
                                : std::string(e.what());
    return strCat("ringx: ", name, " #", seq, " failed on rank ", rank(), " of ", size(),
                  " (group '", options_.name, "', timeout ", timeout.count(), " ms): ", why);
  };
  try {
    algorithms::Collective c(*context_, call, Clock::now() + timeout, &workspace_);
    if (outcome == nullptr) {
      body(c);
    } else {
      // Fill the trace outcome whether the body finishes or throws.
      struct Fill {
        algorithms::Collective& c;
        CollectiveOutcome& out;
        transport::Context& context;
        ~Fill() {
          out.algorithm = c.algorithm();
          out.deviceBeginNs = c.deviceBeginNs();
          out.deviceEndNs = c.deviceEndNs();
          out.peers = c.peers();
          bool shm = false, tcp = false;
          for (int p : out.peers) {
            const transport::Pair* pair = context.connectedPair(p);
            if (!pair) continue;
            const char* name = pair->transportName();
            shm |= std::strcmp(name, "shm") == 0;
            tcp |= std::strcmp(name, "tcp") == 0;
          }
          out.transport = shm && tcp ? "shm+tcp" : shm ? "shm" : tcp ? "tcp" : nullptr;
        }
      } fill{c, *outcome, *context_};
      body(c);
    }
    if (flight_) flight_->finish(flight, c.algorithm());
  } catch (const algorithms::MismatchError& e) {
    std::string message = fail(e);
    abort(message, Failure::kLocal);
    throw algorithms::MismatchError(message + recordFailure(flight, message));
  } catch (const TimeoutError& e) {
    std::string message = fail(e);
    abort(message, Failure::kTimeout);
    throw TimeoutError(message + recordFailure(flight, message));
  } catch (const PeerError& e) {
    std::string message = fail(e);
    std::string theirs = p2p_->failureAnnounced(e.peer(), kFailureNoticeWait);
    if (!theirs.empty()) message += " <- reported first: " + theirs;
    abort(message, Failure::kPeer);
    throw PeerError(message + recordFailure(flight, message));
  } catch (const std::exception& e) {
    std::string message = fail(e);
    abort(message, Failure::kLocal);
    throw Error(message + recordFailure(flight, message));
  }
}

std::string Group::recordFailure(FlightRecorder::Entry flight, const std::string& message) {
  // After abort(): the peers hear of the failure first, the file I/O comes after.
  if (!flight_) return "";
  flight_->fail(flight, message);
  return flight::dumpAfterFailure(message);
}

}  // namespace ringx
