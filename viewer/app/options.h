// ringx-viewer's command line:
//   ringx-viewer [TRACE_DIR_OR_FILE...] [--attach HOST:PORT] [--token T] [--size WxH]
//                [--frames N] [--seconds S] [--screenshot out.png] [--panel NAME]
//                [--print-stats] [--save DIR] [--zoom BEGIN_MS:END_MS]
#pragma once

#include <string>
#include <vector>

namespace ringx::viewer {

struct AppOptions {
  std::vector<std::string> inputs;  // trace directories, .ringx files, Chrome .json files
  std::string attach;               // HOST:PORT of rank 0's live trace server
  std::string token;                // --token, else RINGX_TRACE_TOKEN
  std::string saveDir;              // --save: when attached, write what arrived there at exit
  int width = 1600;
  int height = 900;
  int frames = -1;      // render this many frames, then exit (screenshot if asked)
  double seconds = -1;  // ... or this long (attached: let data arrive)
  std::string screenshot;
  std::string panel;  // stats, collectives, ddp, fsdp, memory, live
  bool printStats = false;
  bool help = false;
  // Zoom the timeline to [zoomBegin, zoomEnd] ns from the trace's start (for
  // screenshots and the benchmark's zoomed-in figure); negative: all of it.
  double zoomBeginMs = -1;
  double zoomEndMs = -1;

  // Runs without a person: exits after the frames/seconds (or at once for
  // --print-stats alone), no vsync.
  bool scripted() const { return frames >= 0 || seconds >= 0 || !screenshot.empty() || printStats; }
};

// Parses argv; throws InvalidArgument naming the bad option and what it expects.
AppOptions parseOptions(int argc, const char* const* argv);
std::string usage();

}  // namespace ringx::viewer
