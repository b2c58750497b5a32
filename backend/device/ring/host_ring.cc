#include "backend/device/ring/host_ring.h"

#include <sched.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/reduce/reduce.h"
#include "backend/transport/shm/segment.h"
#include "base/error.h"

namespace ringx::device_ring {
namespace {

using transport::shm::Segment;

// protocol.h's Exec on a CPU thread: the thread is its own leader, counters are C++ atomics,
// and data moves through the CPU reduction kernels (the GPU's give the same bits).
struct HostExec {
  DataType dtype;
  ReduceOp op;
  uint32_t elementSize;
  unsigned spins = 0;

  bool leader() const { return true; }
  int agree(int v) const { return v; }
  uint64_t clock() const { return static_cast<uint64_t>(steadyNs()); }
  uint64_t load(const uint64_t* p) const { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
  void store(uint64_t* p, uint64_t v) const { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
  void publish(uint64_t* p, uint64_t v) {
    spins = 0;
    store(p, v);
  }
  // Spin briefly, then give the core away: the ring's threads outnumber the cores in CI.
  void pause() {
    if (++spins < 64) return;
    if (spins < 4096) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  void combine(void* d1, void* d2, const void* a, const void* b, uint64_t count) const {
    if (count == 0) return;
    const size_t bytes = count * elementSize;
    void* first = d1 != nullptr ? d1 : d2;
    if (first == nullptr) return;
    if (a != nullptr && b != nullptr) {
      reduce::reduce(op, dtype, first, a, b, count);
    } else if (first != (a != nullptr ? a : b)) {
      std::memcpy(first, a != nullptr ? a : b, bytes);
    }
    if (d1 != nullptr && d2 != nullptr) std::memcpy(d2, d1, bytes);
  }
};

// Each channel is a thread that runs the jobs launched, in order, as a stream would.
class HostInstance : public Instance {
 public:
  HostInstance() : control_(std::make_unique<HostControl>()) {
    std::memset(control_.get(), 0, sizeof(HostControl));
  }
  ~HostInstance() override {
    join();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closing_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }

  const char* name() const override { return "cpu-shm"; }

  std::vector<uint8_t> createRegion(size_t bytes, const RegionHeader& head) override {
    local_ = Segment::createUnnamed(bytes);
    std::memcpy(local_.data(), &head, sizeof(head));
    const std::string path = local_.procPath();
    return std::vector<uint8_t>(path.begin(), path.end());
  }
  char* openRegion(int peer, const std::vector<uint8_t>& handle, size_t bytes) override {
    peers_.push_back(Segment::openPath(std::string(handle.begin(), handle.end()), bytes));
    auto* head = reinterpret_cast<const RegionHeader*>(peers_.back().data());
    RINGX_CHECK(head->magic == kRegionMagic && head->version == kLayoutVersion &&
                    static_cast<int>(head->rank) == peer,
                "ringx: the device ring region that rank ", peer,
                " posted is not one (or of another ringx version)");
    return static_cast<char*>(peers_.back().data());
  }
  char* localRegion() override { return static_cast<char*>(local_.data()); }
  HostControl* hostControl() override { return control_.get(); }
  HostControl* kernelControl() override { return control_.get(); }

  void launch(const RingJob& job) override {
    std::lock_guard<std::mutex> lock(mutex_);
    while (threads_.size() < job.geometry.channels) {
      const int ch = static_cast<int>(threads_.size());
      done_.push_back(std::make_unique<std::atomic<uint64_t>>(0));
      queues_.emplace_back();
      threads_.emplace_back([this, ch] { channelThread(ch); });
    }
    for (auto& queue : queues_) queue.push_back(job);
    launched_ = job.sequence;
    wake_.notify_all();
  }
  int64_t hostNs(uint64_t clock) override { return static_cast<int64_t>(clock); }
  bool finished(uint64_t sequence) override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& done : done_) {
      if (done->load(std::memory_order_acquire) < sequence) return false;
    }
    return true;
  }
  void join() override {
    uint64_t last;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      last = launched_;
    }
    while (!finished(last)) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }

 private:
  void channelThread(int ch) {
    for (;;) {
      RingJob job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return closing_ || !queues_[ch].empty(); });
        if (queues_[ch].empty()) return;
        job = queues_[ch].front();
        queues_[ch].pop_front();
      }
      HostExec ex{job.dtype, job.reduceOp, job.elementSize};
      try {
        runChannel(ex, job, ch);
      } catch (const std::exception&) {
        // The kernels throw only for a pair the checks let through; record it as a stop.
        __atomic_store_n(&statusOf(job, ch).failedPeer, job.rank, __ATOMIC_RELEASE);
        __atomic_store_n(&statusOf(job, ch).state, kFailed, __ATOMIC_RELEASE);
      }
      done_[ch]->store(job.sequence, std::memory_order_release);
    }
  }

  Segment local_;
  std::vector<Segment> peers_;
  std::unique_ptr<HostControl> control_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::deque<RingJob>> queues_;  // per channel: the jobs it has yet to run
  std::vector<std::thread> threads_;
  std::vector<std::unique_ptr<std::atomic<uint64_t>>> done_;  // per channel: last job run
  uint64_t launched_ = 0;
  bool closing_ = false;
};

}  // namespace

std::unique_ptr<Instance> makeHostInstance() { return std::make_unique<HostInstance>(); }

}  // namespace ringx::device_ring
