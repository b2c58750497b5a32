// Command-line parsing for ringx-viewer (see options.h), with CLI11 and the
// conventions every ringx program follows (base/command_line.h).
#include "viewer/app/options.h"

#include <cstdlib>
#include <iostream>

#include "base/command_line.h"
#include "base/format.h"
#include "viewer/ui/view_state.h"

namespace ringx::viewer {
namespace {

constexpr const char* kDescription =
    "ringx-viewer: every rank's streams on one aligned timeline.\n"
    "Opens ringx trace directories, .ringx files and Chrome Trace Event JSON files\n"
    "(.json or .json.gz: PyTorch profiler traces, anything Perfetto opens), merged onto\n"
    "one clock, or attaches to a running job (rank 0's RINGX_TRACE_LISTEN address).";

constexpr const char* kFooter =
    "Scripted runs (tests, screenshots, benchmarks): --frames, --seconds or --screenshot\n"
    "render and exit; --print-stats prints\n"
    "  ranks=<n> events=<n> load_ms=<ms> fps=<frames per second>\n"
    "  span_ms=<first event to last> flows=<arrows>\n"
    "(and search_matches=<n> current=<k> with --search; with --diff, a line per run\n"
    "and diff_rows=<n> selected=<k> what=\"<row>\" delta_ns=<B - A>).";

// "1600x900" -> width, height (each at least 64).
std::string parseSize(const std::string& text, AppOptions& o) {
  const size_t x = text.find('x');
  char* end = nullptr;
  if (x == std::string::npos) return "expects WIDTHxHEIGHT such as 1600x900, got '" + text + "'";
  const long w = std::strtol(text.substr(0, x).c_str(), &end, 10);
  const bool wOk = *end == '\0' && x > 0;
  const long h = std::strtol(text.substr(x + 1).c_str(), &end, 10);
  if (!wOk || *end != '\0' || x + 1 == text.size() || w < 64 || h < 64 || w > 16384 || h > 16384)
    return "expects WIDTHxHEIGHT, each 64 to 16384, got '" + text + "'";
  o.width = static_cast<int>(w);
  o.height = static_cast<int>(h);
  return "";
}

// "BEGIN_MS:END_MS" with END after BEGIN, both >= 0.
std::string parseZoom(const std::string& text, AppOptions& o) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos) return "expects BEGIN_MS:END_MS, got '" + text + "'";
  char* endBegin = nullptr;
  char* endEnd = nullptr;
  const std::string begin = text.substr(0, colon), end = text.substr(colon + 1);
  const double b = std::strtod(begin.c_str(), &endBegin);
  const double e = std::strtod(end.c_str(), &endEnd);
  if (begin.empty() || end.empty() || *endBegin != '\0' || *endEnd != '\0' || b < 0)
    return "expects BEGIN_MS:END_MS, two numbers >= 0, got '" + text + "'";
  if (e <= b) return "END_MS must be after BEGIN_MS, got '" + text + "'";
  o.zoomBeginMs = b;
  o.zoomEndMs = e;
  return "";
}

// "FIRST:LAST", two step numbers >= 0, LAST >= FIRST.
std::string parseZoomSteps(const std::string& text, AppOptions& o) {
  const size_t colon = text.find(':');
  const std::string first = text.substr(0, colon),
                    last = colon == std::string::npos ? first : text.substr(colon + 1);
  char* endFirst = nullptr;
  char* endLast = nullptr;
  const long long a = std::strtoll(first.c_str(), &endFirst, 10);
  const long long b = std::strtoll(last.c_str(), &endLast, 10);
  if (first.empty() || last.empty() || *endFirst != '\0' || *endLast != '\0' || a < 0 || b < a)
    return "expects FIRST:LAST, step numbers with LAST >= FIRST >= 0 (or one step), got '" + text +
           "'";
  o.zoomFirstStep = a;
  o.zoomLastStep = b;
  return "";
}

}  // namespace

int parseOptions(int argc, const char* const* argv, AppOptions* out) {
  AppOptions& o = *out;
  CLI::App app{kDescription, "ringx-viewer"};
  cli::useConventions(app);
  app.footer(kFooter);

  CLI::Option* inputs = app.add_option("TRACE", o.inputs,
                                       "trace directories, .ringx files, Chrome .json/.json.gz "
                                       "files (a trace directory with profiler files: one view)");
  CLI::Option* attach =
      app.add_option("--attach", o.attach, "attach to a running job: rank 0's live trace server")
          ->type_name("HOST:PORT")
          ->excludes(inputs);
  app.add_option("--token", o.token, "the live server's token")->envname("RINGX_TRACE_TOKEN");
  CLI::Option* ranks =
      app.add_option_function<std::string>(
             "--ranks",
             [&o](const std::string& text) {
               std::string error;
               if (!ringx::parseRankList(text, &o.attachRanks, &error))
                 throw CLI::ValidationError("--ranks", error);
             },
             "with --attach: follow only these ranks (each rank serves its own stream; a "
             "1,000-rank job is watched a few ranks at a time)")
          ->type_name("0-7,9,...")
          ->needs(attach);
  app.add_flag("--summary-others", o.summaryOthers,
               "with --ranks: also follow every other rank's collectives and steps (its "
               "server's summary stream, about a tenth of the bytes), so that the aggregate "
               "lanes show the whole job's comm busy share and stragglers")
      ->needs(ranks);
  app.add_option("--save", o.saveDir,
                 "with --attach: write what the job sent (a trace directory) at exit")
      ->type_name("DIR")
      ->needs(attach);
  app.add_option("--panel", o.panel, "the panel to show first")
      ->type_name("stats|collectives|ddp|fsdp|whatif|memory|live")
      ->check(CLI::Validator(
          [](std::string& name) {
            PanelId id;
            return parsePanelName(name, &id) ? std::string()
                                             : "expects one of stats, collectives, ddp, fsdp, "
                                               "whatif, memory, live; got '" +
                                                   name + "'";
          },
          "", "panel name"));
  app.add_option_function<std::string>(
         "--zoom",
         [&o](const std::string& text) {
           const std::string error = parseZoom(text, o);
           if (!error.empty()) throw CLI::ValidationError("--zoom", error);
         },
         "show BEGIN_MS..END_MS from the trace's start")
      ->type_name("BEGIN_MS:END_MS");
  app.add_option_function<std::string>(
         "--zoom-steps",
         [&o](const std::string& text) {
           const std::string error = parseZoomSteps(text, o);
           if (!error.empty()) throw CLI::ValidationError("--zoom-steps", error);
         },
         "show training steps FIRST..LAST: their engine phases, mark_step events and the "
         "profiler's ProfilerStep#N")
      ->type_name("FIRST:LAST");
  app.add_option("--zoom-event", o.zoomEvent, "show the first event named NAME")->type_name("NAME");
  app.add_option_function<std::string>(
         "--area",
         [&o](const std::string& text) {
           std::string error;
           if (!ringx::parseRankList(text, &o.areaRanks, &error))
             throw CLI::ValidationError("--area", error);
         },
         "select every track of these ranks over the view (--zoom, --zoom-steps, --zoom-event; "
         "else all of the trace) and show the area's statistics")
      ->type_name("0-7,9,...");
  CLI::Option* diff =
      app.add_option("--diff", o.diff,
                     "two runs side by side, aligned by step and collective (group, seq), the "
                     "largest regressions from A to B ranked first; a click on a row shows both "
                     "runs there")
          ->type_name("A B")
          ->expected(2)
          ->excludes(inputs)
          ->excludes(attach);
  app.add_option("--diff-row", o.diffRow, "with --diff: select the K-th ranked row and show it")
      ->type_name("K")
      ->check(CLI::PositiveNumber)
      ->needs(diff);
  app.add_option("--search", o.search,
                 "find events by name or argument value (\"allreduce\", \"seq=17\") and go to "
                 "the first match")
      ->type_name("TEXT");
  app.add_option("--expand", o.expand,
                 "above 32 ranks, show this aggregate lane (a host, or \"ranks 0-7\") expanded "
                 "into its ranks; repeatable")
      ->type_name("LANE");
  app.add_option("--index-above", o.indexAboveMb,
                 "open a ringx trace of more than 32 ranks as an index (aggregate lanes; a "
                 "lane's ranks load when it is expanded) when its files hold more than MB "
                 "megabytes (default 1000; 0: always)")
      ->type_name("MB")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--follow-seconds", o.followSeconds,
                 "while attached, follow the newest S seconds (default 5; End turns following "
                 "back on)")
      ->type_name("S")
      ->check(CLI::PositiveNumber);
  app.add_option_function<std::string>(
         "--size",
         [&o](const std::string& text) {
           const std::string error = parseSize(text, o);
           if (!error.empty()) throw CLI::ValidationError("--size", error);
         },
         "window size")
      ->type_name("WxH");
  app.add_option("--frames", o.frames, "render N frames, then exit")
      ->type_name("N")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--seconds", o.seconds,
                 "render for S seconds (attached: let data arrive), then exit")
      ->type_name("S")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--screenshot", o.screenshot, "write the last frame to this PNG and exit")
      ->type_name("PNG");
  app.add_flag("--print-stats", o.printStats, "print load time, frame rate and counts at exit");
  return cli::parse(app, argc, argv);
}

}  // namespace ringx::viewer
