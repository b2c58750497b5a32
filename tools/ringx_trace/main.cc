// ringx-trace: the command line for recorded traces.
//
//   ringx-trace export DIR_OR_FILE -o out.json   Chrome Trace Event JSON for Perfetto
//   ringx-trace summary DIR_OR_FILE              collective timings, busbw, skew
//
// Exit status: 0 on success, 1 when the input cannot be read or the output not
// written (the message says which file and what to do), 2 for a command line
// that makes no sense (the usage follows).
#include <iostream>
#include <string>
#include <vector>

#include "backend/trace/chrome_export.h"
#include "backend/trace/summary.h"
#include "backend/trace/trace_dir.h"

namespace {

constexpr const char* kUsage =
    R"(usage: ringx-trace <command> [arguments]

Reads the traces ringx records: a trace directory (one rank-<N>.ringx file per
rank and manifest.json) or a single rank-<N>.ringx file.

commands:
  export TRACE -o OUT.json   write Chrome Trace Event JSON, to open in
                             https://ui.perfetto.dev or chrome://tracing
                             (-o - writes to standard output)
  summary TRACE              print collective timings and bus bandwidth per
                             size, each rank's communication time, and how far
                             apart ranks arrive at the same collective

options:
  -h, --help                 print this help and exit

Times are aligned to rank 0's clock with the clock-sync samples the ranks
recorded; files cut off by a crash are read up to the cut.
)";

// A command line that makes no sense: the message, then the usage, exit 2.
struct UsageError {
  std::string message;
};

struct Options {
  std::string command;
  std::string input;
  std::string output;
};

Options parse(const std::vector<std::string>& args) {
  Options o;
  if (args.empty()) throw UsageError{"no command given"};
  o.command = args[0];
  if (o.command != "export" && o.command != "summary") {
    throw UsageError{"unknown command '" + o.command + "'"};
  }
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (o.command == "export" && (a == "-o" || a == "--output")) {
      if (i + 1 == args.size()) throw UsageError{a + " needs a file name"};
      o.output = args[++i];
    } else if (o.command == "export" && a.rfind("--output=", 0) == 0) {
      o.output = a.substr(9);
    } else if (o.command == "export" && a.size() > 2 && a.rfind("-o", 0) == 0) {
      o.output = a.substr(2);
    } else if (a.size() > 1 && a[0] == '-') {
      throw UsageError{"unknown option '" + a + "' for " + o.command};
    } else if (o.input.empty()) {
      o.input = a;
    } else {
      throw UsageError{"more than one trace given ('" + o.input + "' and '" + a + "')"};
    }
  }
  if (o.input.empty()) throw UsageError{o.command + " needs a trace directory or file"};
  if (o.command == "export" && o.output.empty()) {
    throw UsageError{"export needs an output file: -o OUT.json"};
  }
  return o;
}

int runExport(const Options& o) {
  using namespace ringx::trace;
  const TraceSet trace = readTrace(o.input);
  for (const std::string& w : trace.warnings) std::cerr << "ringx-trace: warning: " << w << "\n";
  const bool toStdout = o.output == "-";
  const ExportStats stats =
      toStdout ? writeChromeTrace(trace, std::cout) : writeChromeTraceFile(trace, o.output);
  (toStdout ? std::cerr : std::cout)
      << "ringx-trace: wrote " << stats.events << " events of " << trace.ranks.size()
      << (trace.ranks.size() == 1 ? " rank" : " ranks") << " to "
      << (toStdout ? "standard output" : o.output) << "\n";
  return 0;
}

int runSummary(const Options& o) {
  using namespace ringx::trace;
  const TraceSet trace = readTrace(o.input);
  std::cout << formatSummary(summarize(trace));
  return 0;
}

// ringx errors end in " [file.cc:line]" for bug reports; a command-line user
// wants the message alone.
std::string withoutSourceLocation(std::string message) {
  const size_t open = message.rfind(" [");
  if (open != std::string::npos && message.back() == ']' &&
      message.find(':', open) != std::string::npos) {
    message.erase(open);
  }
  return message;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  for (const std::string& a : args) {
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    }
  }
  try {
    const Options o = parse(args);
    return o.command == "export" ? runExport(o) : runSummary(o);
  } catch (const UsageError& e) {
    std::cerr << "ringx-trace: " << e.message << "\n\n" << kUsage;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "ringx-trace: " << withoutSourceLocation(e.what()) << "\n";
    return 1;
  }
}
