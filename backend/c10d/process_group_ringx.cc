// ProcessGroupRingx's life: made (from torch's backend registry or makeRingxProcessGroup), split
// into subgroups, coalescing calls, shut down or aborted. Its collectives, and the path every
// one of them takes to the group's communication thread, are in process_group_ringx_collectives.cc.
#include "backend/c10d/process_group_ringx.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <deque>
#include <optional>
#include <random>
#include "backend/c10d/cuda_staging.h"  // CudaCollectives, destroyed with the group

#include "backend/c10d/issue_listener.h"
#include "backend/c10d/store_adapter.h"
#include "backend/c10d/tensor_utils.h"
#include "backend/c10d/torch_errors.h"
#include "backend/store/store.h"
#include "base/format.h"
#include "trace/record/recorder.h"

#include <unistd.h>  // gethostname, getpid

namespace ringx::c10d_glue {

using algorithms::Collective;
using algorithms::CollectiveKind;
using ::c10d::OpType;

ProcessGroupRingx::ProcessGroupRingx(const c10::intrusive_ptr<::c10d::Store>& store, int rank,
                                     int size, std::chrono::milliseconds timeout, std::string name,
                                     bool connect)
    : ProcessGroupRingx(std::make_shared<C10dStore>(store), rank, size, timeout, std::move(name),
                        connect) {}

namespace {

// Every ringx handle starts so: a handle from another backend is refused by name.
constexpr const char* kHandlePrefix = "ringx:";

// What names this process's group to the others in a reconfigure: unique to the process and
// the group object, so a list of them says who is in (the store carries the rest).
std::string newHandle() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "?");
  std::random_device random;
  const uint64_t nonce = (uint64_t(random()) << 32) ^ random();
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(nonce));
  return strCat(kHandlePrefix, host, ":", getpid(), ":", hex);
}

}  // namespace

ProcessGroupRingx::ProcessGroupRingx(std::shared_ptr<Store> store, int rank, int size,
                                     std::chrono::milliseconds timeout, std::string name,
                                     bool connect)
    : BackendBase(rank, size),
      store_(std::move(store)),
      timeout_(timeout),
      handle_(newHandle()),
      name_(std::move(name)) {
  if (!connect) {
    awaitingReconfigure_ = true;
    closed_ = true;
    return;
  }
  group_ = makeGroup(store_, rank, size);
  queue_ = std::make_unique<WorkQueue>();
  // RINGX_TRACE_DIR / RINGX_TRACE_LISTEN: the first ringx group of the process
  // (the default group, whose ranks are the global ranks) starts tracing.
  static std::atomic<bool> environmentChecked{false};
  if (!environmentChecked.exchange(true)) {
    const TraceConfig config = traceConfigFromEnvironment();
    if (config.enabled() && !TraceSession::active()) group_->startTracing(config);
  }
}

std::unique_ptr<Group> ProcessGroupRingx::makeGroup(std::shared_ptr<Store> store, int rank,
                                                    int size) const {
  GroupOptions options;
  options.rank = rank;
  options.size = size;
  options.store = std::move(store);
  options.timeout = timeout_;
  options.tuning = tuningFromEnvironment();
  options.mesh = transport::meshOptionsFromEnvironment();
  options.name = name_;
  return std::make_unique<Group>(options);
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
  TORCH_CHECK(!awaitingReconfigure_.load(), "ringx: ", collective, " on group '", name_,
              "' before it was configured: it was made with enable_reconfigure=True (or its "
              "last reconfigure failed), and joins its peers at dist._reconfigure(...)");
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

namespace {

// A group made by the ranks that come to `store` (a namespace of this shrink's or
// reconfigure's): each says it came before `make` connects them, under a count of its attempts
// so that a retry never reads an earlier attempt's marks. When one never comes, `missed` gets
// the ranks that did not (in the new numbering) and raises; make()'s result otherwise.
template <typename Make, typename Missed>
auto meet(Store& store, int rank, int size, Make make, Missed missed) {
  const std::string arrivals = strCat("arrived/", store.add(strCat("attempts/", rank), 1));
  store.add(strCat(arrivals, "/", rank), 1);
  try {
    return make();
  } catch (const TimeoutError& e) {
    std::vector<int32_t> absent;
    for (int r = 0; r < size; ++r)
      if (!store.check(strCat(arrivals, "/", r))) absent.push_back(r);
    missed(absent, e);
    throw;
  }
}

}  // namespace

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
  // a generation of its own.
  std::string key = "shrink/";
  for (int64_t r : excluded) key += strCat(r, ",");
  auto store = std::make_shared<PrefixedStore>(key, group_->sharedStore());
  if (abortFirst) {
    group_->abort(strCat("the process group was aborted on rank ", rank_,
                         " to shrink it (SHRINK_ABORT, without ", without, ")"));
  }
  return meet(
      *store, newRank, int(kept.size()),
      [&] {
        return c10::make_intrusive<ProcessGroupRingx>(store, newRank, int(kept.size()), timeout,
                                                      strCat(name_, ":shrunk"));
      },
      [&](const std::vector<int32_t>& absent, const TimeoutError& e) {
        std::vector<int32_t> missing;  // as ranks of this group
        for (int32_t r : absent) missing.push_back(kept[r]);
        TORCH_CHECK(false, "ringx: shrink of group '", name_, "' without ", without,
                    " failed on rank ", rank_, ": ",
                    missing.empty() ? std::string("the remaining ranks did not all join")
                                    : strCat(rankList(missing), " did not take part"),
                    " within ", timeout.count(),
                    " ms (dead too, or not calling shrink_group); shrink again without ",
                    missing.size() == 1 ? "it" : "them", " (", e.what(), ")");
      });
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

#if RINGX_HAS_RECONFIGURE
c10::intrusive_ptr<::c10d::Work> ProcessGroupRingx::reconfigureTo(
    std::vector<std::string> handles, bool ordered, int64_t uuid,
    std::optional<std::chrono::milliseconds> timeout) {
  // A set of handles: every member sorts it the same, so the ranks agree.
  if (!ordered) std::sort(handles.begin(), handles.end());
  TORCH_CHECK_VALUE(!handles.empty(),
                    "ringx: reconfigure: no handles; pass one per member, from "
                    "dist._get_reconfigure_handle() on each, this process's included");
  for (const std::string& handle : handles) {
    TORCH_CHECK_VALUE(handle.rfind(kHandlePrefix, 0) == 0, "ringx: reconfigure: '", handle,
                      "' is not a ringx handle; pass what dist._get_reconfigure_handle() "
                      "returns on each member's ringx group");
    TORCH_CHECK_VALUE(std::count(handles.begin(), handles.end(), handle) == 1,
                      "ringx: reconfigure: handle '", handle,
                      "' is listed twice; each member once");
  }
  const auto me = std::find(handles.begin(), handles.end(), handle_);
  TORCH_CHECK_VALUE(me != handles.end(), "ringx: reconfigure: this process's handle '", handle_,
                    "' is not among the ", handles.size(),
                    " handles; only the members reconfigure, each with the same handles, its own "
                    "included");
  TORCH_CHECK_VALUE(std::find(reconfigureUuids_.begin(), reconfigureUuids_.end(), uuid) ==
                        reconfigureUuids_.end(),
                    "ringx: reconfigure: uuid ", uuid, " was used before on group '", name_,
                    "'; pass a fresh one (the same on every member) each time");
  TORCH_CHECK(!cuda_, "ringx: reconfigure of group '", name_,
              "', which ran collectives on CUDA tensors, is not supported yet; make a new "
              "group over the members instead (new_group, or shrink_group)");
  reconfigureUuids_.push_back(uuid);
  const int newRank = int(me - handles.begin()), newSize = int(handles.size());
  // Whatever the group was running fails now, with the reason (its peers may be gone).
  if (!closed_.load()) {
    group_->abort(
        strCat("the process group was reconfigured on rank ", rank_, " (uuid ", uuid, ")"));
    close(/*inStep=*/false);
  }
  if (timeout) timeout_ = *timeout;
  auto work = c10::make_intrusive<RingxWork>(rank_, OpType::UNKNOWN, "ringx:reconfigure",
                                             std::vector<at::Tensor>{}, timeout_);
  // The members' keys: under the store the group was made with, where every member (a
  // newcomer too) finds them, in a namespace of this uuid's.
  auto store = std::make_shared<PrefixedStore>(strCat("reconfigure/", uuid, "/"), store_);
  try {
    auto group = meet(
        *store, newRank, newSize, [&] { return makeGroup(store, newRank, newSize); },
        [&](const std::vector<int32_t>& absent, const TimeoutError& e) {
          std::string who;
          for (int32_t r : absent)
            who += strCat(who.empty() ? "" : ", ", "rank ", r, " (", handles[r], ")");
          TORCH_CHECK(false, "ringx: reconfigure of group '", name_, "' (uuid ", uuid,
                      ") failed: ", who.empty() ? "not every member joined" : who,
                      " did not join within ", timeout_.count(),
                      " ms (dead, or not reconfiguring); reconfigure again without ",
                      absent.size() == 1 ? "it" : "them", ", with a fresh uuid (", e.what(), ")");
        });
    {
      std::lock_guard<std::mutex> lock(failureMutex_);
      group_ = std::move(group);
      failureAtClose_ = {Group::Failure::kNone, ""};
    }
    rank_ = newRank;
    size_ = newSize;
    queue_ = std::make_unique<WorkQueue>();
    awaitingReconfigure_ = false;
    closed_ = false;
    work->markSuccess();
  } catch (...) {
    awaitingReconfigure_ = true;
    work->markFailed(asNetworkError(std::current_exception()));
  }
  return work;
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupRingx::reconfigure(
    const ::c10d::ReconfigureOptions& opts) {
  TORCH_CHECK_VALUE(opts.hints.empty(), "ringx: reconfigure takes no hints (got ",
                    opts.hints.size(), "); leave them out");
  if (const auto* list = std::get_if<std::vector<::c10d::ReconfigureHandle>>(&opts.handles))
    return reconfigureTo(*list, /*ordered=*/true, opts.uuid, opts.timeout);
  const auto& set = std::get<std::unordered_set<::c10d::ReconfigureHandle>>(opts.handles);
  return reconfigureTo(std::vector<std::string>(set.begin(), set.end()), /*ordered=*/false,
                       opts.uuid, opts.timeout);
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
    std::chrono::milliseconds timeout, std::string name, bool connect) {
  try {
    return c10::make_intrusive<ProcessGroupRingx>(store, rank, size, timeout, std::move(name),
                                                  connect);
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
