// NCCL and RCCL kernels of profiler (Kineto) traces as collectives: each becomes a span of
// category "collective" named by its operation (allreduce, allgather, ...; the kernel's own name
// kept in "kernel"), with the group, seq, bytes, group_size and group_rank that ringx's own
// collectives carry, so that everything that matches collectives across ranks (arrival skew,
// last to arrive, busbw, the Collectives panel, the aggregate lanes' stragglers) reads them as it
// reads ringx's (chrome_reader.h).
//
// What a kernel carries depends on torch's version (../shared/traces/nccl/README.txt): newer ones
// (torch >= ~2.3) name the collective, its process group and its ranks, the element counts and
// the dtype ("Collective name", "Process Group Name", "Process Group Ranks", "In msg nelems",
// ...); older ones only the kernel's name ("ncclKernel_AllReduce_RING_LL_Sum_float"; RCCL's
// "ncclDevKernel_Generic" says nothing), and the CPU annotation that launched it
// ("nccl:all_reduce") the input's dims and type. No real trace yet numbers its kernels, so one
// collective is matched across ranks by the first rule that applies, named in its "matched_by"
// argument:
//   1. its sequence number ("seq_num" or "comms_id"), where the kernel has one;
//   2. its process group and its place among the group's collectives in its profiler step;
//   3. its place among the NCCL kernels on its stream (streams numbered by first use) in its
//      profiler step.
// A kernel's step is the ProfilerStep#N whose time holds its launch on the CPU (the runtime call
// with the kernel's "correlation"), not its own time: the GPU runs behind the CPU. A trace with
// steps never matches across them (the seq holds the step), and a kernel whose launch the trace
// lacks (launched before profiling began) has no step and is left unmatched. Without steps the
// place is counted over the whole trace.
//
// A CPU job's collectives (gloo, ringx, any backend but NCCL) have no kernel: their backend's own
// scope of each one ("gloo:all_reduce" on gloo's worker thread while it runs it,
// "ringx:all_reduce" from issue to completion) becomes the collective, with its dims (or, where
// the scope has none, those of the c10d op that issued it: "c10d::allreduce_" around it), the
// backend as its group and its place among the backend's scopes in its profiler step (rule 2).
// Not on a rank that has a ringx stream in the store: ringx's own collectives are there.
#include <algorithm>
#include <cctype>
#include <map>
#include <tuple>
#include <unordered_map>

#include "base/error.h"
#include "base/text.h"
#include "trace/format/collective_key.h"
#include "trace/format/dtype_size.h"
#include "trace/model/chrome_ingest.h"
#include "trace/model/chrome_reader.h"

namespace ringx::model::chrome_detail {

namespace {

constexpr int64_t kPerStep = 1'000'000;  // seq = step * kPerStep + place (rules 2 and 3)

bool isNcclKernel(std::string_view name) {
  return startsWith(name, "ncclKernel_") || startsWith(name, "ncclDevKernel_") ||
         startsWith(name, "rcclKernel_") || startsWith(name, "ncclKernel") ||
         startsWith(name, "rcclKernel");
}

std::string foldCase(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c != '_') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

// ringx's name for an operation, from torch's ("_allgather_base", "all_reduce",
// "reduce_scatter_tensor") or NCCL's kernel name ("AllReduce"); "" when it says none.
std::string ringxOpName(std::string_view text) {
  const std::string t = foldCase(text);
  if (t.find("allreduce") != std::string::npos) return "allreduce";
  if (t.find("reducescatter") != std::string::npos) return "reduce_scatter";
  if (t.find("allgather") != std::string::npos) return "allgather";
  if (t.find("alltoall") != std::string::npos) return "alltoall";
  if (t.find("broadcast") != std::string::npos) return "broadcast";
  if (t.find("barrier") != std::string::npos) return "barrier";
  if (t.find("gather") != std::string::npos) return "gather";
  if (t.find("scatter") != std::string::npos) return "scatter";
  if (t.find("reduce") != std::string::npos) return "reduce";
  if (t.find("sendrecv") != std::string::npos) return "sendrecv";
  if (t.find("send") != std::string::npos) return "send";
  if (t.find("recv") != std::string::npos) return "recv";
  return "";
}

// The operation in a kernel's name: "ncclKernel_AllReduce_RING_LL_Sum_float(...)" -> allreduce;
// "" for a generic kernel.
std::string kernelOp(std::string_view name) {
  const size_t underscore = name.find('_');
  if (underscore == std::string_view::npos) return "";
  std::string_view rest = name.substr(underscore + 1);
  rest = rest.substr(0, rest.find_first_of("_("));
  return rest == "Generic" ? "" : ringxOpName(rest);
}

// A CPU backend's scope of a collective, "<backend>:<op>" ("gloo:all_reduce"): the backend,
// or "" for any other name (torch's ops are "aten::...", "c10d::..."; NCCL's "nccl:..." is the CPU
// side of a kernel).
std::string_view cpuCollectiveBackend(std::string_view name) {
  const size_t colon = name.find(':');
  if (colon == std::string_view::npos || colon == 0 ||
      name.find(':', colon + 1) != std::string_view::npos) {
    return {};
  }
  const std::string_view backend = name.substr(0, colon);
  for (char c : backend) {
    if (!std::islower(static_cast<unsigned char>(c))) return {};
  }
  if (backend == "nccl" || backend == "c10d" || ringxOpName(name.substr(colon + 1)).empty()) {
    return {};
  }
  return backend;
}

}  // namespace

void Reader::ncclCollectives(const std::vector<int32_t>& rankOf) {
  std::unordered_map<uint32_t, bool> ncclName;
  auto isNccl = [&](uint32_t name) {
    auto [it, added] = ncclName.try_emplace(name, false);
    if (added) it->second = isNcclKernel(store_.str(name));
    return it->second;
  };
  std::unordered_map<uint32_t, bool> cpuName;
  auto isCpuCollective = [&](uint32_t name) {
    auto [it, added] = cpuName.try_emplace(name, false);
    if (added) it->second = !cpuCollectiveBackend(store_.str(name)).empty();
    return it->second;
  };
  // A rank whose ringx stream is in the store already has its collectives.
  auto ringxRank = [&](int32_t rank) {
    const RankData* r = rank < 0 ? nullptr : store_.findRank(rank);
    return r != nullptr && r->clockKnown;
  };
  std::vector<size_t> kernels;
  for (size_t i = 0; i < events_.size(); ++i) {
    const PendingEvent& e = events_[i];
    if (e.bits & kPendingInstant) continue;
    const uint32_t process = threads_[e.thread].process;
    if (processes_[process].device >= 0 ? isNccl(e.name)
                                        : isCpuCollective(e.name) && !ringxRank(rankOf[process])) {
      kernels.push_back(i);
    }
  }
  if (kernels.empty()) return;

  auto key = [&](std::string_view k) { return store_.strings().find(k); };
  const uint32_t correlationKey = key("correlation"), seqNumKey = key("seq_num"),
                 commsIdKey = key("comms_id"), collectiveKey = key("Collective name"),
                 groupNameKey = key("Process Group Name"),
                 groupDescKey = key("Process Group Description"),
                 groupRanksKey = key("Process Group Ranks"), groupSizeKey = key("Group size"),
                 inKey = key("In msg nelems"), outKey = key("Out msg nelems"),
                 dtypeKey = key("dtype"), dimsKey = key("Input Dims"), typeKey = key("Input type");
  auto argOf = [&](const PendingEvent& e, uint32_t k) -> const ArgValue* {
    if (k == 0) return nullptr;
    for (uint32_t a = e.firstArg; a < e.firstArg + e.argCount; ++a) {
      if (args_[a].key == k) return &args_[a];
    }
    return nullptr;
  };
  auto intOf = [&](const PendingEvent& e, uint32_t k, int64_t fallback) {
    const ArgValue* a = argOf(e, k);
    if (a == nullptr) return fallback;
    if (a->kind == ArgKind::kInt) return a->intValue;
    if (a->kind == ArgKind::kDouble) return static_cast<int64_t>(a->doubleValue);
    return fallback;
  };
  auto textOf = [&](const PendingEvent& e, uint32_t k) -> std::string_view {
    const ArgValue* a = argOf(e, k);
    return a != nullptr && a->kind == ArgKind::kString ? store_.str(a->stringId)
                                                       : std::string_view{};
  };
  // The bytes of the first tensor an op's Input Dims and type name (record_shapes); -1 if none.
  auto firstTensorBytes = [&](const PendingEvent& e) -> int64_t {
    const std::vector<int64_t> dims = firstIntegerList(textOf(e, dimsKey));
    const int64_t size = trace::dtypeBytes(firstQuoted(textOf(e, typeKey)));
    if (dims.empty() || size <= 0) return -1;
    int64_t bytes = size;
    for (int64_t d : dims) bytes *= d;
    return bytes;
  };

  // The CPU side, per rank: launches by correlation, the steps, the "nccl:" annotations.
  struct Window {
    int64_t begin, end;
    size_t event;
  };
  std::map<std::pair<int32_t, int64_t>, size_t> launchOf;  // (rank, correlation) -> event
  std::map<int32_t, std::vector<std::pair<Window, int64_t>>> stepsOf;  // rank -> (span, N)
  std::map<uint32_t, std::vector<Window>> annotationsOf;               // thread -> "nccl:" spans
  std::map<uint32_t, std::vector<Window>> issuesOf;                    // thread -> "c10d::" ops
  for (size_t i = 0; i < events_.size(); ++i) {
    const PendingEvent& e = events_[i];
    const uint32_t process = threads_[e.thread].process;
    if (processes_[process].device >= 0 || (e.bits & kPendingInstant)) continue;
    const int32_t rank = rankOf[process];
    const std::string_view name = store_.str(e.name);
    if (const std::optional<int64_t> n = profilerStepNumber(name)) {
      stepsOf[rank].push_back({{e.begin, e.end, i}, *n});
    } else if (startsWith(name, "nccl:")) {
      annotationsOf[e.thread].push_back({e.begin, e.end, i});
    } else if (startsWith(name, "c10d::")) {
      issuesOf[e.thread].push_back({e.begin, e.end, i});
    }
    const int64_t correlation = intOf(e, correlationKey, -1);
    if (correlation >= 0) launchOf.emplace(std::make_pair(rank, correlation), i);
  }
  // The innermost "nccl:" annotation (or "c10d::" op) around time t on a thread.
  auto annotationAt = [&](uint32_t thread, int64_t t, bool issue = false) -> const PendingEvent* {
    const auto& of = issue ? issuesOf : annotationsOf;
    auto found = of.find(thread);
    if (found == of.end()) return nullptr;
    const PendingEvent* best = nullptr;
    for (const Window& w : found->second) {
      if (w.begin <= t && t <= w.end &&
          (best == nullptr || w.end - w.begin < best->end - best->begin)) {
        best = &events_[w.event];
      }
    }
    return best;
  };

  // Each kernel's facts; then places, in time order per rank and group (and step).
  struct Kernel {
    size_t event;
    int32_t rank;
    std::string op, group, rule;
    int64_t seq = -1, step = -1, bytes = -1, groupSize = -1, groupRank = -1;
    bool steps = false;  // its rank recorded profiler steps
    bool cpu = false;    // a CPU backend's scope, not a kernel
  };
  std::vector<Kernel> found;
  std::map<std::pair<int32_t, uint32_t>, int> streamNumber;  // (rank, thread) -> 1, 2, ...
  std::map<int32_t, int> streams;
  std::sort(kernels.begin(), kernels.end(),
            [&](size_t a, size_t b) { return events_[a].begin < events_[b].begin; });
  for (size_t i : kernels) {
    const PendingEvent& e = events_[i];
    Kernel k;
    k.event = i;
    k.rank = rankOf[threads_[e.thread].process];
    if (processes_[threads_[e.thread].process].device < 0) {
      // A CPU backend's scope: its own time is its step's, its dims its own or its issue's.
      const std::string_view name = store_.str(e.name);
      const std::string_view backend = cpuCollectiveBackend(name);
      k.cpu = true;
      k.op = ringxOpName(name.substr(backend.size() + 1));
      k.group = std::string(backend);
      auto steps = stepsOf.find(k.rank);
      k.steps = steps != stepsOf.end();
      if (k.steps) {
        for (const auto& [w, n] : steps->second) {
          if (w.begin <= e.begin && e.begin <= w.end) k.step = n;
        }
      }
      if (distributedWorldSize_ > 0) {
        k.groupSize = distributedWorldSize_;
        k.groupRank = k.rank;
      }
      // Bytes as nccl-tests counts them (an all-gather's output, anything else's input). The
      // scope's own dims are its input (gloo's); the issuing c10d op's first tensor is its
      // output (c10d::_allgather_base_(out, in), _reduce_scatter_base_(out, in), ...).
      const int64_t own = firstTensorBytes(e);
      const PendingEvent* issue = own >= 0 ? nullptr : annotationAt(e.thread, e.begin, true);
      const int64_t bytes = own >= 0 ? own : issue != nullptr ? firstTensorBytes(*issue) : -1;
      const bool shard = own >= 0 ? k.op == "allgather" : k.op == "reduce_scatter";
      k.bytes = bytes >= 0 && shard && k.groupSize > 0 ? bytes * k.groupSize : bytes;
      found.push_back(std::move(k));
      continue;
    }
    // Its launch, and what the CPU knew there: the step, the "nccl:" annotation.
    const PendingEvent* launch = nullptr;
    if (const int64_t c = intOf(e, correlationKey, -1); c >= 0) {
      auto l = launchOf.find({k.rank, c});
      if (l != launchOf.end()) launch = &events_[l->second];
    }
    auto steps = stepsOf.find(k.rank);
    k.steps = steps != stepsOf.end();
    if (launch != nullptr && k.steps) {
      for (const auto& [w, n] : steps->second) {
        if (w.begin <= launch->begin && launch->begin <= w.end) k.step = n;
      }
    }
    const PendingEvent* annotation =
        launch != nullptr ? annotationAt(launch->thread, launch->begin) : nullptr;
    // The operation: torch's name for it, else the annotation's, else the kernel's.
    k.op = ringxOpName(textOf(e, collectiveKey));
    if (k.op.empty() && annotation != nullptr)
      k.op = ringxOpName(store_.str(annotation->name).substr(5));
    if (k.op.empty()) k.op = kernelOp(store_.str(e.name));
    if (k.op.empty()) k.op = "nccl";
    // Its group: the process group, else its stream.
    const std::string_view groupName = textOf(e, groupNameKey);
    const std::vector<int64_t> members = firstIntegerList(textOf(e, groupRanksKey));
    if (!groupName.empty()) {
      const std::string_view desc = textOf(e, groupDescKey);
      k.group = strCat("pg ", groupName);
      if (!desc.empty() && desc != "undefined") k.group += strCat(" (", desc, ")");
      k.groupSize = intOf(e, groupSizeKey, static_cast<int64_t>(members.size()));
      for (size_t m = 0; m < members.size(); ++m) {
        if (members[m] == k.rank) k.groupRank = static_cast<int64_t>(m);
      }
    } else {
      auto [s, added] = streamNumber.try_emplace({k.rank, e.thread}, 0);
      if (added) s->second = ++streams[k.rank];
      k.group = strCat("nccl stream ", s->second);
      if (distributedWorldSize_ > 0) {
        k.groupSize = distributedWorldSize_;
        k.groupRank = k.rank;
      }
    }
    // Bytes as nccl-tests counts them: an all-gather's output, anything else's input.
    const int64_t elementBytes = trace::dtypeBytes(textOf(e, dtypeKey));
    const int64_t elements = intOf(e, k.op == "allgather" ? outKey : inKey, intOf(e, inKey, -1));
    if (elementBytes > 0 && elements >= 0) {
      k.bytes = elements * elementBytes;
    } else if (annotation != nullptr) {
      // The "nccl:" annotation's dims are the collective's input.
      k.bytes = firstTensorBytes(*annotation);
      if (k.bytes >= 0 && k.op == "allgather" && k.groupSize > 0) k.bytes *= k.groupSize;
    }
    // Rule 1 where it applies; rules 2 and 3 number below.
    const int64_t seq = intOf(e, seqNumKey, intOf(e, commsIdKey, -1));
    if (seq >= 0) {
      k.seq = seq;
      k.rule = "seq_num";
    }
    found.push_back(std::move(k));
  }
  std::map<std::tuple<int32_t, std::string, int64_t>, int64_t> places;  // (rank, group, step)
  for (Kernel& k : found) {
    if (k.seq >= 0 || (k.steps && k.step < 0)) continue;
    const int64_t place = places[{k.rank, k.group, k.step}]++;
    k.seq = k.steps ? k.step * kPerStep + place : place;
    const bool byGroup = startsWith(k.group, "pg ");
    k.rule = strCat(k.cpu     ? "backend scope"
                    : byGroup ? "process group"
                              : "NCCL stream",
                    " and order", k.steps ? " in profiler step" : "");
  }

  // The kernels become collectives: their args, copied to the end, with the new ones.
  const uint8_t collective = store_.category(trace::categoryName(trace::Category::kCollective));
  const uint32_t kernelKey = intern("kernel"), scopeKey = intern("scope"),
                 opKey = intern(trace::arg::kOp), seqKey = intern(trace::arg::kSeq),
                 groupKey = intern(trace::arg::kGroup), bytesKey = intern(trace::arg::kBytes),
                 sizeKey = intern(trace::arg::kGroupSize), rankKey = intern(trace::arg::kGroupRank),
                 ruleKey = intern(trace::kMatchedByArg), stepKey = intern(trace::arg::kStep);
  for (const Kernel& k : found) {
    PendingEvent& e = events_[k.event];
    const uint32_t first = static_cast<uint32_t>(args_.size());
    for (uint32_t a = e.firstArg; a < e.firstArg + e.argCount; ++a) args_.push_back(args_[a]);
    args_.push_back(ArgValue::ofString(k.cpu ? scopeKey : kernelKey, e.name));
    args_.push_back(ArgValue::ofString(opKey, intern(k.op)));
    args_.push_back(ArgValue::ofString(groupKey, intern(k.group)));
    if (k.seq >= 0) {
      args_.push_back(ArgValue::ofInt(seqKey, k.seq));
      args_.push_back(ArgValue::ofString(ruleKey, intern(k.rule)));
    }
    if (k.step >= 0) args_.push_back(ArgValue::ofInt(stepKey, k.step));
    if (k.bytes >= 0) args_.push_back(ArgValue::ofInt(bytesKey, k.bytes));
    if (k.groupSize > 0) args_.push_back(ArgValue::ofInt(sizeKey, k.groupSize));
    if (k.groupRank >= 0) args_.push_back(ArgValue::ofInt(rankKey, k.groupRank));
    e.firstArg = first;
    e.argCount = static_cast<uint16_t>(std::min<size_t>(args_.size() - first, UINT16_MAX));
    e.name = intern(k.op);
    e.category = collective;
  }
}

}  // namespace ringx::model::chrome_detail
