// Kineto's GPU pids in Chrome JSON ingest (chrome_reader.h): which process each pid's events
// belong to, decided at commit, before ranks are.
//
// The PyTorch profiler (Kineto) writes one file per process. Beside the process's own pid (the
// OS pid, process_labels "CPU") it gives each GPU a pid of its own, the device's index, labelled
// "GPU N" (its process_name is the process's name, not the device's), with the device's streams
// as its threads (tid = stream id, thread_name "stream 7 "). It writes that metadata for every
// device it can see, used or not (GPU 0 to 15 by default), and it keeps pids for its own
// bookkeeping: "Spans" (the profiling window), "Traces" (the iteration marker), "" (the window's
// end), -1 (profiler overhead) and "GPU N Counters" (hardware counters). Read as processes, a
// one-GPU job would be twenty ranks.
//
// So a GPU's pid belongs to the process that launched on it: the one whose launch flows (Kineto's
// "ac2g", from the runtime call to the kernel) end on it, else the file's own process. Its lanes
// join that process's rank as "GPU N / stream M" (onGpu); a GPU without events makes
// no rank and no lane. The bookkeeping pids join the file's own process, which is the process
// Kineto labels "CPU", or, with no such label, the only other process with events. Where no
// process is the file's own (several, unlabelled) and no flow says, a GPU stays a rank of its
// own as it was. Files of several processes keep one rank per process, and a file with
// distributedInfo is one rank whatever this decides.
//
// A GPU is known by its label "GPU N" (process_labels, or a process_name of that form) or, where
// the metadata is gone (a trimmed trace), by what only a device runs: kernels, copies and fills
// whose args.device is the pid.
#include "trace/model/chrome_reader.h"

#include <charconv>
#include <map>
#include <unordered_map>

#include "base/error.h"

namespace ringx::model::chrome_detail {
namespace {

// "GPU N" + suffix -> N.
bool gpuIndex(std::string_view text, std::string_view suffix, int32_t* device) {
  constexpr std::string_view kPrefix = "GPU ";
  if (text.size() <= kPrefix.size() + suffix.size() || text.substr(0, kPrefix.size()) != kPrefix ||
      text.substr(text.size() - suffix.size()) != suffix)
    return false;
  const char* begin = text.data() + kPrefix.size();
  const char* end = text.data() + text.size() - suffix.size();
  int32_t value = 0;
  const auto parsed = std::from_chars(begin, end, value);
  if (parsed.ec != std::errc() || parsed.ptr != end || value < 0) return false;
  *device = value;
  return true;
}

// Kineto's categories for what runs on a device (CUDA and ROCm alike), and only there.
constexpr std::string_view kDeviceCategories[] = {"kernel", "gpu_memcpy", "gpu_memset"};

}  // namespace

std::string onGpu(int32_t device, std::string_view name) {
  // Kineto names a stream "stream 7 " (room for a suffix it mostly leaves out).
  while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
  return strCat("GPU ", device, " / ", name);
}

void Reader::findOwners() {
  const uint32_t n = static_cast<uint32_t>(processes_.size());
  std::vector<bool> bookkeeping(n, false);
  for (uint32_t i = 0; i < n; ++i) processes_[i].owner = i;
  for (const Thread& t : threads_)
    if (t.used) processes_[t.process].active = true;
  for (const PendingCounter& c : counters_) processes_[c.process].active = true;

  // GPUs and bookkeeping by their pids and labels.
  for (uint32_t i = 0; i < n; ++i) {
    Process& p = processes_[i];
    if (p.ringxRank >= 0 || p.cpuLabel) continue;
    if (const std::string* text = namedText(p.pid)) {
      gpuIndex(*text, " Counters", &p.device);
      bookkeeping[i] = *text == "Spans" || *text == "Traces" || text->empty();
    } else if (!gpuIndex(store_.str(p.labelText), "", &p.device) &&
               !gpuIndex(store_.str(p.nameText), "", &p.device)) {
      bookkeeping[i] = p.pid == -1;
    }
  }
  // GPUs without metadata, by their kernels, copies and fills.
  const std::vector<std::string>& categories = store_.categories();
  std::vector<bool> deviceCategory(categories.size(), false);
  bool anyDeviceCategory = false;
  for (size_t c = 0; c < categories.size(); ++c)
    for (std::string_view name : kDeviceCategories)
      if (categories[c] == name) deviceCategory[c] = anyDeviceCategory = true;
  const uint32_t deviceKey = store_.strings().find("device");
  if (anyDeviceCategory && deviceKey != 0) {
    for (const PendingEvent& e : events_) {
      if (!deviceCategory[e.category]) continue;
      Process& p = processes_[threads_[e.thread].process];
      if (p.device >= 0 || p.ringxRank >= 0 || p.cpuLabel || p.pid < 0 ||
          namedText(p.pid) != nullptr)
        continue;
      for (uint32_t a = e.firstArg; a < e.firstArg + e.argCount; ++a)
        if (args_[a].key == deviceKey && args_[a].kind == ArgKind::kInt &&
            args_[a].intValue == p.pid)
          p.device = static_cast<int32_t>(p.pid);
    }
  }
  auto isHost = [&](uint32_t i) {
    const Process& p = processes_[i];
    return p.ringxRank < 0 && p.device < 0 && !bookkeeping[i];
  };

  // The file's own process: the one Kineto labels "CPU", else the only other one with events.
  int64_t labelledHost = -1, busyHost = -1;
  uint32_t labelled = 0, busy = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (!isHost(i)) continue;
    if (processes_[i].cpuLabel) {
      ++labelled;
      labelledHost = i;
    }
    if (processes_[i].active) {
      ++busy;
      busyHost = i;
    }
  }
  const int64_t own = labelled == 1 ? labelledHost : labelled == 0 && busy == 1 ? busyHost : -1;

  // Launch flows: a GPU's work was launched by the process where its flows start.
  std::unordered_map<uint32_t, uint32_t> startedIn;  // flow key -> host process
  for (const PendingFlowEnd& f : flowEnds_) {
    const uint32_t p = threads_[f.thread].process;
    if (f.role == kFlowStart && isHost(p)) startedIn.emplace(f.key, p);
  }
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> launches;  // (GPU, host) -> flows
  for (const PendingFlowEnd& f : flowEnds_) {
    const uint32_t p = threads_[f.thread].process;
    if (f.role == kFlowStart || processes_[p].device < 0) continue;
    const auto it = startedIn.find(f.key);
    if (it != startedIn.end()) ++launches[{p, it->second}];
  }
  std::vector<uint64_t> most(n, 0);
  for (const auto& [pair, count] : launches) {
    // Ascending hosts: a tie goes to the one seen first.
    if (count <= most[pair.first]) continue;
    most[pair.first] = count;
    processes_[pair.first].owner = pair.second;
  }
  for (uint32_t i = 0; i < n; ++i) {
    Process& p = processes_[i];
    if (p.owner == i && own >= 0 && (p.device >= 0 || bookkeeping[i]))
      p.owner = static_cast<uint32_t>(own);
  }
}

}  // namespace ringx::model::chrome_detail
