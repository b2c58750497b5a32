// The oneCCL side of bench/vs_libraries.py: one rank of a oneCCL job (Intel's oneCCL from
// PyPI, set up by scripts/oneccl_setup.sh, which also compiles this file; no torch, no MPI
// headers). Times the cases it is given with bench/latency_method.py's method, ported
// as it is: settle() barriers first, then per case one operation to warm up, and `operations`
// single operations each timed alone right after a barrier; the median of them on every
// rank, and the slowest rank's median (a MAX allreduce) is the figure. float32 buffers of
// element_count() elements, in place where torch's call is. Rank 0 prints
// {"collective size": seconds} as one JSON line, as bench/openmpi_ranks.py does.
//
//   oneccl_ranks --kvs FILE --cases allreduce:4096:400,barrier:0:400 [--settle 5000]
//                [--rank R --world N]
//
// Without --rank and --world they come from PMI_RANK and PMI_SIZE (Intel MPI's mpirun).
// The ranks meet through oneCCL's key-value store: rank 0 creates it and writes its address
// to FILE, the others read it from there.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "oneapi/ccl.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Case {
  std::string collective;
  long long bytes = 0;
  int operations = 0;
};

struct Options {
  std::string kvsFile;
  std::vector<Case> cases;
  int settle = 5000;
  int rank = -1;
  int world = -1;
};

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

int envInt(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) throw std::runtime_error(std::string("no --rank/--world and no ") + name);
  return std::stoi(value);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) throw std::runtime_error("missing value after " + arg);
    const std::string value = argv[++i];
    if (arg == "--kvs") {
      o.kvsFile = value;
    } else if (arg == "--settle") {
      o.settle = std::stoi(value);
    } else if (arg == "--rank") {
      o.rank = std::stoi(value);
    } else if (arg == "--world") {
      o.world = std::stoi(value);
    } else if (arg == "--cases") {
      for (const auto& item : split(value, ',')) {
        const auto parts = split(item, ':');
        if (parts.size() != 3) throw std::runtime_error("a case is collective:bytes:operations");
        o.cases.push_back({parts[0], std::stoll(parts[1]), std::stoi(parts[2])});
      }
    } else {
      throw std::runtime_error("unknown argument " + arg);
    }
  }
  if (o.kvsFile.empty() || o.cases.empty()) throw std::runtime_error("needs --kvs and --cases");
  if (o.rank < 0) o.rank = envInt("PMI_RANK");
  if (o.world < 0) o.world = envInt("PMI_SIZE");
  return o;
}

// Rank 0's store address through a file: written whole under another name, then renamed.
ccl::shared_ptr_class<ccl::kvs> meet(const Options& o) {
  if (o.rank == 0) {
    auto kvs = ccl::create_main_kvs();
    const ccl::kvs::address_type address = kvs->get_address();
    const std::string partial = o.kvsFile + ".partial";
    {
      std::ofstream out(partial, std::ios::binary);
      out.write(address.data(), address.size());
      if (!out) throw std::runtime_error("cannot write " + partial);
    }
    if (std::rename(partial.c_str(), o.kvsFile.c_str()) != 0) {
      throw std::runtime_error("cannot rename " + partial);
    }
    return kvs;
  }
  ccl::kvs::address_type address{};
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  for (;;) {
    std::ifstream in(o.kvsFile, std::ios::binary);
    if (in.read(address.data(), address.size())) break;
    if (Clock::now() > deadline) throw std::runtime_error("no store address in " + o.kvsFile);
    ::usleep(10000);
  }
  return ccl::create_kvs(address);
}

// latency_method.element_count: float32 elements of each rank's input.
size_t elementCount(const std::string& collective, long long bytes, int world) {
  const size_t elements = static_cast<size_t>(bytes) / 4;
  if (collective == "all_gather") return elements / world;
  if (collective == "reduce_scatter") return elements / world * world;
  return elements;
}

// The buffers of one case and the operation on them, as bench/openmpi_ranks.py's make_op.
struct Op {
  std::vector<float> input, output;
  std::function<void()> run;
};

void makeOp(Op& op, const Case& c, const ccl::communicator& comm) {
  const int world = comm.size();
  const size_t n = elementCount(c.collective, c.bytes, world);
  const auto f32 = ccl::datatype::float32;
  if (c.collective == "allreduce") {
    op.input.assign(n, 1.0f);
    float* buf = op.input.data();
    op.run = [&comm, buf, n, f32] {
      ccl::allreduce(buf, buf, n, f32, ccl::reduction::sum, comm).wait();
    };
  } else if (c.collective == "broadcast") {
    op.input.assign(n, 1.0f);
    float* buf = op.input.data();
    op.run = [&comm, buf, n, f32] { ccl::broadcast(buf, n, f32, 0, comm).wait(); };
  } else if (c.collective == "all_gather") {
    op.input.assign(n, 1.0f);
    op.output.resize(n * world);
    const float* in = op.input.data();
    float* out = op.output.data();
    op.run = [&comm, in, out, n, f32] { ccl::allgather(in, out, n, f32, comm).wait(); };
  } else if (c.collective == "reduce_scatter") {
    op.input.assign(n, 1.0f);
    op.output.resize(n / world);
    const float* in = op.input.data();
    float* out = op.output.data();
    const size_t share = n / world;
    op.run = [&comm, in, out, share, f32] {
      ccl::reduce_scatter(in, out, share, f32, ccl::reduction::sum, comm).wait();
    };
  } else if (c.collective == "barrier") {
    op.run = [&comm] { ccl::barrier(comm).wait(); };
  } else {
    throw std::runtime_error("unknown collective " + c.collective);
  }
}

// latency_method.median_single_op_seconds (statistics.median: the mean of the middle two of
// an even count).
double medianSingleOpSeconds(const std::function<void()>& op, const std::function<void()>& barrier,
                             int count) {
  op();  // connections, caches and buffers warm
  std::vector<double> samples;
  samples.reserve(count);
  for (int i = 0; i < count; ++i) {
    barrier();
    const auto start = Clock::now();
    op();
    samples.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(samples.begin(), samples.end());
  const size_t mid = samples.size() / 2;
  return samples.size() % 2 ? samples[mid] : (samples[mid - 1] + samples[mid]) / 2;
}

int run(const Options& o) {
  ccl::init();
  auto kvs = meet(o);
  auto comm = ccl::create_communicator(o.world, o.rank, kvs);
  if (o.rank == 0) std::remove(o.kvsFile.c_str());
  const auto barrier = [&comm] { ccl::barrier(comm).wait(); };
  for (int i = 0; i < o.settle; ++i) barrier();  // latency_method.settle
  std::string json = "{";
  for (const auto& c : o.cases) {
    Op op;
    makeOp(op, c, comm);
    double seconds = medianSingleOpSeconds(op.run, barrier, c.operations);
    ccl::allreduce(&seconds, &seconds, 1, ccl::datatype::float64, ccl::reduction::max, comm).wait();
    char cell[160];
    std::snprintf(cell, sizeof(cell), "%s\"%s %lld\": %.9g", json.size() > 1 ? ", " : "",
                  c.collective.c_str(), c.bytes, seconds);
    json += cell;
  }
  if (o.rank == 0) std::printf("%s}\n", json.c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "oneccl_ranks: %s\n", e.what());
    return 1;
  }
}
