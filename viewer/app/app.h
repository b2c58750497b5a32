// The viewer application: loads what the command line names, attaches to a live
// job, and runs the frame loop (poll, drain live data, build the UI, render,
// swap), or a fixed number of frames for screenshots and benchmarks. With
// --diff A B it loads two runs and shows the diff view (viewer/ui/diff_view.h)
// instead of the one-run window.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "trace/model/live_source.h"
#include "trace/model/loader.h"
#include "trace/model/trace_store.h"
#include "viewer/app/options.h"
#include "viewer/app/recent_files.h"
#include "viewer/app/window.h"
#include "viewer/ui/diff_view.h"
#include "viewer/ui/load_progress.h"
#include "viewer/ui/viewer_ui.h"

namespace ringx::viewer {
// The viewer draws the trace model (trace/model/); its names are used unqualified here.
using namespace ringx::model;

using Clock = std::chrono::steady_clock;

class App {
 public:
  // Opens the window at once (throws when there is no display) and loads the
  // inputs in the background, drawing the progress until they are in; attaches
  // (throws for a bad address). Inputs that do not exist or are of no known
  // format throw before the window opens; one that fails to load ends run()
  // with status 1 and the error on stderr. With --diff both runs load first.
  explicit App(const AppOptions& options);
  // With a store built elsewhere (tests) instead of options.inputs.
  App(const AppOptions& options, std::unique_ptr<TraceStore> preloaded);
  // The diff view of two stores built elsewhere (tests); options.diff names them.
  App(const AppOptions& options, std::unique_ptr<TraceStore> a, std::unique_ptr<TraceStore> b);

  // Runs until the window closes, or for the scripted frames/seconds; takes the
  // screenshot and prints the stats line when asked. Returns the exit code.
  int run();

  // One frame: drain live data, UI, render; `capture` keeps the back buffer
  // unpresented until the caller has read it (then call present()).
  void frame();
  void present() { window_->present(); }

  TraceStore& store() { return *store_; }  // with --diff: run A
  bool diffMode() const { return storeB_ != nullptr; }
  TraceStore& storeB() { return *storeB_; }  // --diff's run B
  ViewState& viewB() { return viewB_; }
  DiffView& diffView() { return diff_; }
  ViewState& view() { return view_; }
  ViewerUi& ui() { return ui_; }
  Window& window() { return *window_; }
  double loadMs() const { return loadMs_; }
  // Whether ranks of an indexed trace are being loaded for an expanded lane.
  bool loadingRanks() const { return rankLoad_.thread.joinable(); }
  // The load in the background (null once it is done: the store holds it).
  BackgroundLoad* loading() { return loading_.get(); }
  const LoadProgressView& loadProgress() const { return loadView_; }
  const LiveSource* live() const { return live_.get(); }

 private:
  void open(const std::string& path);
  void finishLoading();
  LoadOptions loadOptions() const;
  void loadExpandedRanks();
  void dropRankLoad();
  void showLoaded();
  void selectArea(const std::vector<int32_t>& ranks, bool zoomed);
  // `ranks`: the ones to follow (empty: every rank of the job's directory);
  // `summaryOthers`: the other ranks' summary streams too (LiveSource).
  void attach(const std::string& address, const std::string& token,
              const std::vector<int32_t>& ranks = {}, bool summaryOthers = false);
  void handle(const UiActions& actions);
  void resetView();
  void start();
  void startDiff();
  void printDiffStats() const;

  AppOptions options_;
  std::unique_ptr<TraceStore> store_;
  std::unique_ptr<LiveSource> live_;
  ViewState view_;
  std::unique_ptr<TraceStore> storeB_;  // --diff: run B (store_ is run A)
  ViewState viewB_;
  DiffView diff_;
  ViewerUi ui_;
  RecentFiles recent_;
  std::unique_ptr<Window> window_;
  double loadMs_ = 0;
  Clock::time_point created_ = Clock::now();
  double firstFrameMs_ = -1;  // from construction to the first frame on screen
  std::unique_ptr<BackgroundLoad> loading_;
  bool loadingFromCommandLine_ = false;  // a failure exits (1), not a message
  LoadProgressView loadView_;
  int exitCode_ = 0;
  // Ranks of an indexed trace being loaded for an expanded lane.
  struct RankLoad {
    std::thread thread;
    std::atomic<bool> done{false};
    std::vector<RankData> ranks;
    std::exception_ptr error;
    std::set<int32_t> failed;  // not tried again
    ~RankLoad() {
      if (thread.joinable()) thread.join();
    }
  };
  RankLoad rankLoad_;
  bool viewFitted_ = false;  // the view was fitted to data (a live job's starts empty)
  // The workspace beside the trace (viewer/ui/workspace.h): put back at open, saved when the
  // arrangement or the panel changes and at exit (never by scripted runs).
  void openWorkspace(const std::vector<std::string>& inputs);
  void saveWorkspaceIfChanged(bool atExit);
  std::string workspacePath_;
  TrackArrangement savedTracks_;
  PanelId savedPanel_ = PanelId::kStats;
};

}  // namespace ringx::viewer
