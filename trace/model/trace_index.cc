// The on-disk index (see trace_index.h). Little-endian fixed-width integers and
// length-prefixed strings; string ids are written as their text and interned
// again on reading, since a new store numbers its strings afresh.
#include "trace/model/trace_index.h"

#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "trace/model/aggregate_lanes.h"

namespace ringx::model {
namespace {

constexpr char kMagic[8] = {'R', 'X', 'V', 'I', 'N', 'D', 'E', 'X'};
constexpr uint32_t kVersion = 1;

// Straight to the file: the buckets alone are tens of megabytes, and a copy of
// them in a string would double the open's peak.
struct Writer {
  std::ostream& out;
  template <typename T>
  void put(T v) {
    out.write(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void bytes(const void* data, size_t size) {
    out.write(static_cast<const char*>(data), std::streamsize(size));
  }
  void str(std::string_view s) {
    put<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
};

struct Reader {
  const std::string& in;
  size_t at = 0;
  bool ok = true;
  template <typename T>
  T get() {
    T v{};
    if (at + sizeof v > in.size()) {
      ok = false;
      return v;
    }
    std::memcpy(&v, in.data() + at, sizeof v);
    at += sizeof v;
    return v;
  }
  std::string str() {
    const uint64_t n = get<uint64_t>();
    if (!ok || n > in.size() - at) {
      ok = false;
      return {};
    }
    std::string s = in.substr(at, n);
    at += n;
    return s;
  }
  // A count that must fit in what is left (each item at least `itemBytes`).
  uint64_t count(size_t itemBytes) {
    const uint64_t n = get<uint64_t>();
    if (!ok || n > (in.size() - at) / std::max<size_t>(itemBytes, 1)) ok = false;
    return ok ? n : 0;
  }
};

// A rank file as the index remembers it.
struct FileStamp {
  std::string name;
  uint64_t size = 0;
  int64_t mtimeNs = 0;
  bool operator==(const FileStamp& o) const {
    return name == o.name && size == o.size && mtimeNs == o.mtimeNs;
  }
};

std::vector<FileStamp> stampsOf(const trace::TraceReader& reader) {
  std::vector<FileStamp> out;
  for (const std::string& f : reader.files()) {
    struct stat st {};
    if (::stat(f.c_str(), &st) != 0) return {};
    out.push_back(FileStamp{f, uint64_t(st.st_size),
                            int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec});
  }
  return out;
}

}  // namespace

// Saves and reads AggregateLanes' buckets (a friend of the class).
class TraceIndexCodec {
 public:
  static void save(Writer& w, const AggregateLanes& lanes, const TraceStore& store) {
    w.put<int64_t>(lanes.widthNs_);
    w.put<int64_t>(lanes.first_);
    w.put<uint64_t>(lanes.length_);
    w.put<uint64_t>(lanes.capacity_);
    w.put<uint64_t>(lanes.groups_.size());
    for (const RankGroup& g : lanes.groups_) {
      w.str(g.label);
      w.put<uint64_t>(g.ranks.size());
      for (int32_t r : g.ranks) w.put<int32_t>(r);
      w.put<uint64_t>(g.marks.size());
      for (const StragglerMark& m : g.marks) {
        w.put<int64_t>(m.timeNs);
        w.put<int32_t>(m.rank);
        w.str(store.str(m.name));
        w.str(store.str(m.group));
        w.put<int64_t>(m.seq);
        w.put<int64_t>(m.skewNs);
      }
    }
    w.put<uint64_t>(lanes.series_.size());
    for (const std::vector<double>& s : lanes.series_) {
      w.put<uint64_t>(s.size());
      w.bytes(s.data(), s.size() * sizeof(double));
    }
  }

  static std::shared_ptr<AggregateLanes> load(Reader& r, TraceStore& store) {
    const int64_t width = r.get<int64_t>(), first = r.get<int64_t>();
    const uint64_t length = r.get<uint64_t>(), capacity = r.get<uint64_t>();
    std::vector<RankGroup> groups(r.count(16));
    for (RankGroup& g : groups) {
      g.label = r.str();
      g.ranks.resize(r.count(sizeof(int32_t)));
      for (int32_t& rank : g.ranks) rank = r.get<int32_t>();
      g.marks.resize(r.count(44));
      for (StragglerMark& m : g.marks) {
        m.timeNs = r.get<int64_t>();
        m.rank = r.get<int32_t>();
        m.name = store.strings().intern(r.str());
        m.group = store.strings().intern(r.str());
        m.seq = r.get<int64_t>();
        m.skewNs = r.get<int64_t>();
      }
    }
    auto lanes = std::make_shared<AggregateLanes>(std::move(groups));
    const uint64_t series = r.count(8);
    if (!r.ok || series != lanes->series_.size() || width <= 0) return nullptr;
    for (std::vector<double>& s : lanes->series_) {
      const uint64_t n = r.count(sizeof(double));
      if (!r.ok || n != length + 1) return nullptr;
      s.resize(n);
      std::memcpy(s.data(), r.in.data() + r.at, n * sizeof(double));
      r.at += n * sizeof(double);
    }
    lanes->widthNs_ = width;
    lanes->first_ = first;
    lanes->length_ = length;
    lanes->capacity_ = capacity;
    lanes->setFromFiles();
    return lanes;
  }
};

std::string traceIndexPath(const std::string& path) {
  std::string dir;
  if (const char* d = std::getenv("RINGX_VIEWER_CACHE_DIR"); d && *d) {
    dir = d;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    dir = std::string(x) + "/ringx-viewer";
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    dir = std::string(h) + "/.cache/ringx-viewer";
  } else {
    return "";
  }
  std::error_code ec;
  const std::string absolute = std::filesystem::weakly_canonical(path, ec).string();
  uint64_t hash = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : ec ? path : absolute) hash = (hash ^ c) * 1099511628211ull;
  char name[40];
  std::snprintf(name, sizeof name, "/index-%016llx.bin", static_cast<unsigned long long>(hash));
  return dir + name;
}

bool saveTraceIndex(const std::string& indexPath, const trace::TraceReader& reader,
                    const TraceStore& store) {
  const AggregateLanes* lanes = store.aggregates();
  const std::vector<FileStamp> stamps = stampsOf(reader);
  if (indexPath.empty() || !lanes || stamps.empty()) return false;
  // Written aside and renamed: a viewer killed mid-write leaves no half index.
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(indexPath).parent_path(), ec);
  const std::string tmp = indexPath + ".tmp";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  Writer w{out};
  w.bytes(kMagic, sizeof kMagic);
  w.put<uint32_t>(kVersion);
  w.put<uint64_t>(stamps.size());
  for (const FileStamp& f : stamps) {
    w.str(f.name);
    w.put<uint64_t>(f.size);
    w.put<int64_t>(f.mtimeNs);
  }
  w.put<uint64_t>(store.warnings().size());
  for (const std::string& warning : store.warnings()) w.str(warning);
  w.put<uint64_t>(store.ranks().size());
  for (const RankData& r : store.ranks()) {
    w.put<int32_t>(r.rank);
    w.str(r.host);
    w.put<int64_t>(r.pid);
    w.str(r.source);
    w.put<uint8_t>(r.truncated);
    w.put<uint8_t>(r.clockAligned);
    w.put<int64_t>(r.clockUncertaintyNs);
    w.put<uint8_t>(r.clockKnown);
    w.put<uint8_t>(r.clockReference);
    w.put<int64_t>(r.clockOffsetNs);
    w.put<uint64_t>(r.dropped);
    w.put<uint64_t>(r.events);
    w.put<int64_t>(r.beginNs);
    w.put<int64_t>(r.endNs);
    w.put<uint8_t>(r.hasWallClock);
    w.put<int64_t>(r.wallToAlignedNs);
  }
  TraceIndexCodec::save(w, *lanes, store);
  out.close();
  if (!out) {
    std::filesystem::remove(tmp, ec);
    return false;
  }
  std::filesystem::rename(tmp, indexPath, ec);
  return !ec;
}

bool loadTraceIndex(const std::string& indexPath, const trace::TraceReader& reader,
                    TraceStore& store) {
  if (indexPath.empty()) return false;
  std::ifstream file(indexPath, std::ios::binary);
  if (!file) return false;
  const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (bytes.size() < sizeof kMagic + 4 || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    return false;
  Reader r{bytes, sizeof kMagic};
  if (r.get<uint32_t>() != kVersion) return false;
  std::vector<FileStamp> stamps(r.count(24));
  for (FileStamp& f : stamps) {
    f.name = r.str();
    f.size = r.get<uint64_t>();
    f.mtimeNs = r.get<int64_t>();
  }
  if (!r.ok || stamps != stampsOf(reader)) return false;  // the trace changed since
  std::vector<std::string> warnings(r.count(8));
  for (std::string& warning : warnings) warning = r.str();
  std::vector<RankData> ranks(r.count(70));
  for (RankData& d : ranks) {
    d.rank = r.get<int32_t>();
    d.host = r.str();
    d.pid = r.get<int64_t>();
    d.source = r.str();
    d.truncated = r.get<uint8_t>();
    d.clockAligned = r.get<uint8_t>();
    d.clockUncertaintyNs = r.get<int64_t>();
    d.clockKnown = r.get<uint8_t>();
    d.clockReference = r.get<uint8_t>();
    d.clockOffsetNs = r.get<int64_t>();
    d.dropped = r.get<uint64_t>();
    d.events = r.get<uint64_t>();
    d.beginNs = r.get<int64_t>();
    d.endNs = r.get<int64_t>();
    d.hasWallClock = r.get<uint8_t>();
    d.wallToAlignedNs = r.get<int64_t>();
    d.eventsLoaded = false;
  }
  std::shared_ptr<AggregateLanes> lanes = r.ok ? TraceIndexCodec::load(r, store) : nullptr;
  if (!r.ok || !lanes || r.at != bytes.size()) return false;
  for (RankData& d : ranks) store.adoptRank(std::move(d));
  for (std::string& warning : warnings) store.addWarning(std::move(warning));
  store.finalize();
  store.setAggregates(std::move(lanes));
  return true;
}

}  // namespace ringx::model
