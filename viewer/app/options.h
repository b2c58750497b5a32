// ringx-viewer's command line (`ringx-viewer --help` lists every option):
//   ringx-viewer [TRACE_DIR_OR_FILE...] [--attach HOST:PORT [--ranks 0-7 [--summary-others]]]
//                [--token T] [--size WxH]
//                [--frames N] [--seconds S] [--screenshot out.png] [--panel NAME]
//                [--print-stats] [--save DIR] [--zoom BEGIN_MS:END_MS | --zoom-steps A:B |
//                --zoom-event NAME] [--area RANKS] [--search TEXT]
//                [--follow-seconds S]
//   ringx-viewer --diff A B [--diff-row K] [...]
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ringx::viewer {

struct AppOptions {
  std::vector<std::string> inputs;   // trace directories, .ringx files, Chrome .json files
  std::string attach;                // HOST:PORT of rank 0's live trace server
  std::vector<int32_t> attachRanks;  // --ranks: the ranks to follow (empty: all)
  // --summary-others: also follow every other rank's collectives and steps (the
  // servers' SUMMARY streams), for the aggregate lanes of a big job.
  bool summaryOthers = false;
  std::string token;    // --token, else RINGX_TRACE_TOKEN
  std::string saveDir;  // --save: when attached, write what arrived there at exit
  int width = 1600;
  int height = 900;
  int frames = -1;      // render this many frames, then exit (screenshot if asked)
  double seconds = -1;  // ... or this long (attached: let data arrive)
  std::string screenshot;
  std::string panel;  // stats, collectives, ddp, fsdp, whatif, memory, live
  bool printStats = false;
  // Zoom the timeline to [zoomBegin, zoomEnd] ns from the trace's start (for
  // screenshots and the benchmark's zoomed-in figure); negative: all of it.
  double zoomBeginMs = -1;
  double zoomEndMs = -1;
  // Or zoom to what the trace holds: steps FIRST..LAST (event_search.h's stepsExtent), or the
  // first event named zoomEvent; -1 / "": not asked.
  int64_t zoomFirstStep = -1, zoomLastStep = -1;
  std::string zoomEvent;
  // --area: every track of these ranks over the zoomed view (all of the trace when not zoomed),
  // selected as a Shift+drag would, with the Statistics panel showing the area.
  std::vector<int32_t> areaRanks;
  // Put TEXT in the search box and go to its first match (after --zoom).
  std::string search;
  // Follow mode's window while attached (seconds); <= 0: the default.
  double followSeconds = -1;
  // --diff A B: two runs (each a trace directory or file) side by side, ranked
  // by what got slower from A to B. diffRow K > 0 selects the K-th ranked row
  // and shows both runs there (for screenshots and tests).
  std::vector<std::string> diff;
  int diffRow = 0;
  // Not on the command line (tests): load on this many threads (0: a core
  // each), and hold the load before its file number holdLoadAtFile (-1: never)
  // until App::loading()->release().
  unsigned loadThreads = 0;
  int holdLoadAtFile = -1;
  // --index-above MB: a ringx trace of more than 32 ranks whose files hold more
  // than this opens as an index (loader.h); negative: the default (1 GB).
  double indexAboveMb = -1;
  // --expand LABEL: aggregate lanes shown expanded into their ranks (a host).
  std::vector<std::string> expand;

  // Runs without a person: exits after the frames/seconds (or at once for
  // --print-stats alone), no vsync.
  bool scripted() const { return frames >= 0 || seconds >= 0 || !screenshot.empty() || printStats; }
};

// Parses argv into *options: -1 to go on, else the exit status to return at
// once (0 after --help, 2 for a bad command line; both printed, the error naming
// the option and what it expects). --help lists every option.
int parseOptions(int argc, const char* const* argv, AppOptions* options);

}  // namespace ringx::viewer
