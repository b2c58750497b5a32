// Command-line parsing for ringx-viewer (see options.h).
#include "viewer/app/options.h"

#include <cstdlib>
#include <string_view>

#include "backend/common/error.h"
#include "viewer/ui/view_state.h"

namespace ringx::viewer {
namespace {

int parseInt(std::string_view option, const std::string& text, int min) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < min || v > 1000000)
    throw InvalidArgument(strCat(option, " expects a whole number >= ", min, ", got '", text, "'"));
  return int(v);
}

double parseDouble(std::string_view option, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || v < 0)
    throw InvalidArgument(strCat(option, " expects a number >= 0, got '", text, "'"));
  return v;
}

}  // namespace

std::string usage() {
  return "usage: ringx-viewer [TRACE_DIR_OR_FILE...] [--attach HOST:PORT] [--token TOKEN]\n"
         "                    [--size WxH] [--frames N] [--seconds S] [--screenshot out.png]\n"
         "                    [--panel stats|collectives|ddp|fsdp|memory|live] [--print-stats]\n"
         "                    [--zoom BEGIN_MS:END_MS] [--save DIR]\n"
         "Opens ringx trace directories, .ringx files and Chrome Trace Event JSON files\n"
         "(.json or .json.gz: PyTorch profiler traces, anything Perfetto opens), or\n"
         "attaches to a running job (rank 0's RINGX_TRACE_LISTEN address; the token comes\n"
         "from --token or RINGX_TRACE_TOKEN). With --screenshot it renders N frames (or S\n"
         "seconds) into the PNG and exits; --print-stats prints\n"
         "  ranks=<n> events=<n> load_ms=<ms> fps=<frames per second>\n"
         "  span_ms=<first event to last> flows=<arrows>\n"
         "--zoom shows BEGIN_MS..END_MS from the trace's start; --save DIR writes what a live\n"
         "job sent (a trace directory) when the viewer exits.\n";
}

AppOptions parseOptions(int argc, const char* const* argv) {
  AppOptions o;
  if (const char* token = std::getenv("RINGX_TRACE_TOKEN")) o.token = token;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw InvalidArgument(strCat(arg, " needs a value\n", usage()));
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      o.help = true;
    } else if (arg == "--attach") {
      o.attach = value();
    } else if (arg == "--token") {
      o.token = value();
    } else if (arg == "--size") {
      const std::string v = value();
      const size_t x = v.find('x');
      if (x == std::string::npos)
        throw InvalidArgument(
            strCat("--size expects WIDTHxHEIGHT such as 1600x900, got '", v, "'"));
      o.width = parseInt("--size", v.substr(0, x), 64);
      o.height = parseInt("--size", v.substr(x + 1), 64);
    } else if (arg == "--frames") {
      o.frames = parseInt(arg, value(), 1);
    } else if (arg == "--seconds") {
      o.seconds = parseDouble(arg, value());
    } else if (arg == "--screenshot") {
      o.screenshot = value();
    } else if (arg == "--panel") {
      o.panel = value();
      PanelId id;
      if (!parsePanelName(o.panel, &id))
        throw InvalidArgument(
            strCat("--panel expects one of stats, collectives, ddp, fsdp, memory, "
                   "live; got '",
                   o.panel, "'"));
    } else if (arg == "--save") {
      o.saveDir = value();
    } else if (arg == "--print-stats") {
      o.printStats = true;
    } else if (arg == "--zoom") {
      const std::string v = value();
      const size_t colon = v.find(':');
      if (colon == std::string::npos)
        throw InvalidArgument(strCat("--zoom expects BEGIN_MS:END_MS, got '", v, "'"));
      o.zoomBeginMs = parseDouble("--zoom", v.substr(0, colon));
      o.zoomEndMs = parseDouble("--zoom", v.substr(colon + 1));
      if (o.zoomEndMs <= o.zoomBeginMs)
        throw InvalidArgument(strCat("--zoom: END_MS must be after BEGIN_MS, got '", v, "'"));
    } else if (!arg.empty() && arg[0] == '-') {
      throw InvalidArgument(strCat("unknown option '", arg, "'\n", usage()));
    } else {
      o.inputs.push_back(arg);
    }
  }
  if (!o.saveDir.empty() && o.attach.empty())
    throw InvalidArgument("--save DIR saves what a live job sent: it needs --attach HOST:PORT");
  if (!o.inputs.empty() && !o.attach.empty())
    throw InvalidArgument("give trace files or --attach, not both");
  return o;
}

}  // namespace ringx::viewer
