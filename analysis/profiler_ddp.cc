// torch DDP from profiler traces (see profiler_ddp.h for what is read and why).
#include "analysis/profiler_ddp.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <unordered_map>

#include "analysis/replay/bucket_plan.h"
#include "analysis/store_reading.h"
#include "base/format.h"
#include "base/text.h"
#include "trace/format/dtype_size.h"
#include "trace/model/chrome_ingest.h"

namespace ringx::analysis {
using namespace store_reading;

namespace {

constexpr std::string_view kForward = "DistributedDataParallel.forward";
constexpr std::string_view kNodePrefix = "autograd::engine::evaluate_function: ";
constexpr std::string_view kAccumulate = "torch::autograd::AccumulateGrad";
constexpr std::string_view kAllreduce = "c10d::allreduce_";
constexpr std::string_view kCopyBack = "torch.distributed.ddp.reducer::copy_bucket_to_grad";

struct ProfiledOp {
  int64_t begin = 0, end = 0;
  int64_t elements = -1;  // from Input Dims' first list; -1: not recorded
  int64_t elementBytes = 0;
  std::string_view dtype;
};

// A device op and the runtime call that launched it.
struct Launched {
  int64_t launch = 0, begin = 0, end = 0;
  int64_t correlation = -1;
};

// One rank's ops that matter, each kind in time order.
struct ProfiledRankOps {
  int32_t rank = 0;
  std::map<int64_t, std::pair<int64_t, int64_t>> steps;  // N -> window
  std::vector<ProfiledOp> forwards, nodes, grads, allreduces, wires, copies;
  std::string wireBackend;
  // A GPU rank (profiler_ddp.h): its compute ops (kernels, copies, fills) by launch, with the
  // latest end of those launched so far; its NCCL allreduce kernels by launch.
  bool gpu = false;
  std::vector<Launched> compute, collectives;
  std::vector<int64_t> doneBy;   // doneBy[i]: the latest end of compute[0..i]
  std::vector<size_t> doneByOp;  // and which of them ended then

  // How many of the compute ops were launched before host time t (the first of the others is
  // compute[launchedBefore(t)]).
  size_t launchedBefore(int64_t t) const {
    return static_cast<size_t>(
        std::lower_bound(compute.begin(), compute.end(), t,
                         [](const Launched& l, int64_t at) { return l.launch < at; }) -
        compute.begin());
  }
  // Where the device stood at host time t: the end of the compute it had been given (the
  // stream's work launched before t), which is when what the host does at t can run there.
  int64_t readyAt(int64_t t) const {
    if (!gpu) return t;
    const size_t n = launchedBefore(t);
    return n == 0 ? t : doneBy[n - 1];
  }
  // The correlation of the op that readyAt(t) is the end of (-1: none).
  int64_t readyKernel(int64_t t) const {
    const size_t n = launchedBefore(t);
    return n == 0 ? -1 : compute[doneByOp[n - 1]].correlation;
  }
  // When the work the host began at t began on the device: the first compute launched from t.
  int64_t startedAt(int64_t t) const {
    if (!gpu) return t;
    const size_t n = launchedBefore(t);
    return n == compute.size() ? readyAt(t) : std::max(compute[n].begin, readyAt(t));
  }
  int64_t beginOf(const ProfiledOp& op) const { return startedAt(op.begin); }
  int64_t endOf(const ProfiledOp& op) const { return readyAt(op.end); }
  // A gradient's readiness: on a CPU its AccumulateGrad's end (the Reducer's hook runs right
  // after it); on a GPU the end of what its autograd node launched, the hook's copy into the
  // bucket included (the hook runs inside the node's evaluate_function).
  int64_t gradReady(const ProfiledOp& grad) const { return readyAt(gradPoint(grad)); }
  int64_t gradPoint(const ProfiledOp& grad) const {
    if (!gpu) return grad.end;
    auto it = std::upper_bound(nodes.begin(), nodes.end(), grad.begin,
                               [](int64_t t, const ProfiledOp& n) { return t < n.begin; });
    if (it != nodes.begin() && std::prev(it)->end >= grad.end) return std::prev(it)->end;
    return grad.end;
  }
};

// A tensor's element count from its profiler "Input Dims" text ("[[256, 256]]": the first
// list; "[[]]": a scalar); -1 when there are no dims.
int64_t elementsOf(std::string_view dims) {
  if (dims.find('[') == std::string_view::npos) return -1;
  int64_t n = 1;
  for (int64_t s : firstIntegerList(dims)) n *= s;
  return n;
}

// Whether `s` is of category `cat` (the store's index; -1: the store has none).
bool isCategory(const Span& s, int cat) { return cat >= 0 && s.category == cat; }

ProfiledRankOps readProfiledRank(const model::TraceStore& store, const RankData& data) {
  const StringPool& pool = store.strings();
  const uint32_t dimsKey = pool.find("Input Dims"), typeKey = pool.find("Input type"),
                 scopeKey = pool.find("scope"), opKey = pool.find(targ::kOp);
  const int collectiveCat = store.findCategory(trace::categoryName(trace::Category::kCollective));
  ProfiledRankOps r;
  r.rank = data.rank;
  // The device's ops by correlation, tied to their launches below.
  const uint32_t correlationKey = pool.find("correlation");
  const int kernelCat = store.findCategory("kernel"), copyCat = store.findCategory("gpu_memcpy"),
            fillCat = store.findCategory("gpu_memset"),
            runtimeCat = store.findCategory("cuda_runtime"),
            driverCat = store.findCategory("cuda_driver");
  std::unordered_map<int64_t, std::pair<const Span*, bool>> deviceOps;  // -> (op, an allreduce)
  for (const Track& t : data.tracks) {
    if (!model::isDeviceTrack(store.str(t.name)) || correlationKey == 0) continue;
    forAllSpans(t, [&](uint32_t, uint32_t, const Span& s) {
      const bool collective = isCategory(s, collectiveCat);
      if (!collective && !isCategory(s, kernelCat) && !isCategory(s, copyCat) &&
          !isCategory(s, fillCat)) {
        return;
      }
      const ArgRange a(data, s);
      const int64_t c = a.integer(correlationKey, -1);
      if (c < 0) return;
      deviceOps[c] = {&s, collective && store.str(a.string(opKey)) == "allreduce"};
    });
  }
  for (const Track& t : data.tracks) {
    if (model::isDeviceTrack(store.str(t.name))) continue;
    forAllSpans(t, [&](uint32_t, uint32_t, const Span& s) {
      const std::string_view name = store.str(s.name);
      if (const std::optional<int64_t> n = model::profilerStepNumber(name)) {
        r.steps.try_emplace(*n, s.begin, s.end);
        return;
      }
      if (isCategory(s, runtimeCat) || isCategory(s, driverCat)) {
        const auto op = deviceOps.find(ArgRange(data, s).integer(correlationKey, -1));
        if (op == deviceOps.end()) return;
        const Span& d = *op->second.first;
        const int64_t c = op->first;
        if (!isCategory(d, collectiveCat)) {
          r.compute.push_back({s.begin, d.begin, d.end, c});
        } else if (op->second.second) {
          r.collectives.push_back({s.begin, d.begin, d.end, c});
        }
        return;
      }
      ProfiledOp op{s.begin, s.end, -1, 0, {}};
      auto withShape = [&](std::vector<ProfiledOp>& into) {
        const ArgRange a(data, s);
        const uint32_t dims = a.string(dimsKey), type = a.string(typeKey);
        if (dims != 0) op.elements = elementsOf(store.str(dims));
        if (type != 0) {
          op.dtype = firstQuoted(store.str(type));
          op.elementBytes = trace::dtypeBytes(op.dtype);
        }
        into.push_back(op);
      };
      if (name == kForward) {
        r.forwards.push_back(op);
      } else if (startsWith(name, kNodePrefix)) {
        r.nodes.push_back(op);
      } else if (name == kAccumulate) {
        withShape(r.grads);
      } else if (name == kAllreduce) {
        withShape(r.allreduces);
      } else if (name == kCopyBack) {
        r.copies.push_back(op);
      } else if (collectiveCat >= 0 && s.category == collectiveCat) {
        // A CPU backend's scope of an allreduce, which Chrome ingest made a collective
        // (chrome_nccl.cc): "gloo:all_reduce" kept as its "scope".
        const ArgRange a(data, s);
        const std::string_view scope = store.str(a.string(scopeKey));
        if (scope.empty() || store.str(a.string(opKey)) != "allreduce") return;
        r.wires.push_back(op);
        r.wireBackend = std::string(scope.substr(0, scope.find(':')));
      }
    });
  }
  for (std::vector<ProfiledOp>* v :
       {&r.forwards, &r.nodes, &r.grads, &r.allreduces, &r.wires, &r.copies}) {
    std::stable_sort(v->begin(), v->end(),
                     [](const ProfiledOp& a, const ProfiledOp& b) { return a.begin < b.begin; });
  }
  for (std::vector<Launched>* v : {&r.compute, &r.collectives}) {
    std::stable_sort(v->begin(), v->end(),
                     [](const Launched& a, const Launched& b) { return a.launch < b.launch; });
  }
  r.gpu = !r.compute.empty();
  int64_t latest = 0;
  for (size_t i = 0; i < r.compute.size(); ++i) {
    const bool later = r.doneBy.empty() || r.compute[i].end >= latest;
    latest = std::max(latest, r.compute[i].end);
    r.doneBy.push_back(latest);
    r.doneByOp.push_back(later ? i : r.doneByOp.back());
  }
  if (r.gpu) {
    // The wire is the allreduce's NCCL kernel, not a host scope of it.
    r.wires.clear();
    for (const Launched& l : r.collectives) r.wires.push_back({l.begin, l.end, -1, 0, {}});
    r.wireBackend = r.collectives.empty() ? "" : "nccl";
  }
  return r;
}

// The ops of `v` that begin in [from, to].
std::vector<const ProfiledOp*> beginningIn(const std::vector<ProfiledOp>& v, int64_t from,
                                           int64_t to) {
  std::vector<const ProfiledOp*> out;
  auto it = std::lower_bound(v.begin(), v.end(), from,
                             [](const ProfiledOp& o, int64_t t) { return o.begin < t; });
  for (; it != v.end() && it->begin <= to; ++it) out.push_back(&*it);
  return out;
}

// A GPU rank's wire of each c10d allreduce: the NCCL kernel it launched (null: none).
std::vector<const ProfiledOp*> kernelsLaunchedBy(const ProfiledRankOps& r) {
  std::vector<const ProfiledOp*> out;
  size_t next = 0;
  for (const ProfiledOp& a : r.allreduces) {
    while (next < r.collectives.size() && r.collectives[next].launch < a.begin) ++next;
    const bool inside = next < r.collectives.size() && r.collectives[next].launch <= a.end;
    out.push_back(inside ? &r.wires[next++] : nullptr);
  }
  return out;
}

// What one step of one rank shows, before the buckets are known.
struct ProfiledStepOps {
  int64_t number = 0;
  replay::DdpStepRecord record;
  std::vector<const ProfiledOp*> grads, allreduces, wires,
      copies;  // wires[i]: allreduces[i]'s or null
};

bool readProfiledStep(const ProfiledRankOps& r, int64_t number,
                      const std::vector<const ProfiledOp*>& wireOf, ProfiledStepOps* out) {
  const auto [from, to] = r.steps.at(number);
  const std::vector<const ProfiledOp*> forwards = beginningIn(r.forwards, from, to);
  if (forwards.empty()) return false;
  const ProfiledOp& forward = *forwards.front();
  const std::vector<const ProfiledOp*> nodes = beginningIn(r.nodes, forward.end, to);
  if (nodes.empty()) return false;
  replay::DdpStepRecord& s = out->record;
  out->number = number;
  s.step = number;
  // The ops are found by their host times; the record holds the device's (the same on a CPU
  // rank): a GPU rank's forward is its kernels', its backward's compute ends when the kernels
  // its last node launched do.
  const int64_t backwardFrom = nodes.front()->begin;
  int64_t backwardTo = 0;
  for (const ProfiledOp* n : nodes) backwardTo = std::max(backwardTo, n->end);
  s.forwardBeginNs = r.beginOf(forward);
  s.forwardEndNs = r.endOf(forward);
  s.backwardBeginNs = r.beginOf(*nodes.front());
  s.computeEndNs = r.readyAt(backwardTo);
  out->grads = beginningIn(r.grads, backwardFrom, backwardTo);
  out->allreduces = beginningIn(r.allreduces, backwardFrom, backwardTo);
  for (const ProfiledOp* a : out->allreduces) {
    out->wires.push_back(wireOf[static_cast<size_t>(a - r.allreduces.data())]);
  }
  out->copies = beginningIn(r.copies, backwardTo, to);
  s.finalizeEndNs = s.computeEndNs;
  for (const ProfiledOp* c : out->copies) s.finalizeEndNs = std::max(s.finalizeEndNs, r.endOf(*c));
  for (const ProfiledOp* w : out->wires) {
    if (w != nullptr) s.finalizeEndNs = std::max(s.finalizeEndNs, w->end);
  }
  // The optimizer, as the engines record it: from finalize's end to the next forward (the
  // optimizer's step and the rest of the loop): the next step's forward once it is read; for
  // the last step, where the next forward would begin a ProfilerStep's length after this one's
  // (on a GPU the device runs behind the host, so not at the step's end).
  s.optimizerNs = std::max<int64_t>(0, s.forwardBeginNs + (to - from) - s.finalizeEndNs);
  return true;
}

// The limits the engine's rule turns into exactly `bucketBytes` over the parameters in
// readiness order: torch's defaults where they do, else the roundest cap (whole MB, then
// halves, quarters, ... down to 1 KiB) between the largest bucket's size less its last
// parameter and the largest closed bucket, with the first bucket min(cap, 1 MB) as the
// engine's rule has it, or equal to the cap (torch's rule for a cap given explicitly).
bool inferLimits(const std::vector<replay::ParamLayout>& params, const std::vector<size_t>& order,
                 const std::vector<int64_t>& bucketBytes, replay::BucketLimits* out) {
  auto reproduces = [&](const replay::BucketLimits& limits) {
    const std::vector<replay::BucketSpec> plan = replay::assignBuckets(params, order, limits);
    if (plan.size() != bucketBytes.size()) return false;
    for (size_t i = 0; i < plan.size(); ++i) {
      if (plan[i].bytes != bucketBytes[i]) return false;
    }
    return true;
  };
  auto tryCap = [&](int64_t cap) {
    for (const replay::BucketLimits& l :
         {replay::limitsForCap(cap), replay::BucketLimits{cap, cap}}) {
      if (reproduces(l)) {
        *out = l;
        return true;
      }
    }
    return false;
  };
  if (tryCap(int64_t{25} << 20)) return true;
  const int64_t largest = *std::max_element(bucketBytes.begin(), bucketBytes.end());
  constexpr int64_t kMiB = int64_t{1} << 20;
  for (int64_t grain = 64 * kMiB; grain >= 1024; grain /= 2) {
    // Caps past the largest bucket only matter for a plan of one or two buckets; four times
    // it bounds the search.
    for (int64_t cap = grain; cap <= std::max(largest * 4, grain); cap += grain) {
      if (tryCap(cap)) return true;
    }
  }
  return false;
}

}  // namespace

bool holdsProfiledTorchDdp(const model::TraceStore& store) {
  return profiledSpanNamed(store, kForward);
}

ProfiledDdp profiledTorchDdp(const model::TraceStore& store) {
  std::vector<ProfiledRankOps> ranks;
  for (const RankData& data : store.ranks()) {
    ProfiledRankOps r = readProfiledRank(store, data);
    if (!r.forwards.empty()) ranks.push_back(std::move(r));
  }
  if (ranks.empty()) {
    throw std::runtime_error(
        "no DistributedDataParallel.forward in these profiler traces: not a torch DDP job");
  }
  std::sort(ranks.begin(), ranks.end(),
            [](const ProfiledRankOps& a, const ProfiledRankOps& b) { return a.rank < b.rank; });
  const std::vector<int64_t> numbers = stepsEveryRankHas(ranks);
  if (numbers.empty()) {
    throw std::runtime_error(
        "the ranks' profiler traces share no ProfilerStep#N: profile with a schedule "
        "(torch.profiler.schedule) and call prof.step() once per training step, on every rank");
  }
  std::vector<std::vector<ProfiledStepOps>> steps(ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i) {
    const std::vector<const ProfiledOp*> wireOf =
        ranks[i].gpu ? kernelsLaunchedBy(ranks[i])
                     : wiresInIssueOrder(ranks[i].allreduces, ranks[i].wires);
    for (int64_t n : numbers) {
      ProfiledStepOps s;
      if (readProfiledStep(ranks[i], n, wireOf, &s)) steps[i].push_back(std::move(s));
    }
    for (size_t k = 0; k + 1 < steps[i].size(); ++k) {
      replay::DdpStepRecord& s = steps[i][k].record;
      const replay::DdpStepRecord& next = steps[i][k + 1].record;
      if (next.step == s.step + 1) s.optimizerNs = next.forwardBeginNs - s.finalizeEndNs;
    }
    if (steps[i].empty()) {
      throw std::runtime_error("rank " + std::to_string(ranks[i].rank) +
                               "'s profiler trace has no step with DDP's forward and a backward "
                               "after it");
    }
  }

  // The parameters and buckets, from the lowest rank's first step with buckets.
  const ProfiledStepOps* first = nullptr;
  for (const ProfiledStepOps& s : steps.front()) {
    if (!s.allreduces.empty() && !s.grads.empty()) {
      first = &s;
      break;
    }
  }
  if (first == nullptr) {
    throw std::runtime_error(
        "no profiled step of rank " + std::to_string(ranks.front().rank) +
        " shows DDP's gradients (torch::autograd::AccumulateGrad) and bucket allreduces "
        "(c10d::allreduce_) in its backward");
  }
  for (const ProfiledOp* g : first->grads) {
    if (g->elements < 0 || g->elementBytes <= 0) {
      throw std::runtime_error(
          "these profiler traces do not record the gradients' shapes: profile with "
          "record_shapes=True (torch.profiler.profile(..., record_shapes=True)) to recover DDP's "
          "buckets");
    }
  }
  const size_t paramCount = first->grads.size();
  ProfiledDdp out;
  replay::DdpRecording& rec = out.recording;
  rec.params.resize(paramCount);
  std::vector<size_t> order(paramCount);  // readiness order as parameter indices
  for (size_t k = 0; k < paramCount; ++k) {
    const ProfiledOp& g = *first->grads[k];
    order[k] = paramCount - 1 - k;
    rec.params[order[k]] = {g.elements * g.elementBytes, std::string(g.dtype)};
  }
  // Each bucket's parameters: the next ones in readiness order whose bytes add up to it.
  std::vector<size_t> bucketParams;
  size_t at = 0;
  for (const ProfiledOp* a : first->allreduces) {
    const int64_t elementBytes = at < paramCount ? first->grads[at]->elementBytes : 0;
    const int64_t bytes = a->elements * elementBytes;
    int64_t sum = 0;
    size_t count = 0;
    while (at < paramCount && sum < bytes) {
      sum += rec.params[order[at++]].bytes;
      ++count;
    }
    if (a->elements < 0 || sum != bytes) {
      std::string sizes;
      for (const ProfiledOp* b : first->allreduces) sizes += " " + std::to_string(b->elements);
      throw std::runtime_error(
          "the bucket allreduces of step " + std::to_string(first->number) + " (elements:" + sizes +
          ") are not runs of the gradients in the order they became ready: DDP's "
          "buckets cannot be recovered from this trace (a comm hook, several dtypes, or "
          "buckets not yet rebuilt in the first profiled step)");
    }
    out.bucketBytes.push_back(bytes);
    bucketParams.push_back(count);
  }
  if (at != paramCount) {
    throw std::runtime_error(std::to_string(paramCount - at) +
                             " gradients are in no bucket's allreduce (unused parameters, "
                             "find_unused_parameters): not recovered from profiler traces yet");
  }
  if (!inferLimits(rec.params, order, out.bucketBytes, &rec.limits)) {
    throw std::runtime_error("no bucket cap makes DDP's rule give the recorded buckets (" +
                             std::to_string(out.bucketBytes.size()) + " of " +
                             formatBytes(out.bucketBytes.front()) + " first)");
  }
  out.wire = ranks.front().wireBackend;
  if (out.wire.empty()) {
    throw std::runtime_error(
        "these profiler traces have no backend scope of the allreduces (gloo:all_reduce, "
        "ringx:all_reduce) and no NCCL kernel launched by them: the wire's times are unknown "
        "(profile a GPU job with ProfilerActivity.CUDA)");
  }
  out.device = ranks.front().gpu;
  bool anyCopy = false;
  for (const std::vector<ProfiledStepOps>& rank : steps) {
    for (const ProfiledStepOps& s : rank) anyCopy = anyCopy || !s.copies.empty();
  }
  rec.gradientAsBucketView = !anyCopy;
  int64_t world = 0;
  for (const RankData& r : store.ranks()) world = std::max(world, r.worldSize);
  rec.worldSize = world > 0 ? world : static_cast<int64_t>(ranks.size());

  out.readiness = order;
  // Each rank's steps with the recorded buckets.
  for (size_t i = 0; i < ranks.size(); ++i) {
    const ProfiledRankOps& ops = ranks[i];
    replay::DdpRankRecord& rr = rec.ranks.emplace_back();
    rr.rank = ops.rank;
    ProfiledDdpKernels* kernels = nullptr;
    if (ops.gpu) {
      kernels = &out.kernels.emplace_back();
      kernels->rank = ops.rank;
    }
    for (ProfiledStepOps& s : steps[i]) {
      if (s.allreduces.size() != out.bucketBytes.size()) continue;  // another plan
      if (kernels != nullptr && s.grads.size() == paramCount) {
        kernels->steps.push_back(s.number);
        std::vector<int64_t>& ready = kernels->ready.emplace_back();
        for (const ProfiledOp* g : s.grads) ready.push_back(ops.readyKernel(ops.gradPoint(*g)));
        std::vector<int64_t>& allreduces = kernels->allreduces.emplace_back();
        for (const ProfiledOp* w : s.wires) {
          allreduces.push_back(
              w != nullptr ? ops.collectives[static_cast<size_t>(w - ops.wires.data())].correlation
                           : -1);
        }
        // The copies back in bucket order, a gradient each in its bucket's order.
        size_t copy = 0, grad = 0;
        for (size_t b = 0; b < bucketParams.size() && !rec.gradientAsBucketView; ++b) {
          for (size_t j = 0; j < bucketParams[b] && copy < s.copies.size(); ++j, ++copy) {
            const ProfiledOp& c = *s.copies[copy];
            for (size_t k = ops.launchedBefore(c.begin);
                 k < ops.compute.size() && ops.compute[k].launch <= c.end; ++k) {
              kernels->copies.emplace_back(ops.compute[k].correlation, grad + j);
            }
          }
          grad += bucketParams[b];
        }
      }
      replay::DdpStepRecord& r = s.record;
      if (s.grads.size() == paramCount) {
        for (size_t k = 0; k < paramCount; ++k) {
          r.grads.emplace_back(order[k], ranks[i].gradReady(*s.grads[k]));
        }
      }
      size_t copy = 0;
      int64_t previousWireEnd = 0;
      for (size_t b = 0; b < s.allreduces.size(); ++b) {
        replay::DdpStepRecord::Bucket& bucket = r.buckets.emplace_back();
        bucket.index = static_cast<int64_t>(b);
        bucket.bytes = out.bucketBytes[b];
        // On a GPU the allreduce runs after the work launched before it (c10d's NCCL stream
        // waits on the current one).
        bucket.launchNs = ranks[i].readyAt(s.allreduces[b]->begin);
        if (const ProfiledOp* w = s.wires[b]) {
          // The group runs its collectives one after the other: a scope that began while the
          // one before it was still running (ringx's, from issue; gloo's second worker) was
          // on the wire from that one's end.
          bucket.wireNs = w->end - std::max(w->begin, previousWireEnd);
          bucket.wireEndNs = w->end;
          previousWireEnd = std::max(previousWireEnd, w->end);
        }
        if (!rec.gradientAsBucketView && copy + bucketParams[b] <= s.copies.size()) {
          bucket.copyBackNs = ranks[i].endOf(*s.copies[copy + bucketParams[b] - 1]) -
                              ranks[i].beginOf(*s.copies[copy]);
        }
        copy += bucketParams[b];
      }
      rr.steps.push_back(std::move(r));
    }
  }
  out.firstStep = first->number;
  return out;
}

}  // namespace ringx::analysis
