// ringx-trace: the command line for recorded traces.
//
//   ringx-trace export TRACE -o out.json   Chrome Trace Event JSON for Perfetto
//   ringx-trace export TRACE... --format csv|parquet -o DIR   the trace as tables, for data tools
//   ringx-trace summary TRACE...           collective timings, busbw, skew, engines
//   ringx-trace diff A B                   two runs aligned by step and collective
//   ringx-trace why DUMP_DIR               which collective hung, which ranks
//   ringx-trace whatif TRACE [changes]     a DDP or FSDP step replayed with one thing changed
//   ringx-trace advise TRACE               what slows the step, and the changes ranked
//
// The command line is CLI11's, as ringx-viewer's and the C++ samples' are.
// Exit status: 0 on success, 1 when the input cannot be read or the output not
// written (the message says which file and what to do), 2 for a command line
// that makes no sense (the message says what; --help lists everything).
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "analysis/advise.h"
#include "analysis/data_tables.h"
#include "analysis/diff.h"
#include "analysis/hang_report.h"
#include "analysis/profiler_whatif.h"
#include "analysis/summary.h"
#include "analysis/whatif.h"
#include "base/command_line.h"
#include "tools/ringx_trace/summary_text.h"
#include "trace/export/chrome_export.h"
#include "trace/model/loader.h"
#include "trace/read/trace_dir.h"

namespace {

constexpr const char* kDescription =
    "Reads the traces ringx records: a trace directory (one rank-<N>.ringx file per\n"
    "rank and manifest.json) or a single rank-<N>.ringx file; summary and diff also\n"
    "read Chrome Trace Event JSON (.json, .json.gz: torch.profiler's files), merged\n"
    "with ringx traces onto one clock as ringx-viewer merges them.";

constexpr const char* kFooter =
    "Times are aligned to rank 0's clock with the clock-sync samples the ranks\n"
    "recorded; files cut off by a crash are read up to the cut. Every figure is\n"
    "defined once, in analysis/figures.h (see docs/tracing.md, \"Figures\").";

// A readable file that looks like Chrome Trace Event JSON, or a folder of them (a profiler's;
// else: a ringx trace, or nothing, which readTrace reports as "no trace at").
bool isChromeTrace(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  const ringx::model::TraceFormat format = ringx::model::detectFormat(path);
  return format == (S_ISDIR(st.st_mode) ? ringx::model::TraceFormat::kChromeDirectory
                                        : ringx::model::TraceFormat::kChromeJson);
}

// One run's events in a store: ringx traces and Chrome traces alike.
void loadRun(ringx::model::TraceStore& store, const std::vector<std::string>& inputs) {
  ringx::model::loadTraces(store, inputs);
  for (const std::string& w : store.warnings()) std::cerr << "ringx-trace: warning: " << w << "\n";
}

int runExport(const std::string& input, const std::string& output) {
  using namespace ringx::trace;
  const TraceSet trace = readTrace(input);
  for (const std::string& w : trace.warnings) std::cerr << "ringx-trace: warning: " << w << "\n";
  const bool toStdout = output == "-";
  const ExportStats stats =
      toStdout ? writeChromeTrace(trace, std::cout) : writeChromeTraceFile(trace, output);
  (toStdout ? std::cerr : std::cout)
      << "ringx-trace: wrote " << stats.events << " events of " << trace.ranks.size()
      << (trace.ranks.size() == 1 ? " rank" : " ranks") << " (" << stats.flows
      << " flow arrows join collectives across ranks) to "
      << (toStdout ? "standard output" : output) << "\n";
  return 0;
}

// The trace as tables (analysis/data_tables.h) in the directory `output`: CSV or Parquet files.
int runExportTables(const std::vector<std::string>& inputs, const std::string& output, bool parquet,
                    size_t rowGroup) {
  using namespace ringx;
  model::TraceStore store;
  model::loadTraces(store, inputs);
  for (const std::string& w : store.warnings()) std::cerr << "ringx-trace: warning: " << w << "\n";
  std::error_code error;
  std::filesystem::create_directories(output, error);
  if (error) {
    std::cerr << "ringx-trace: cannot make the directory " << output << ": " << error.message()
              << "\n";
    return 1;
  }
  const std::pair<const char*, void (*)(const model::TraceStore&, analysis::TableSink&)> tables[] =
      {{"events", analysis::writeEventTable},
       {"collectives", analysis::writeCollectiveTable},
       {"counters", analysis::writeCounterTable}};
  const char* extension = parquet ? ".parquet" : ".csv";
  for (const auto& [name, write] : tables) {
    const std::string path =
        (std::filesystem::path(output) / (name + std::string(extension))).string();
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    try {
      if (file) {
        const auto sink = parquet ? analysis::parquetSink(file, rowGroup)
                                  : analysis::delimitedSink(file, Delimiter::kCsv);
        write(store, *sink);
      }
    } catch (const ringx::Error&) {
      file.setstate(std::ios::failbit);
    }
    if (!file.flush()) {
      std::cerr << "ringx-trace: cannot write " << path << "\n";
      return 1;
    }
  }
  std::cout << "ringx-trace: wrote events" << extension << ", collectives" << extension
            << " and counters" << extension << " of " << store.ranks().size()
            << (store.ranks().size() == 1 ? " rank" : " ranks") << " to " << output << "\n";
  return 0;
}

int runSummary(const std::vector<std::string>& inputs, unsigned threads,
               const ringx::analysis::SummaryFormat& format) {
  using namespace ringx;
  // One ringx trace: streamed a rank file at a time (memory grows with ranks
  // and collectives, not events), as a trace set, so ranks whose files are
  // missing count in the world size and a missing path says "no trace at".
  if (inputs.size() == 1 && !isChromeTrace(inputs[0])) {
    std::cout << analysis::formatSummary(analysis::summarizeTrace(inputs[0], threads), format);
    return 0;
  }
  // Chrome traces (alone or merged with ringx ones) load whole: their events
  // are not grouped by rank in the file, so they cannot be read a rank at a time.
  model::TraceStore store;
  model::loadTraces(store, inputs);
  std::string source;
  for (const std::string& in : inputs) source += (source.empty() ? "" : " + ") + in;
  std::cout << analysis::formatSummary(analysis::summarize(store, source), format);
  return 0;
}

int runDiff(const std::string& a, const std::string& b, size_t top) {
  using namespace ringx;
  model::TraceStore runA, runB;
  loadRun(runA, {a});
  loadRun(runB, {b});
  std::cout << analysis::formatDiff(analysis::diffRuns(runA, runB), a, b, top);
  return 0;
}

// Exit 0 with a report, 1 when no dump could be read.
int runWhy(const std::string& dir) {
  using namespace ringx::trace;
  const FlightDumpSet dumps = readFlightDumps(dir);
  if (!dumps.dumps.empty()) {
    std::cout << formatHangReport(analyzeHang(dumps));
    return 0;
  }
  // torch's own Flight Recorder (ProcessGroupNCCL's dumps, or gloo's that a job wrote: pickles
  // or JSON).
  const TorchFlightSet torchDumps = readTorchFlightDumps(dir);
  if (!torchDumps.dumps.empty()) {
    std::cout << formatHangReport(analyzeTorchHang(torchDumps));
    return 0;
  }
  for (const std::string& w : dumps.warnings) std::cerr << "ringx-trace: warning: " << w << "\n";
  for (const std::string& w : torchDumps.warnings) {
    std::cerr << "ringx-trace: warning: " << w << "\n";
  }
  std::cerr << "ringx-trace: no flight recorder dump in " << dir
            << " (ringx's ranks write flight-rank-<N>.json there when a collective fails or "
               "times out, on SIGUSR1, or from ringx.dump_flight_recorder(); torch's own, with "
               "TORCH_NCCL_TRACE_BUFFER_SIZE set, a pickle per rank named by "
               "TORCH_NCCL_DEBUG_INFO_TEMP_FILE; for gloo, what each rank wrote of "
               "torch._C._distributed_c10d._dump_fr_trace() or _dump_fr_trace_json(), the rank "
               "ending the file's name)\n";
  return 1;
}

// --link GBPS[:US_PER_STEP]: a wire of that bandwidth per link and latency per ring step.
bool parseLink(const std::string& text, ringx::replay::LinkCost* out) {
  try {
    size_t used = 0;
    const size_t colon = text.find(':');
    const double gbps = std::stod(text.substr(0, colon), &used);
    if (used != (colon == std::string::npos ? text.size() : colon) || gbps <= 0) return false;
    double stepUs = 0;
    if (colon != std::string::npos) {
      stepUs = std::stod(text.substr(colon + 1), &used);
      if (used != text.size() - colon - 1 || stepUs < 0) return false;
    }
    *out = {stepUs * 1e3, 1.0 / gbps};
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// The inputs as the report names them: "DIR", or "FILE and 7 more".
std::string inputsName(const std::vector<std::string>& inputs) {
  return inputs.size() == 1
             ? inputs.front()
             : inputs.front() + " and " + std::to_string(inputs.size() - 1) + " more";
}

int runWhatIf(const std::vector<std::string>& inputs,
              const ringx::analysis::WhatIfQuestions& questions, bool json) {
  using namespace ringx;
  model::TraceStore store;
  loadRun(store, inputs);
  const std::string input = inputsName(inputs);
  const std::string engine = analysis::whatIfEngine(store);
  if (engine == "profiler") {
    const analysis::ProfilerWhatIfReport report = analysis::profilerWhatIf(store, questions);
    std::cout << (json ? analysis::profilerWhatIfJson(report)
                       : analysis::formatProfilerWhatIf(report, input));
    return 0;
  }
  const bool asksDdp = !questions.bucketCapMb.empty() || !questions.firstBucketMb.empty() ||
                       questions.gradientAsBucketView;
  const bool asksFsdp = !questions.shardingStrategies.empty() ||
                        !questions.backwardPrefetch.empty() || questions.forwardPrefetch ||
                        questions.limitAllGathers || !questions.mergeUnits.empty();
  if (engine == "fsdp") {
    if (asksDdp) {
      throw std::invalid_argument(
          "this trace is of a ringx.fsdp job: bucket caps and gradient_as_bucket_view are DDP's; "
          "ask --sharding-strategy, --backward-prefetch, --forward-prefetch, "
          "--limit-all-gathers or --merge-units");
    }
    const analysis::FsdpWhatIfReport report = analysis::fsdpWhatIf(store, questions);
    std::cout << (json ? analysis::fsdpWhatIfJson(report)
                       : analysis::formatFsdpWhatIf(report, input));
    return 0;
  }
  if (asksFsdp) {
    throw std::invalid_argument(
        "this trace is not of a ringx.fsdp job: the sharding, prefetch, limiter and unit "
        "questions are FSDP's");
  }
  const analysis::WhatIfReport report = analysis::whatIf(store, questions);
  std::cout << (json ? analysis::whatIfJson(report) : analysis::formatWhatIf(report, input));
  return 0;
}

int runAdvise(const std::vector<std::string>& inputs, bool json) {
  using namespace ringx;
  model::TraceStore store;
  loadRun(store, inputs);
  const std::string input = inputsName(inputs);
  const analysis::Advice advice = analysis::advise(store, analysis::summarize(store, input));
  std::cout << (json ? analysis::adviceJson(advice) : analysis::formatAdvice(advice, input));
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
  CLI::App app{kDescription, "ringx-trace"};
  ringx::cli::useConventions(app);
  app.footer(kFooter);
  app.require_subcommand(1);

  std::vector<std::string> exportInputs;
  std::string exportOutput, exportFormat = "chrome";
  size_t exportRowGroup = 65536;
  CLI::App* exportCommand = app.add_subcommand(
      "export", "Chrome Trace Event JSON for Perfetto or chrome://tracing; or tables (CSV)");
  exportCommand->footer(
      "chrome: one process per rank, one thread per track; each collective's spans are\n"
      "joined across ranks by flow arrows. csv or parquet: OUT is a directory, given\n"
      "events (a row per span or instant, its arguments as columns), collectives (the\n"
      "collectives matched across ranks, a row per rank's part) and counters, .csv or\n"
      ".parquet, times aligned to rank 0's clock in ns; these traces may be several files\n"
      "(profiler traces beside a ringx trace), merged as summary merges them. Python's\n"
      "ringx.trace.load reads them as pandas DataFrames.");
  exportCommand
      ->add_option("TRACE", exportInputs,
                   "a trace directory or rank-<N>.ringx file (csv: or several, and Chrome "
                   "or profiler JSON)")
      ->required();
  exportCommand
      ->add_option("-o,--output", exportOutput,
                   "OUT.json (- writes to standard output); csv: a directory")
      ->required();
  exportCommand->add_option("--format", exportFormat, "chrome (the default), csv or parquet")
      ->check(CLI::IsMember({"chrome", "csv", "parquet"}));
  exportCommand
      ->add_option("--row-group", exportRowGroup,
                   "parquet: rows per row group (readers read one "
                   "at a time)")
      ->check(CLI::PositiveNumber);

  std::vector<std::string> summaryInputs;
  CLI::App* summaryCommand =
      app.add_subcommand("summary", "collective timings, busbw, skew, the engines' figures");
  summaryCommand->footer(
      "Per collective and size class: calls, total, mean, p50/p99 and busbw; each rank's\n"
      "time in communication; how far apart ranks arrive at the same collective; the DDP\n"
      "and FSDP engines' iterations, buckets and units; the hosts and ranks that arrive\n"
      "late. A trace directory is read a rank file at a time, so 1,000 ranks need no more\n"
      "memory than a few. Several inputs (a trace directory and the profiler's files of\n"
      "the same job) are merged onto one clock, in memory.");
  summaryCommand
      ->add_option("TRACE", summaryInputs,
                   "trace directories, .ringx files and Chrome traces of one job")
      ->required();
  ringx::analysis::SummaryFormat summaryFormat;
  summaryCommand->add_flag("--ranks", summaryFormat.allRanks,
                           "print the per-rank table in full (by default only up to 64 ranks; "
                           "beyond, hosts and the latest ranks stand for it)");
  // Each thread holds one rank's events while it reduces them: memory is
  // threads x the largest rank file's events, plus what the summary keeps.
  unsigned summaryThreads = std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
  summaryCommand
      ->add_option("-j,--threads", summaryThreads,
                   "rank files read at once (each thread holds one rank's events)")
      ->check(CLI::Range(1u, 256u))
      ->capture_default_str();

  std::string diffA, diffB;
  size_t diffTop = 15;
  CLI::App* diffCommand = app.add_subcommand(
      "diff", "two runs side by side, the regressions furthest above their noise first");
  diffCommand->footer(
      "Collectives are matched by (group, seq), iterations by step, DDP buckets by index\n"
      "and FSDP units by module path; the step-time breakdown is printed side by side.");
  diffCommand->add_option("A", diffA, "the baseline run (a trace directory or file)")->required();
  diffCommand->add_option("B", diffB, "the run to compare with it")->required();
  diffCommand->add_option("--top", diffTop, "rows of regressions and of improvements to print")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();

  std::string dumpDir;
  CLI::App* whyCommand =
      app.add_subcommand("why", "which collective hung, and which ranks never arrived");
  whyCommand->footer(
      "Reads the flight recorder dumps the ranks wrote (flight-rank-<N>.json in\n"
      "RINGX_DUMP_DIR) and names the first collective that did not finish on every rank\n"
      "and the ranks that never arrived, are stuck or failed in it. Tracing need not be on.\n"
      "torch's own Flight Recorder dumps (ProcessGroupNCCL's, TORCH_NCCL_TRACE_BUFFER_SIZE;\n"
      "gloo's, written from the job's code with torch._C._distributed_c10d._dump_fr_trace();\n"
      "a pickle or JSON file per rank) are read too: per process group, the collective some\n"
      "rank never enqueued and the ranks that did not reach it or called something else.\n"
      "Where the dumps list no group's members (gloo's), the default group is every rank and\n"
      "another group the ranks whose dumps name it. Pickles are read as plain data; one that\n"
      "asks for a class is refused.");
  whyCommand->add_option("DUMP_DIR", dumpDir, "the dump directory")->required();

  std::vector<std::string> whatIfInputs;
  std::string whatIfView, whatIfForwardPrefetch, whatIfLimiter;
  std::vector<std::string> whatIfLinks;
  ringx::analysis::WhatIfQuestions whatIfQuestions;
  bool whatIfJsonOut = false, whatIfNoBounds = false;
  CLI::App* whatIfCommand = app.add_subcommand(
      "whatif",
      "a DDP or FSDP step replayed with one thing changed: bucket caps; sharding, prefetch, "
      "limiter, unit boundaries; the wire, world size");
  whatIfCommand->footer(
      "Builds the replay model of a ringx.ddp step from the trace (per-parameter gradient\n"
      "readiness, each rank's compute, the wire's cost fitted from the buckets' allreduce)\n"
      "and replays it unchanged, then once per change. Without changes it asks bucket caps\n"
      "from a quarter to four times the recorded one and torch's 25 MB, the other\n"
      "gradient_as_bucket_view, and the two bounds: communication free, compute free.\n"
      "Predictions scale the recorded step by the replay's ratio; the replay's error on the\n"
      "recorded step is printed. bench/whatif.py checks predictions against real runs.\n"
      "A ringx.fsdp trace is replayed with the engine's schedule (gathers, prefetches, frees,\n"
      "reductions, the rate limiter) over each rank's compute between the units' hooks;\n"
      "without changes it asks the other sharding strategies and backward prefetch modes,\n"
      "forward_prefetch and limit_all_gathers flipped, units merged in twos, and the bounds.\n"
      "torch.profiler traces of a GPU job (every rank's .json or .json.gz, or their folder)\n"
      "are replayed as each rank's host, streams and collectives (docs/tracing.md): the\n"
      "wire (--link), the world size and the bounds.");
  whatIfCommand
      ->add_option("TRACE", whatIfInputs,
                   "a trace directory of a ringx.ddp or ringx.fsdp job, or a job's profiler "
                   "traces (files or their folder)")
      ->required();
  whatIfCommand
      ->add_option("--bucket-cap-mb", whatIfQuestions.bucketCapMb, "bucket caps, MB: 4,8,16")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  whatIfCommand
      ->add_option("--first-bucket-mb", whatIfQuestions.firstBucketMb, "first-bucket caps, MB")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  whatIfCommand->add_option("--gradient-as-bucket-view", whatIfView, "on or off")
      ->check(CLI::IsMember({"on", "off"}));
  whatIfCommand
      ->add_option("--world-size", whatIfQuestions.worldSizes,
                   "world sizes: the ring's cost at that many ranks, compute unchanged")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  whatIfCommand->add_option("--link", whatIfLinks,
                            "a wire as GBPS[:US_PER_STEP] (bandwidth per link, latency per ring "
                            "step); repeatable");
  whatIfCommand
      ->add_option("--sharding-strategy", whatIfQuestions.shardingStrategies,
                   "FSDP: FULL_SHARD,SHARD_GRAD_OP,NO_SHARD")
      ->delimiter(',')
      ->check(CLI::IsMember({"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"}));
  whatIfCommand
      ->add_option("--backward-prefetch", whatIfQuestions.backwardPrefetch,
                   "FSDP: BACKWARD_PRE,BACKWARD_POST,NONE")
      ->delimiter(',')
      ->check(CLI::IsMember({"BACKWARD_PRE", "BACKWARD_POST", "NONE"}));
  whatIfCommand->add_option("--forward-prefetch", whatIfForwardPrefetch, "FSDP: on or off")
      ->check(CLI::IsMember({"on", "off"}));
  whatIfCommand->add_option("--limit-all-gathers", whatIfLimiter, "FSDP: on or off")
      ->check(CLI::IsMember({"on", "off"}));
  whatIfCommand
      ->add_option("--merge-units", whatIfQuestions.mergeUnits,
                   "FSDP unit boundaries: every K consecutive sibling units as one: 2,4")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  whatIfCommand
      ->add_option("--host-cores", whatIfQuestions.hostCores,
                   "profiler traces of a CPU job: the cores of each host, which the profiler "
                   "does not record (how the ranks on a host share them; a CPU quota's "
                   "fraction of a core counts: 0.5)")
      ->check(CLI::Range(0.01, 1048576.0));
  whatIfCommand->add_flag("--no-bounds", whatIfNoBounds,
                          "leave out the communication-free and compute-free rows");
  whatIfCommand->add_flag("--json", whatIfJsonOut, "the report as JSON (ringx.analysis.whatif)");

  std::vector<std::string> adviseInputs;
  bool adviseJsonOut = false;
  CLI::App* adviseCommand = app.add_subcommand(
      "advise", "why the step is slow and what to change: findings with evidence, changes ranked");
  adviseCommand->footer(
      "Findings the trace proves, each with its evidence and the change to make: a rank that\n"
      "arrives last at most collectives, communication nothing hides, an FSDP unit whose\n"
      "gather is never prefetched, DDP buckets that launch late. Then every change the job's\n"
      "engine allows (whatif's, with more bucket caps and merged units), fastest predicted\n"
      "first, each with the replayed steps' spread (p25-p75); a prediction inside the\n"
      "recorded steps' own spread is marked \"within noise\". On a GPU job's profiler traces:\n"
      "exposed communication and a step the host's launches set, from the replay, and the\n"
      "wire twice as fast and the bounds as what is at stake.");
  adviseCommand
      ->add_option("TRACE", adviseInputs,
                   "a trace directory, or a job's profiler traces (files or their folder)")
      ->required();
  adviseCommand->add_flag("--json", adviseJsonOut, "the advice as JSON (ringx.analysis.advise)");

  // An unknown first word would otherwise read as "A subcommand is required".
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    for (const CLI::App* command : app.get_subcommands({})) known |= command->get_name() == argv[1];
    if (!known) {
      std::cerr << "ringx-trace: unknown command '" << argv[1]
                << "' (commands: export, summary, diff, why, whatif, advise)\nrun 'ringx-trace "
                   "--help' for the "
                   "options\n";
      return 2;
    }
  }
  if (const int status = ringx::cli::parse(app, argc, argv); status >= 0) return status;
  try {
    if (*exportCommand) {
      if (exportFormat != "chrome") {
        return runExportTables(exportInputs, exportOutput, exportFormat == "parquet",
                               exportRowGroup);
      }
      if (exportInputs.size() != 1) {
        std::cerr << "ringx-trace: export --format chrome takes one trace (" << exportInputs.size()
                  << " given); --format csv merges several\n";
        return 2;
      }
      return runExport(exportInputs.front(), exportOutput);
    }
    if (*summaryCommand) return runSummary(summaryInputs, summaryThreads, summaryFormat);
    if (*diffCommand) return runDiff(diffA, diffB, diffTop);
    if (*adviseCommand) return runAdvise(adviseInputs, adviseJsonOut);
    if (*whatIfCommand) {
      if (!whatIfView.empty()) whatIfQuestions.gradientAsBucketView = whatIfView == "on";
      if (!whatIfForwardPrefetch.empty()) {
        whatIfQuestions.forwardPrefetch = whatIfForwardPrefetch == "on";
      }
      if (!whatIfLimiter.empty()) whatIfQuestions.limitAllGathers = whatIfLimiter == "on";
      for (const std::string& text : whatIfLinks) {
        ringx::replay::LinkCost link;
        if (!parseLink(text, &link)) {
          std::cerr << "ringx-trace: --link " << text
                    << " is not GBPS[:US_PER_STEP] (for example 1.8:25: 1.8 GB/s per link, 25 "
                       "us per ring step)\n";
          return 2;
        }
        whatIfQuestions.links.push_back(link);
      }
      whatIfQuestions.bounds = !whatIfNoBounds;
      return runWhatIf(whatIfInputs, whatIfQuestions, whatIfJsonOut);
    }
    return runWhy(dumpDir);
  } catch (const std::invalid_argument& e) {  // a question that does not fit the trace
    std::cerr << "ringx-trace: " << withoutSourceLocation(e.what()) << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "ringx-trace: " << withoutSourceLocation(e.what()) << "\n";
    return 1;
  }
}
