// The oneCCL side of bench/vs_libraries.py: one rank of a oneCCL job (Intel's oneCCL from
// PyPI, set up by scripts/oneccl_setup.sh, which also compiles this file; no torch, no MPI
// headers). Times the cases it is given with bench/latency_method.py's method (its C++ port:
// bench/latency_method.h). float32 buffers of element_count() elements, in place where
// torch's call is. Rank 0 prints
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

#include "latency_method.h"
#include "oneapi/ccl.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string kvsFile;
  std::vector<latency_method::Case> cases;
  int settle = 5000;
  int rank = -1;
  int world = -1;
};

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
      o.cases = latency_method::parseCases(value);
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

void makeOp(latency_method::Op& op, const latency_method::Case& c, const ccl::communicator& comm) {
  const int world = comm.size();
  latency_method::makeBuffers(op, c, world);
  const size_t n = op.input.size();
  const auto f32 = ccl::datatype::float32;
  if (c.collective == "allreduce") {
    float* buf = op.input.data();
    op.run = [&comm, buf, n, f32] {
      ccl::allreduce(buf, buf, n, f32, ccl::reduction::sum, comm).wait();
    };
  } else if (c.collective == "broadcast") {
    float* buf = op.input.data();
    op.run = [&comm, buf, n, f32] { ccl::broadcast(buf, n, f32, 0, comm).wait(); };
  } else if (c.collective == "all_gather") {
    const float* in = op.input.data();
    float* out = op.output.data();
    op.run = [&comm, in, out, n, f32] { ccl::allgather(in, out, n, f32, comm).wait(); };
  } else if (c.collective == "reduce_scatter") {
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

int run(const Options& o) {
  ccl::init();
  auto kvs = meet(o);
  auto comm = ccl::create_communicator(o.world, o.rank, kvs);
  if (o.rank == 0) std::remove(o.kvsFile.c_str());
  const auto barrier = [&comm] { ccl::barrier(comm).wait(); };
  const std::string json = latency_method::timeCases(
      o.cases, o.settle, barrier,
      [&comm](latency_method::Op& op, const latency_method::Case& c) { makeOp(op, c, comm); },
      [&comm](double seconds) {
        ccl::allreduce(&seconds, &seconds, 1, ccl::datatype::float64, ccl::reduction::max, comm)
            .wait();
        return seconds;
      });
  if (o.rank == 0) std::printf("%s\n", json.c_str());
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
