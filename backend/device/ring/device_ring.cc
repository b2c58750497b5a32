#include "backend/device/ring/device_ring.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "backend/reduce/reduce.h"
#include "base/error.h"

namespace ringx::device_ring {
namespace {

constexpr auto kStoreTimeout = std::chrono::milliseconds(1000);

// What a rank posts at set-up: its pid and geometry, then its region's handle.
struct Posted {
  int64_t pid;
  Geometry geometry;
};

std::chrono::milliseconds untilDeadline(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

}  // namespace

bool processRuns(int64_t pid) {
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
  // A process that exited but was not reaped yet is a zombie: as dead as it gets. (Plain
  // read(2): a process that goes away while its stat is read makes the read fail with ESRCH.)
  const int fd = ::open(("/proc/" + std::to_string(pid) + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno != ENOENT && errno != ESRCH;
  char text[512];
  const ssize_t got = ::read(fd, text, sizeof(text) - 1);
  ::close(fd);
  if (got <= 0) return false;
  text[got] = 0;
  const char* paren = std::strrchr(text, ')');
  if (paren == nullptr || paren[1] == 0 || paren[2] == 0) return true;
  return paren[2] != 'Z' && paren[2] != 'X';
}

DeviceRing::DeviceRing(Store& store, const std::string& keyPrefix, int rank, int size,
                       std::unique_ptr<Instance> instance, const Geometry& geometry,
                       Deadline deadline)
    : rank_(rank),
      size_(size),
      keyPrefix_(keyPrefix),
      geometry_(geometry),
      instance_(std::move(instance)) {
  RINGX_CHECK(size >= 1 && size <= kMaxRanks, "ringx: the device ring takes 1 to ", kMaxRanks,
              " ranks of one host, not ", size);
  RINGX_CHECK(geometry.channels >= 1 && geometry.channels <= kMaxChannels,
              "ringx: the device ring takes 1 to ", kMaxChannels, " channels, not ",
              geometry.channels);
  // depth >= 2 is what keeps the ring from deadlocking (protocol.h).
  RINGX_CHECK(geometry.depth >= 2, "ringx: the device ring needs at least 2 slots per channel");
  RINGX_CHECK(
      geometry.slotBytes >= 16 && geometry.slotBytes % 16 == 0 && geometry.oneShotBytes % 16 == 0,
      "ringx: the device ring's slot sizes must be multiples of 16 bytes");

  // Every rank ends set-up with the same verdict: a rank that cannot make or map a region
  // still posts (a record without a handle, then its error), so that no peer waits for it until
  // the deadline, and every rank's constructor throws naming the first rank that failed.
  RegionHeader head{};
  head.magic = kRegionMagic;
  head.version = kLayoutVersion;
  head.rank = static_cast<uint32_t>(rank);
  head.geometry = geometry;
  const size_t bytes = regionBytes(geometry);
  std::string failure;
  std::vector<uint8_t> handle;
  try {
    handle = instance_->createRegion(bytes, head);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  Posted mine{static_cast<int64_t>(::getpid()), geometry};
  std::vector<uint8_t> posted(sizeof(mine) + handle.size());
  std::memcpy(posted.data(), &mine, sizeof(mine));
  if (!handle.empty()) std::memcpy(posted.data() + sizeof(mine), handle.data(), handle.size());
  store.set(keyPrefix + "/" + std::to_string(rank), posted);

  regions_.assign(size, nullptr);
  pids_.assign(size, 0);
  pids_[rank] = mine.pid;
  if (failure.empty()) regions_[rank] = instance_->localRegion();
  for (int peer = 0; peer < size && failure.empty(); ++peer) {
    if (peer == rank) continue;
    try {
      std::vector<uint8_t> theirs =
          store.get(keyPrefix + "/" + std::to_string(peer), untilDeadline(deadline));
      RINGX_CHECK(theirs.size() >= sizeof(Posted),
                  "ringx: the device ring's set-up record of rank ", peer, " is truncated");
      Posted p;
      std::memcpy(&p, theirs.data(), sizeof(p));
      RINGX_CHECK(std::memcmp(&p.geometry, &geometry, sizeof(Geometry)) == 0, "ringx: rank ", peer,
                  " set its device ring up with other sizes than rank ", rank,
                  " (channels, slots, slot bytes): every rank must use the same settings");
      pids_[peer] = p.pid;
      if (theirs.size() == sizeof(Posted)) break;  // it failed: its verdict says why
      regions_[peer] = instance_->openRegion(
          peer, std::vector<uint8_t>(theirs.begin() + sizeof(Posted), theirs.end()), bytes);
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  store.setString(keyPrefix + "/verdict/" + std::to_string(rank), failure);
  for (int peer = 0; peer < size; ++peer) {
    const std::string verdict =
        peer == rank ? failure
                     : store.getString(keyPrefix + "/verdict/" + std::to_string(peer),
                                       untilDeadline(deadline));
    if (!verdict.empty()) {
      RINGX_THROW(Error, "ringx: the device ring could not be set up: rank ", peer, ": ", verdict);
    }
  }
}

DeviceRing::~DeviceRing() {
  if (finished_.load() < sequence_) {
    // Destroyed with collectives outstanding (an exception unwound past them): stop them.
    __atomic_store_n(&instance_->hostControl()->stop.value, 1 + rank_, __ATOMIC_RELEASE);
  }
  instance_->join();
}

void DeviceRing::leave(Store& store, Deadline deadline) {
  while (finished_.load() < sequence_ && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!broken_.empty() || finished_.load() < sequence_) return;
    broken_ = "this rank left the ring";
  }
  // Once every rank is past its last collective no kernel reads a region; once every rank
  // has closed its mappings, each may free its own.
  meetPeers(store, "finished", deadline);
  instance_->closePeerRegions();
  meetPeers(store, "closed", deadline);
}

void DeviceRing::meetPeers(Store& store, const std::string& phase, Deadline deadline) {
  const std::string prefix = keyPrefix_ + "/leave/" + phase + "/";
  store.setString(prefix + std::to_string(rank_), "");
  for (int peer = 0; peer < size_; ++peer) {
    auto pause = std::chrono::microseconds(100);
    while (peer != rank_ && !store.check(prefix + std::to_string(peer)) &&
           processRuns(pids_[peer]) && Clock::now() < deadline) {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(20000));
    }
  }
}

uint64_t DeviceRing::start(RingOp op, const void* input, void* output, uint64_t count,
                           DataType dtype, ReduceOp reduceOp, const std::string& what) {
  if (op != RingOp::kAllgather) reduce::checkSupported(reduceOp, dtype);
  RINGX_CHECK(
      op != RingOp::kOneShotAllreduce || count * elementSize(dtype) <= geometry_.oneShotBytes,
      "ringx: a one-shot allreduce takes at most ", geometry_.oneShotBytes, " bytes, not ",
      count * elementSize(dtype));
  // The status slot of collective `sequence_ + 1` is free once the one kJobSlots before it has
  // been watched to its end (by finish(), maybe on another thread). A broken ring refuses.
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!broken_.empty()) {
        throw PeerError(
            strCat("ringx: ", what,
                   " cannot run: the device ring cannot be used again since: ", broken_),
            -1);
      }
    }
    if (sequence_ + 1 <= finished_.load() + kJobSlots) break;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  RingJob job{};
  job.op = op;
  job.dtype = dtype;
  // All-gather only copies; any op the type has picks the kernel.
  job.reduceOp = op == RingOp::kAllgather ? ReduceOp::kSum : reduceOp;
  job.elementSize = static_cast<uint32_t>(elementSize(dtype));
  job.ranks = size_;
  job.rank = rank_;
  job.geometry = geometry_;
  job.count = count;
  job.input = static_cast<const char*>(input);
  job.output = static_cast<char*>(output);
  for (int r = 0; r < size_; ++r) job.regions[r] = regions_[r];
  for (uint32_t ch = 0; ch < geometry_.channels; ++ch) job.ringBase[ch] = ringCount_[ch];
  job.oneShotBase = oneShotCount_;
  job.sequence = ++sequence_;
  job.control = instance_->kernelControl();

  JobStatus& status = instance_->hostControl()->job[job.sequence % kJobSlots];
  for (uint32_t ch = 0; ch < geometry_.channels; ++ch) {
    __atomic_store_n(&status.channel[ch].state, kRunning, __ATOMIC_RELAXED);
    __atomic_store_n(&status.channel[ch].waitingOn, static_cast<uint64_t>(rank_), __ATOMIC_RELAXED);
    __atomic_store_n(&status.channel[ch].waitingFor, 0, __ATOMIC_RELEASE);
  }
  what_[job.sequence % kJobSlots] =
      strCat(what, " #", job.sequence, " (", count, " x ", dataTypeName(dtype), ")");
  for (uint32_t ch = 0; ch < geometry_.channels; ++ch) ringCount_[ch] += ringMessages(job, ch);
  if (op == RingOp::kOneShotAllreduce) ++oneShotCount_;
  instance_->launch(job);
  return job.sequence;
}

DeviceSpan DeviceRing::finish(uint64_t sequence, Deadline deadline) {
  RINGX_ENFORCE_EQ(sequence, finished_.load() + 1);
  HostControl* control = instance_->hostControl();
  JobStatus& status = control->job[sequence % kJobSlots];
  auto stateOf = [&](uint32_t ch) {
    return __atomic_load_n(&status.channel[ch].state, __ATOMIC_ACQUIRE);
  };
  auto sleepFor = std::chrono::microseconds(1);
  int blamed = -1;
  std::string detail;
  auto settled = [&] {
    for (uint32_t ch = 0; ch < geometry_.channels; ++ch) {
      if (stateOf(ch) == kRunning) return false;
    }
    return true;
  };
  while (!settled()) {
    // Past the deadline, with the kernels told to stop, channels that still say "running"
    // belong to a kernel that died (a device fault) or that the device never ran: only the
    // driver can tell, and a fault is thrown from here.
    if (blamed >= 0 && instance_->finished(sequence)) break;
    bool failed = false;
    for (uint32_t ch = 0; ch < geometry_.channels; ++ch) failed |= stateOf(ch) == kFailed;
    if (!failed) {
      // Only a peer a channel waits for now can stop it: one that left after doing its part
      // (its slots stay readable) is no failure, and one that a further rank waits for is
      // that rank's to find (its abort then reaches this one, naming the same peer).
      int waitedOn = -1, dead = -1;
      for (uint32_t ch = 0; ch < geometry_.channels; ++ch) {
        if (stateOf(ch) != kRunning) continue;
        const uint64_t peer = __atomic_load_n(&status.channel[ch].waitingOn, __ATOMIC_ACQUIRE);
        if (peer >= static_cast<uint64_t>(size_) || static_cast<int>(peer) == rank_) continue;
        waitedOn = static_cast<int>(peer);
        if (dead < 0 && !processRuns(pids_[waitedOn])) dead = waitedOn;
      }
      int blameNow = -1;
      if (dead >= 0) {
        blameNow = dead;
        if (blamed < 0) detail = strCat("rank ", dead, " (pid ", pids_[dead], ") died");
      } else if (Clock::now() >= deadline) {
        // On a ring of two or a stuck neighbour, the waited-for peer is the one that stopped;
        // further away, it aborts soon with its own blame. With no wait to blame (the device
        // has not run the collective), every wait stops.
        blameNow = waitedOn >= 0 ? waitedOn : rank_;
        if (blamed < 0) {
          detail = waitedOn >= 0 ? strCat("rank ", waitedOn,
                                          " stopped taking part: the deadline passed while "
                                          "waiting for it")
                                 : std::string("the deadline passed before the collective ran");
        }
      }
      if (blameNow >= 0 && blameNow != blamed) {
        // A second peer to blame: stop every wait (the stop word names one rank).
        const int word = blamed < 0 ? blameNow : rank_;
        if (blamed < 0) blamed = blameNow;
        __atomic_store_n(&control->stop.value, static_cast<uint64_t>(1 + word), __ATOMIC_RELEASE);
      }
    }
    // Poll fast while the collective is young (small ones end in microseconds), then back off:
    // this thread must not take a core from the training.
    std::this_thread::sleep_for(sleepFor);
    sleepFor = std::min(sleepFor * 2, std::chrono::microseconds(1000));
  }
  // A peer that left after its part was done is no failure: every channel then finished
  // although the host asked them to stop (and a later collective, needing it, will fail).
  for (uint32_t ch = 0; ch < geometry_.channels; ++ch) {
    if (stateOf(ch) == kFinished) continue;
    const ChannelStatus& s = status.channel[ch];
    int peer = static_cast<int>(__atomic_load_n(&s.failedPeer, __ATOMIC_ACQUIRE));
    const uint64_t cause = __atomic_load_n(&s.cause, __ATOMIC_ACQUIRE);
    if (cause == kCauseHost && !detail.empty()) {
      peer = blamed;  // this host stopped it: its own finding says why
    } else if (detail.empty() || peer != blamed) {
      detail = strCat(describe(peer), cause == kCausePeerAborted
                                          ? " (another rank of the ring gave up on it)"
                                      : cause == kCauseBroken ? " (in an earlier collective)"
                                                              : "");
    }
    finished_.store(sequence);
    const uint64_t waited = __atomic_load_n(&s.waitingOn, __ATOMIC_ACQUIRE);
    failWith(sequence, peer,
             waited < static_cast<uint64_t>(size_)
                 ? strCat(detail, "; channel ", ch, " was waiting for rank ", waited)
                 : detail);
  }
  uint64_t begin = ~uint64_t{0}, end = 0;
  for (uint32_t ch = 0; ch < geometry_.channels; ++ch) {
    begin = std::min(begin, __atomic_load_n(&status.channel[ch].beginClock, __ATOMIC_ACQUIRE));
    end = std::max(end, __atomic_load_n(&status.channel[ch].endClock, __ATOMIC_ACQUIRE));
  }
  finished_.store(sequence);
  return DeviceSpan{instance_->hostNs(begin), instance_->hostNs(end)};
}

std::string DeviceRing::describe(int blamed) const {
  if (blamed < 0 || blamed >= size_) return "the ring was stopped";
  if (blamed == rank_) return strCat("rank ", blamed, " (this rank) was stopped");
  return processRuns(pids_[blamed])
             ? strCat("rank ", blamed, " stopped taking part (stuck, or past its deadline)")
             : strCat("rank ", blamed, " (pid ", pids_[blamed], ") died");
}

void DeviceRing::failWith(uint64_t sequence, int blamed, const std::string& detail) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string text = strCat("ringx: ", what_[sequence % kJobSlots], " over the device ring (",
                            instance_->name(), ") failed on rank ", rank_, ": ", detail);
  if (broken_.empty()) {
    broken_ = text;
    text += ". The ring cannot be used again: abort the process group";
  } else {
    text += ". The ring cannot be used again since: " + broken_;
  }
  throw PeerError(text, blamed);
}

void DeviceRing::allreduce(const void* input, void* output, uint64_t count, DataType dtype,
                           ReduceOp op, Deadline deadline) {
  finish(start(allreduceKind(count, dtype), input, output, count, dtype, op, "allreduce"),
         deadline);
}

void DeviceRing::reduceScatter(const void* input, void* output, uint64_t count, DataType dtype,
                               ReduceOp op, Deadline deadline) {
  finish(start(RingOp::kReduceScatter, input, output, count, dtype, op, "reduce_scatter"),
         deadline);
}

void DeviceRing::allgather(const void* input, void* output, uint64_t count, DataType dtype,
                           Deadline deadline) {
  finish(start(RingOp::kAllgather, input, output, count, dtype, ReduceOp::kSum, "allgather"),
         deadline);
}

}  // namespace ringx::device_ring
