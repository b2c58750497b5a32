// ProcessGroupRingx's life: made (from torch's backend registry or makeRingxProcessGroup), split
// into subgroups, coalescing calls, shut down or aborted. Its collectives, and the path every
// one of them takes to the group's communication thread, are in process_group_ringx_collectives.cc.
#include "backend/c10d/process_group_ringx.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <optional>
#include "backend/c10d/cuda_staging.h"  // CudaCollectives, destroyed with the group

#include "backend/c10d/issue_listener.h"
#include "backend/c10d/store_adapter.h"
#include "backend/c10d/tensor_utils.h"
#include "backend/c10d/torch_errors.h"
#include "trace/record/recorder.h"

namespace ringx::c10d_glue {

using algorithms::Collective;
using algorithms::CollectiveKind;
using ::c10d::OpType;

ProcessGroupRingx::ProcessGroupRingx(const c10::intrusive_ptr<::c10d::Store>& store, int rank,
                                     int size, std::chrono::milliseconds timeout, std::string name)
    : BackendBase(rank, size), name_(std::move(name)) {
  GroupOptions options;
  options.rank = rank;
  options.size = size;
  options.store = std::make_shared<C10dStore>(store);
  options.timeout = timeout;
  options.tuning = tuningFromEnvironment();
  options.mesh = transport::meshOptionsFromEnvironment();
  options.name = name_;
  group_ = std::make_unique<Group>(options);
  queue_ = std::make_unique<WorkQueue>();
  // RINGX_TRACE_DIR / RINGX_TRACE_LISTEN: the first ringx group of the process
  // (the default group, whose ranks are the global ranks) starts tracing.
  static std::atomic<bool> environmentChecked{false};
  if (!environmentChecked.exchange(true)) {
    const TraceConfig config = traceConfigFromEnvironment();
    if (config.enabled() && !TraceSession::active()) group_->startTracing(config);
  }
}

namespace {

// How the Python extension lets go of the GIL while a close waits for the group's threads.
ProcessGroupRingx::GilRelease gilRelease;

}  // namespace

void ProcessGroupRingx::setGilRelease(GilRelease gil) { gilRelease = gil; }

ProcessGroupRingx::~ProcessGroupRingx() { close(/*inStep=*/true); }

void ProcessGroupRingx::close(bool inStep) {
  if (closed_.exchange(true)) return;
  // Python drops the last reference (or calls shutdown) with the GIL held. Our threads may
  // be releasing tensors that Python owns, which needs the GIL: joining them while holding
  // it would deadlock, so let go of it while they finish.
  void* released = gilRelease.release ? gilRelease.release() : nullptr;
  queue_.reset();  // finish what was issued while the group still exists
  if (inStep && cuda_) {
    // A peer may still be reading this rank's last slots of the device ring: its region must
    // outlive that (bounded: a peer that never shuts down is not waited for long).
    cuda_->leaveRing(group_->store(),
                     std::min(group_->timeout(), std::chrono::milliseconds(30000)));
  }
  group_.reset();
  if (released) gilRelease.restore(released);
}

void ProcessGroupRingx::checkOpen(const char* collective) const {
  TORCH_CHECK(!closed_.load(), "ringx: ", collective, " on group '", name_,
              "' after the group was shut down or aborted (destroy_process_group); create a "
              "new group");
}

void ProcessGroupRingx::shutdown() { close(/*inStep=*/true); }

void ProcessGroupRingx::abort() {
  if (closed_.load()) return;
  // Fail what is in flight now (and, through the closed connections, on the peers), so that
  // joining the communication thread does not wait out a timeout.
  group_->abort("the process group was aborted on rank " + std::to_string(rank_) +
                " (ProcessGroup.abort or destroy_process_group after an error)");
  close(/*inStep=*/false);
}

// ---- coalescing, splitting, options -------------------------------------------------------------

namespace {
std::atomic<IssueListener> issueListener{nullptr};
}  // namespace

void setIssueListener(IssueListener listener) { issueListener.store(listener); }

void notifyIssued(const c10::intrusive_ptr<RingxWork>& work) {
  if (IssueListener listener = issueListener.load(std::memory_order_relaxed)) listener(work);
}

void ProcessGroupRingx::noteIssued(const c10::intrusive_ptr<RingxWork>& work) {
  notifyIssued(work);
  std::lock_guard<std::mutex> lock(coalescingMutex_);
  if (coalescing_) coalesced_.push_back(work);
}

void ProcessGroupRingx::startCoalescing() {
  checkOpen("startCoalescing");
  std::lock_guard<std::mutex> lock(coalescingMutex_);
  TORCH_CHECK(!coalescing_, "ringx: startCoalescing called twice without endCoalescing");
  coalescing_ = true;
  coalesced_.clear();
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupRingx::endCoalescing() {
  checkOpen("endCoalescing");
  std::vector<c10::intrusive_ptr<RingxWork>> works;
  {
    std::lock_guard<std::mutex> lock(coalescingMutex_);
    TORCH_CHECK(coalescing_, "ringx: endCoalescing called without startCoalescing");
    coalescing_ = false;
    works.swap(coalesced_);
  }
  return RingxWork::whenAll(rank_, OpType::COALESCED, works, group_->timeout());
}

c10::intrusive_ptr<BackendBase> ProcessGroupRingx::split(
    const c10::intrusive_ptr<::c10d::Store>& store, const std::vector<int>& ranks,
    const c10::intrusive_ptr<Options>& opts) {
  checkOpen("split");
  for (size_t i = 0; i < ranks.size(); ++i) {
    TORCH_CHECK_VALUE(ranks[i] >= 0 && ranks[i] < size_, "ringx: split: rank ", ranks[i],
                      " is not in this group of ", size_, " ranks");
  }
  auto me = std::find(ranks.begin(), ranks.end(), rank_);
  if (me == ranks.end()) return nullptr;  // not a member: nothing to connect
  const auto timeout = opts && opts->timeout.count() > 0 ? opts->timeout : group_->timeout();
  std::string name = opts && !opts->group_name.empty() ? opts->group_name : name_ + ":split";
  return c10::make_intrusive<ProcessGroupRingx>(store, static_cast<int>(me - ranks.begin()),
                                                static_cast<int>(ranks.size()), timeout,
                                                std::move(name));
}

c10::intrusive_ptr<BackendBase::Options> ProcessGroupRingx::getBackendOptions() {
  checkOpen("getBackendOptions");
  auto options = c10::make_intrusive<Options>("ringx", group_->timeout());
  options->group_name = name_;
  return options;
}

std::chrono::milliseconds ProcessGroupRingx::callTimeout(
    std::chrono::milliseconds requested) const {
  // kUnsetTimeout (-1) and 0 both mean "the group's timeout".
  return requested.count() > 0 ? requested : group_->timeout();
}

c10::intrusive_ptr<BackendBase> createProcessGroupRingx(
    const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout, std::string name) {
  try {
    return c10::make_intrusive<ProcessGroupRingx>(store, rank, size, timeout, std::move(name));
  } catch (...) {
    std::rethrow_exception(asNetworkError(std::current_exception()));
  }
}

c10::intrusive_ptr<::c10d::ProcessGroup> makeRingxProcessGroup(
    const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout, std::string name) {
  auto group = c10::make_intrusive<::c10d::ProcessGroup>(store, rank, size);
  using BackendType = ::c10d::ProcessGroup::BackendType;
  group->setBackend(c10::DeviceType::CPU, BackendType::CUSTOM,
                    createProcessGroupRingx(store, rank, size, timeout, std::move(name)));
  group->setDefaultBackend(BackendType::CUSTOM);
  return group;
}

ProcessGroupRingx* ringxBackendOf(const c10::intrusive_ptr<::c10d::ProcessGroup>& group) {
  if (!group) return nullptr;
  return dynamic_cast<ProcessGroupRingx*>(backendForDevice(group, c10::DeviceType::CPU).get());
}

}  // namespace ringx::c10d_glue
