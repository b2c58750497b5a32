// The viewer application: loads what the command line names, attaches to a live
// job, and runs the frame loop (poll, drain live data, build the UI, render,
// swap), or a fixed number of frames for screenshots and benchmarks. With
// --diff A B it loads two runs and shows the diff view (viewer/ui/diff_view.h)
// instead of the one-run window.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "viewer/app/options.h"
#include "viewer/app/recent_files.h"
#include "viewer/app/window.h"
#include "viewer/model/live_source.h"
#include "viewer/model/trace_store.h"
#include "viewer/ui/diff_view.h"
#include "viewer/ui/viewer_ui.h"

namespace ringx::viewer {

class App {
 public:
  // Loads the inputs and attaches (throws Error subclasses for unreadable input
  // or a bad address), then opens the window (throws when there is no display).
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
  const LiveSource* live() const { return live_.get(); }

 private:
  void open(const std::string& path);
  // `ranks`: the ones to follow (empty: every rank of the job's directory).
  void attach(const std::string& address, const std::string& token,
              const std::vector<int32_t>& ranks = {});
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
  bool viewFitted_ = false;  // the view was fitted to data (a live job's starts empty)
};

}  // namespace ringx::viewer
