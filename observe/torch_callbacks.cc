#include "observe/torch_callbacks.h"

#include <ATen/record_function.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "backend/c10d/issue_listener.h"
#include "backend/c10d/work.h"
#include "trace/record/recorder.h"

namespace ringx::observe {
namespace {

std::mutex mutex;  // guards everything below but the atomics
at::CallbackHandle handle = 0;
std::atomic<bool> isInstalled{false};
std::shared_ptr<DdpWatch> ddpWatch;  // the watch whose backward comes next or runs
std::atomic<bool> ddpWatching{false};
std::shared_ptr<FsdpWatch> fsdp;  // made as tracing starts

std::shared_ptr<DdpWatch> currentDdp() {
  std::lock_guard<std::mutex> lock(mutex);
  return ddpWatch;
}

std::shared_ptr<FsdpWatch> currentFsdp() {
  std::lock_guard<std::mutex> lock(mutex);
  return fsdp;
}

// A collective's profiling scope ("<backend>:<op>", c10d::Work's title): which backend's.
bool isCollectiveScope(const char* name) {
  static constexpr const char* kBackends[] = {"ringx:", "gloo:", "nccl:", "mpi:", "ucc:", "xccl:"};
  for (const char* prefix : kBackends) {
    if (std::strncmp(name, prefix, std::strlen(prefix)) == 0) return true;
  }
  return false;
}

// A collective's token in the watch that took it, from its issue to its finish (the scope's end
// may run on another thread).
struct CollectiveContext : at::ObserverContext {
  std::shared_ptr<DdpWatch> ddp;
  std::shared_ptr<FsdpWatch> fsdp;
  uint64_t token = 0;
  void finished(int64_t ns) const {
    if (ddp) ddp->collectiveFinished(token, ns);
    if (fsdp) fsdp->collectiveFinished(token, ns);
  }
  void attachWire(WireReader reader) const {
    if (ddp) ddp->attachWire(token, std::move(reader));
    if (fsdp) fsdp->attachWire(token, std::move(reader));
  }
};

// An FSDP2 scope open on this thread (they nest), and how many prefetch scopes enclose it.
struct FsdpContext : at::ObserverContext {
  FsdpScope scope = FsdpScope::kOther;
  std::string unit;
  int64_t beginNs = 0;
};
thread_local std::vector<FsdpContext*> openFsdpScopes;
thread_local int prefetchDepth = 0;
// The all_gather or post_backward_reduce scope open last on any thread (under `mutex`): gloo
// begins a Work's scope on its own worker thread when it runs it, while the issuing thread waits
// inside the FSDP2 scope that issued it.
const FsdpContext* openCollectiveScope = nullptr;
FsdpScope openCollectiveKind = FsdpScope::kOther;
std::string openCollectiveUnit;

bool issuesCollectives(FsdpScope scope) {
  return scope == FsdpScope::kAllGather || scope == FsdpScope::kPostBackwardReduce;
}

// Set between a collective's scope starting (in the Work's constructor) and ringx's listener
// hearing of the same Work, on the issuing thread.
thread_local CollectiveContext pending;

void onIssued(const c10::intrusive_ptr<c10d_glue::RingxWork>& work) {
  if (pending.token == 0) return;
  CollectiveContext taken = std::move(pending);
  pending = CollectiveContext{};
  taken.attachWire([work] {
    return WireTimes{work->startedNs(), work->finishedNs(), work->seq()};
  });
}

// The Reducer's copies back into the gradients, seen while its finalize runs on this thread.
thread_local std::shared_ptr<DdpWatch> copyWatch;
thread_local int copyDepth = 0;
thread_local int64_t copyBeginNs = 0;

std::unique_ptr<at::ObserverContext> onCopyStart(const at::RecordFunction& fn) {
  if (std::strcmp(fn.name(), "aten::copy_") == 0 && copyDepth++ == 0) copyBeginNs = trace::nowNs();
  return nullptr;
}

void onCopyEnd(const at::RecordFunction& fn, at::ObserverContext*) {
  if (std::strcmp(fn.name(), "aten::copy_") != 0 || --copyDepth != 0 || !copyWatch) return;
  copyWatch->copiedBack(copyBeginNs, trace::nowNs());
}

void queueFinalCallbacks(std::shared_ptr<DdpWatch> watch) {
  // The Reducer queues its finalize when its last bucket launches, after this; a callback queued
  // by a final callback runs after every one queued before it. Between them, on this thread,
  // the finalize's operators (FUNCTION scope) are watched for its copies back.
  torch::autograd::Engine::get_default_engine().queue_callback([watch] {
    watch->computeEnded(trace::nowNs());
    at::CallbackHandle copies = 0;
    if (watch->copiesBack()) {
      copyWatch = watch;
      copyDepth = 0;
      copies = at::addThreadLocalCallback(
          at::RecordFunctionCallback(onCopyStart, onCopyEnd).scopes({at::RecordScope::FUNCTION}));
    }
    torch::autograd::Engine::get_default_engine().queue_callback([watch, copies] {
      if (copies != 0) {
        at::removeCallback(copies);
        copyWatch.reset();
      }
      watch->finalized(trace::nowNs());
    });
  });
}

std::unique_ptr<at::ObserverContext> onFsdpScope(const char* name) {
  auto context = std::make_unique<FsdpContext>();
  context->scope = parseFsdpScope(name, &context->unit);
  if (context->scope == FsdpScope::kOther) return nullptr;
  std::shared_ptr<FsdpWatch> watch = currentFsdp();
  if (!watch) return nullptr;
  context->beginNs = trace::nowNs();
  watch->scopeBegin(context->scope, context->unit, context->beginNs, prefetchDepth > 0);
  if (context->scope == FsdpScope::kForwardPrefetch ||
      context->scope == FsdpScope::kBackwardPrefetch) {
    ++prefetchDepth;
  }
  openFsdpScopes.push_back(context.get());
  if (issuesCollectives(context->scope)) {
    std::lock_guard<std::mutex> lock(mutex);
    openCollectiveScope = context.get();
    openCollectiveKind = context->scope;
    openCollectiveUnit = context->unit;
  }
  return context;
}

// A collective's Work scope began: an FSDP2 unit's, when an FSDP2 scope is open on this thread,
// else perhaps a DDP bucket's.
std::unique_ptr<at::ObserverContext> onCollective() {
  pending = CollectiveContext{};  // a backend without the listener (gloo) left it set
  auto context = std::make_unique<CollectiveContext>();
  const int64_t now = trace::nowNs();
  FsdpScope kind = FsdpScope::kOther;
  std::string unit;
  if (!openFsdpScopes.empty()) {
    kind = openFsdpScopes.back()->scope;
    unit = openFsdpScopes.back()->unit;
  } else {
    std::lock_guard<std::mutex> lock(mutex);
    if (openCollectiveScope != nullptr) {
      kind = openCollectiveKind;
      unit = openCollectiveUnit;
    }
  }
  if (kind != FsdpScope::kOther) {
    if (auto watch = currentFsdp()) {
      context->token = watch->collectiveIssued(kind, unit, now);
      if (context->token != 0) context->fsdp = std::move(watch);
    }
  } else if (ddpWatching.load(std::memory_order_relaxed)) {
    if (auto watch = currentDdp()) {
      context->token = watch->collectiveIssued(now);
      if (context->token != 0) context->ddp = std::move(watch);
    }
  }
  if (context->token == 0) return nullptr;
  pending = *context;
  return context;
}

std::unique_ptr<at::ObserverContext> onStart(const at::RecordFunction& fn) {
  if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION) {
    if (!ddpWatching.load(std::memory_order_relaxed)) return nullptr;
    std::shared_ptr<DdpWatch> watch = currentDdp();
    if (watch && watch->armed() && watch->backwardNode(trace::nowNs())) queueFinalCallbacks(watch);
    return nullptr;
  }
  const char* name = fn.name();
  if (name[0] == 'F' || name[0] == 'O') return onFsdpScope(name);  // "FSDP::", "Optimizer."
  if (isCollectiveScope(name)) return onCollective();
  return nullptr;
}

void onEnd(const at::RecordFunction& fn, at::ObserverContext* context) {
  if (fn.scope() != at::RecordScope::BACKWARD_FUNCTION) {
    if (context == nullptr) return;
    if (auto* collective = dynamic_cast<CollectiveContext*>(context)) {
      collective->finished(trace::nowNs());
      return;
    }
    auto* scope = static_cast<FsdpContext*>(context);
    if (!openFsdpScopes.empty() && openFsdpScopes.back() == scope) openFsdpScopes.pop_back();
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (openCollectiveScope == scope) openCollectiveScope = nullptr;
    }
    if (scope->scope == FsdpScope::kForwardPrefetch ||
        scope->scope == FsdpScope::kBackwardPrefetch) {
      --prefetchDepth;
    }
    if (auto watch = currentFsdp()) {
      watch->scopeEnd(scope->scope, scope->unit, scope->beginNs, trace::nowNs());
    }
    return;
  }
  if (!ddpWatching.load(std::memory_order_relaxed) ||
      std::strcmp(fn.name(), "torch::autograd::AccumulateGrad") != 0) {
    return;
  }
  // The node being evaluated names the parameter; the Reducer's hook for it runs next.
  auto node = torch::autograd::get_current_node();
  auto* accumulate = dynamic_cast<torch::autograd::AccumulateGrad*>(node.get());
  if (accumulate == nullptr || !accumulate->variable.defined()) return;
  if (std::shared_ptr<DdpWatch> watch = currentDdp()) {
    watch->gradReady(accumulate->variable.unsafeGetTensorImpl(), trace::nowNs());
  }
}

// Installs the callbacks (under `mutex`), once per recording.
void installLocked() {
  if (handle != 0) return;
  handle = at::addGlobalCallback(
      at::RecordFunctionCallback(onStart, onEnd)
          .scopes({at::RecordScope::USER_SCOPE, at::RecordScope::BACKWARD_FUNCTION}));
  c10d_glue::setIssueListener(onIssued);
  fsdp = std::make_shared<FsdpWatch>();
  isInstalled.store(true);
}

// Tracing stopped: everything goes, so the next recording starts afresh.
void onTracing(bool recording) {
  std::lock_guard<std::mutex> lock(mutex);
  if (recording || handle == 0) return;
  at::removeCallback(handle);
  handle = 0;
  c10d_glue::setIssueListener(nullptr);
  ddpWatch.reset();
  ddpWatching.store(false);
  fsdp.reset();
  isInstalled.store(false);
}

}  // namespace

void followTracing() { trace::Recorder::setStateListener(onTracing); }

bool watchTorchEngines() {
  if (isInstalled.load(std::memory_order_relaxed)) return true;
  if (!trace::Recorder::enabled()) return false;
  std::lock_guard<std::mutex> lock(mutex);
  installLocked();
  return true;
}

bool installed() { return isInstalled.load(); }

std::shared_ptr<FsdpWatch> fsdpWatch() { return currentFsdp(); }

void settleWatches(std::chrono::milliseconds limit) {
  // DDP's are waited for by the Reducer's finalize before its iteration is recorded.
  if (auto watch = currentFsdp()) watch->awaitCollectives(std::chrono::steady_clock::now() + limit);
}

void watchBackwardOf(std::shared_ptr<DdpWatch> watch) {
  std::lock_guard<std::mutex> lock(mutex);
  if (handle == 0) return;  // not tracing
  ddpWatch = std::move(watch);
  ddpWatching.store(ddpWatch != nullptr);
}

}  // namespace ringx::observe
