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
#include "backend/store/store.h"
#include "base/format.h"
#include "trace/record/recorder.h"

namespace ringx::c10d_glue {

using algorithms::Collective;
using algorithms::CollectiveKind;
using ::c10d::OpType;

ProcessGroupRingx::ProcessGroupRingx(const c10::intrusive_ptr<::c10d::Store>& store, int rank,
                                     int size, std::chrono::milliseconds timeout, std::string name)
    : ProcessGroupRingx(std::make_shared<C10dStore>(store), rank, size, timeout, std::move(name)) {}

ProcessGroupRingx::ProcessGroupRingx(std::shared_ptr<Store> store, int rank, int size,
                                     std::chrono::milliseconds timeout, std::string name)
    : BackendBase(rank, size), name_(std::move(name)) {
  GroupOptions options;
  options.rank = rank;
  options.size = size;
  options.store = std::move(store);
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
  {
    std::lock_guard<std::mutex> lock(failureMutex_);
    failureAtClose_ = group_->failure();
    group_.reset();
  }
  if (released) gilRelease.restore(released);
}

std::pair<Group::Failure, std::string> ProcessGroupRingx::failure() const {
  std::lock_guard<std::mutex> lock(failureMutex_);
  return group_ ? group_->failure() : failureAtClose_;
}

std::string ProcessGroupRingx::errorText() const { return failure().second; }

#if RINGX_HAS_GET_ERROR
::c10d::ErrorType ProcessGroupRingx::getError() {
  switch (failure().first) {
    case Group::Failure::kNone:
      return ::c10d::ErrorType::SUCCESS;
    case Group::Failure::kTimeout:
      return ::c10d::ErrorType::TIMEOUT;
    case Group::Failure::kPeer:
      return ::c10d::ErrorType::REMOTE_ERROR;
    case Group::Failure::kLocal:
    case Group::Failure::kAborted:
      break;
  }
  return ::c10d::ErrorType::COMM_ERROR;
}
#endif

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

c10::intrusive_ptr<ProcessGroupRingx> ProcessGroupRingx::shrinkTo(
    const std::vector<int64_t>& ranksToExclude, bool abortFirst,
    std::chrono::milliseconds timeout) {
  checkOpen("shrink");
  std::vector<int64_t> excluded = ranksToExclude;
  std::sort(excluded.begin(), excluded.end());
  TORCH_CHECK_VALUE(!excluded.empty(),
                    "ringx: shrink: ranks_to_exclude is empty; name the ranks to leave out "
                    "(those that failed)");
  for (size_t i = 0; i < excluded.size(); ++i) {
    TORCH_CHECK_VALUE(excluded[i] >= 0 && excluded[i] < size_, "ringx: shrink: rank ", excluded[i],
                      " is not in group '", name_, "' of ", size_, " ranks");
    TORCH_CHECK_VALUE(i == 0 || excluded[i] != excluded[i - 1], "ringx: shrink: rank ", excluded[i],
                      " is excluded twice");
  }
  TORCH_CHECK_VALUE(int64_t(excluded.size()) < size_, "ringx: shrink: every rank of group '", name_,
                    "' is excluded; at least one must remain");
  TORCH_CHECK(!std::binary_search(excluded.begin(), excluded.end(), int64_t(rank_)),
              "ringx: shrink: rank ", rank_,
              " is excluded, so it must not call shrink (only the remaining ranks do)");
  // The remaining ranks in order: this group's rank of each new rank.
  std::vector<int32_t> kept;
  for (int32_t r = 0; r < size_; ++r)
    if (!std::binary_search(excluded.begin(), excluded.end(), int64_t(r))) kept.push_back(r);
  const int newRank = int(std::find(kept.begin(), kept.end(), rank_) - kept.begin());
  const std::string without = rankList(std::vector<int32_t>(excluded.begin(), excluded.end()));
  // The shrink's keys, under this group's: the excluded set names them, so a shrink to other
  // ranks (after a second death) never reads this one's, and each attempt at the same set is
  // a generation of its own. Each rank says it came, so that a timeout can name who did not.
  std::string key = "shrink/";
  for (int64_t r : excluded) key += strCat(r, ",");
  auto store = std::make_shared<PrefixedStore>(key, group_->sharedStore());
  const std::string arrivals = strCat("arrived/", store->add(strCat("attempts/", newRank), 1));
  store->add(strCat(arrivals, "/", newRank), 1);
  if (abortFirst) {
    group_->abort(strCat("the process group was aborted on rank ", rank_,
                         " to shrink it (SHRINK_ABORT, without ", without, ")"));
  }
  std::string name = strCat(name_, ":shrunk");
  try {
    return c10::make_intrusive<ProcessGroupRingx>(store, newRank, int(kept.size()), timeout,
                                                  std::move(name));
  } catch (const TimeoutError& e) {
    std::vector<int32_t> missing;
    for (size_t r = 0; r < kept.size(); ++r)
      if (!store->check(strCat(arrivals, "/", r))) missing.push_back(kept[r]);
    TORCH_CHECK(false, "ringx: shrink of group '", name_, "' without ", without, " failed on rank ",
                rank_, ": ",
                missing.empty() ? std::string("the remaining ranks did not all join")
                                : strCat(rankList(missing), " did not take part"),
                " within ", timeout.count(),
                " ms (dead too, or not calling shrink_group); shrink again without ",
                missing.size() == 1 ? "it" : "them", " (", e.what(), ")");
  }
}

#if RINGX_HAS_SHRINK
c10::intrusive_ptr<BackendBase> ProcessGroupRingx::shrink(
    const std::vector<int64_t>& ranksToExclude, int shrinkFlags,
    const c10::intrusive_ptr<Options>& optsOverride) {
  constexpr int kShrinkAbort = 0x01;  // torch's SHRINK_ABORT
  const auto timeout =
      optsOverride && optsOverride->timeout.count() > 0 ? optsOverride->timeout : group_->timeout();
  return shrinkTo(ranksToExclude, (shrinkFlags & kShrinkAbort) != 0, timeout);
}
#endif

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
