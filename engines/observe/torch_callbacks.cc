#include "engines/observe/torch_callbacks.h"

#include <ATen/record_function.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>

#include <atomic>
#include <cstring>
#include <mutex>

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

std::shared_ptr<DdpWatch> currentDdp() {
  std::lock_guard<std::mutex> lock(mutex);
  return ddpWatch;
}

// A collective's profiling scope ("<backend>:<op>", c10d::Work's title): which backend's.
bool isCollectiveScope(const char* name) {
  static constexpr const char* kBackends[] = {"ringx:", "gloo:", "nccl:", "mpi:", "ucc:", "xccl:"};
  for (const char* prefix : kBackends) {
    if (std::strncmp(name, prefix, std::strlen(prefix)) == 0) return true;
  }
  return false;
}

// A collective's token from its issue to its finish (the scope's end may run on another thread).
struct CollectiveContext : at::ObserverContext {
  std::shared_ptr<DdpWatch> watch;
  uint64_t token = 0;
};

// Set between a collective's scope starting (in the Work's constructor) and ringx's listener
// hearing of the same Work, on the issuing thread.
thread_local std::shared_ptr<DdpWatch> pendingWatch;
thread_local uint64_t pendingToken = 0;

void onIssued(const c10::intrusive_ptr<c10d_glue::RingxWork>& work) {
  if (pendingToken == 0) return;
  std::shared_ptr<DdpWatch> watch = std::move(pendingWatch);
  const uint64_t token = pendingToken;
  pendingToken = 0;
  watch->attachWire(token, [work] {
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

std::unique_ptr<at::ObserverContext> onStart(const at::RecordFunction& fn) {
  if (!ddpWatching.load(std::memory_order_relaxed)) return nullptr;
  if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION) {
    std::shared_ptr<DdpWatch> watch = currentDdp();
    if (watch && watch->armed() && watch->backwardNode(trace::nowNs())) queueFinalCallbacks(watch);
    return nullptr;
  }
  if (!isCollectiveScope(fn.name())) return nullptr;
  pendingWatch.reset();  // a backend without the listener (gloo) left it set
  pendingToken = 0;
  std::shared_ptr<DdpWatch> watch = currentDdp();
  if (!watch) return nullptr;
  const uint64_t token = watch->collectiveIssued(trace::nowNs());
  if (token == 0) return nullptr;
  pendingWatch = watch;
  pendingToken = token;
  auto context = std::make_unique<CollectiveContext>();
  context->watch = std::move(watch);
  context->token = token;
  return context;
}

void onEnd(const at::RecordFunction& fn, at::ObserverContext* context) {
  if (context != nullptr) {
    auto* collective = static_cast<CollectiveContext*>(context);
    collective->watch->collectiveFinished(collective->token, trace::nowNs());
    return;
  }
  if (fn.scope() != at::RecordScope::BACKWARD_FUNCTION ||
      !ddpWatching.load(std::memory_order_relaxed) ||
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

void onTracing(bool recording) {
  std::lock_guard<std::mutex> lock(mutex);
  if (recording && handle == 0) {
    handle = at::addGlobalCallback(
        at::RecordFunctionCallback(onStart, onEnd)
            .scopes({at::RecordScope::USER_SCOPE, at::RecordScope::BACKWARD_FUNCTION}));
    c10d_glue::setIssueListener(onIssued);
    isInstalled.store(true);
  } else if (!recording && handle != 0) {
    at::removeCallback(handle);
    handle = 0;
    c10d_glue::setIssueListener(nullptr);
    ddpWatch.reset();
    ddpWatching.store(false);
    isInstalled.store(false);
  }
}

}  // namespace

void followTracing() {
  trace::Recorder::setStateListener(onTracing);
  if (trace::Recorder::enabled()) onTracing(true);
}

bool installed() { return isInstalled.load(); }

void watchBackwardOf(std::shared_ptr<DdpWatch> watch) {
  std::lock_guard<std::mutex> lock(mutex);
  if (handle == 0) return;  // not tracing
  ddpWatch = std::move(watch);
  ddpWatching.store(ddpWatch != nullptr);
}

}  // namespace ringx::observe
