// The application (see app.h).
#include "viewer/app/app.h"

#include <cinttypes>
#include <cstdio>
#include <thread>

#include "base/error.h"
#include "trace/model/event_search.h"
#include "trace/model/loader.h"
#include "viewer/ui/workspace.h"

namespace ringx::viewer {
// The viewer draws the trace model (trace/model/); its names are used unqualified here.
using namespace ringx::model;
namespace {
double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// One run of --diff; an unreadable run is named in the error ("run B of --diff: ...").
void loadRun(const char* which, const std::string& path, TraceStore& store) {
  try {
    loadTraces(store, {path});
  } catch (const std::exception& e) {
    throw Error(strCat("run ", which, " of --diff (", path, "): ", e.what()));
  }
}
}  // namespace

App::App(const AppOptions& options) : options_(options), store_(std::make_unique<TraceStore>()) {
  const auto begin = Clock::now();
  if (options_.diff.size() == 2) {
    storeB_ = std::make_unique<TraceStore>();
    loadRun("A", options_.diff[0], *store_);
    loadRun("B", options_.diff[1], *storeB_);
    loadMs_ = msSince(begin);
    startDiff();
    return;
  }
  if (!options_.inputs.empty() && options_.attach.empty()) {
    for (const auto& path : options_.inputs) detectFormat(path);  // a missing file: no window
    loading_ = std::make_unique<BackgroundLoad>(options_.inputs, loadOptions());
    loadingFromCommandLine_ = true;
  }
  start();
}

App::App(const AppOptions& options, std::unique_ptr<TraceStore> a, std::unique_ptr<TraceStore> b)
    : options_(options), store_(std::move(a)), storeB_(std::move(b)) {
  startDiff();
}

void App::startDiff() {
  const std::string aName = options_.diff.size() == 2 ? options_.diff[0] : "A";
  const std::string bName = options_.diff.size() == 2 ? options_.diff[1] : "B";
  for (const auto* store : {store_.get(), storeB_.get()})
    for (const auto& w : store->warnings())
      std::fprintf(stderr, "ringx-viewer: warning: %s\n", w.c_str());
  diff_.setDiff(analysis::diffRuns(*store_, *storeB_), aName, bName);
  view_.time.show(store_->beginNs(), store_->endNs(), 0.01);
  viewB_.time.show(storeB_->beginNs(), storeB_->endNs(), 0.01);
  if (options_.diffRow > 0) diff_.select(size_t(options_.diffRow - 1), view_, viewB_);
  window_ = std::make_unique<Window>(options_.width, options_.height, "ringx-viewer: diff",
                                     /*vsync=*/!options_.scripted());
}

App::App(const AppOptions& options, std::unique_ptr<TraceStore> preloaded)
    : options_(options), store_(std::move(preloaded)) {
  start();
}

void App::start() {
  if (!options_.attach.empty())
    attach(options_.attach, options_.token, options_.attachRanks, options_.summaryOthers);
  if (options_.followSeconds > 0)
    view_.settings.followWindowSeconds = float(options_.followSeconds);
  if (!options_.panel.empty() && parsePanelName(options_.panel, &view_.panel))
    view_.panelRequested = true;
  view_.expandedGroups.insert(options_.expand.begin(), options_.expand.end());
  for (const auto& in : options_.inputs) recent_.add(in);
  if (!loading_) showLoaded();
  window_ = std::make_unique<Window>(options_.width, options_.height, "ringx-viewer",
                                     /*vsync=*/!options_.scripted());
}

// What the command line asks of the data, once it is in.
void App::showLoaded() {
  for (const auto& w : store_->warnings())
    std::fprintf(stderr, "ringx-viewer: warning: %s\n", w.c_str());
  resetView();
  openWorkspace(options_.inputs);
  if (options_.zoomBeginMs >= 0) {
    view_.time.t0 = store_->beginNs() + int64_t(options_.zoomBeginMs * 1e6);
    view_.time.t1 = store_->beginNs() + int64_t(options_.zoomEndMs * 1e6);
  }
  // By what the trace holds (screenshots that show something whatever the run's timing).
  int64_t begin = 0, end = 0;
  if (options_.zoomFirstStep >= 0) {
    if (stepsExtent(*store_, options_.zoomFirstStep, options_.zoomLastStep, &begin, &end)) {
      view_.time.show(begin, end, 0.02);
    } else {
      std::fprintf(stderr,
                   "ringx-viewer: error: --zoom-steps %" PRId64 ":%" PRId64
                   ": the trace holds no event of those steps (no \"step\" argument in that "
                   "range, no ProfilerStep#N)\n",
                   options_.zoomFirstStep, options_.zoomLastStep);
      exitCode_ = 1;
    }
  }
  if (!options_.zoomEvent.empty()) {
    if (firstEventNamed(*store_, options_.zoomEvent, &begin, &end)) {
      view_.time.show(begin, end, 0.25);
    } else {
      std::fprintf(stderr, "ringx-viewer: error: --zoom-event %s: no event has that name\n",
                   options_.zoomEvent.c_str());
      exitCode_ = 1;
    }
  }
  if (!options_.areaRanks.empty())
    selectArea(options_.areaRanks, begin != end || options_.zoomBeginMs >= 0);
  // After --zoom: the first match at or after the view's left edge.
  if (!options_.search.empty()) ui_.search().request(options_.search);
}

// --area: the ranks' tracks over the view, as a Shift+drag across them would select them.
void App::selectArea(const std::vector<int32_t>& ranks, bool zoomed) {
  Selection& sel = view_.selection;
  for (int32_t r : ranks) {
    const RankData* rank = store_->findRank(r);
    if (!rank || !rank->eventsLoaded) {
      std::fprintf(stderr, "ringx-viewer: error: --area: %s\n",
                   rank ? strCat("rank ", r,
                                 "'s events are not loaded (the trace is open as an index: "
                                 "--expand its lane)")
                              .c_str()
                        : strCat("the trace has no rank ", r).c_str());
      exitCode_ = 1;
      return;
    }
    for (uint32_t t = 0; t < rank->tracks.size(); ++t) sel.areaTracks.emplace_back(r, t);
  }
  std::sort(sel.areaTracks.begin(), sel.areaTracks.end());
  sel.areaTracks.erase(std::unique(sel.areaTracks.begin(), sel.areaTracks.end()),
                       sel.areaTracks.end());
  sel.hasRange = zoomed;
  sel.rangeBegin = view_.time.t0;
  sel.rangeEnd = view_.time.t1;
  view_.panel = PanelId::kStats;
  view_.panelRequested = true;
}

LoadOptions App::loadOptions() const {
  LoadOptions o;
  o.threads = options_.loadThreads;
  o.holdAtFile = options_.holdLoadAtFile;
  if (options_.indexAboveMb >= 0) o.indexAboveBytes = uint64_t(options_.indexAboveMb * 1e6);
  return o;
}

// A trace opened as an index loads the ranks of a lane when it is expanded, a
// lane at a time, on a thread of its own; the frame adopts them when they are in.
void App::loadExpandedRanks() {
  if (rankLoad_.thread.joinable() && rankLoad_.done) {
    rankLoad_.thread.join();
    if (rankLoad_.error) {
      try {
        std::rethrow_exception(rankLoad_.error);
      } catch (const std::exception& e) {
        ui_.setMessage(strCat("loading ranks: ", e.what()), true);
      }
    }
    for (RankData& rank : rankLoad_.ranks) store_->adoptRank(std::move(rank));
    rankLoad_.ranks.clear();
    store_->finalize();
  }
  const AggregateLanes* lanes = store_->aggregates();
  if (rankLoad_.thread.joinable() || !lanes || !lanes->fromFiles()) return;
  std::vector<int32_t> wanted;
  for (const RankGroup& group : lanes->groups()) {
    if (!view_.expandedGroups.count(group.label)) continue;
    for (int32_t r : group.ranks)
      if (const RankData* rank = store_->findRank(r);
          rank && !rank->eventsLoaded && !rankLoad_.failed.count(r))
        wanted.push_back(r);
    if (!wanted.empty()) break;
  }
  if (wanted.empty()) return;
  rankLoad_.done = false;
  rankLoad_.error = nullptr;
  rankLoad_.thread = std::thread([this, wanted] {
    try {
      rankLoad_.ranks = loadRankEvents(*store_, wanted, options_.loadThreads);
    } catch (...) {
      rankLoad_.error = std::current_exception();
      rankLoad_.failed.insert(wanted.begin(), wanted.end());
    }
    rankLoad_.done = true;
  });
}

// The store is about to be replaced: a rank load that reads it ends first, and
// its ranks (of the old trace) go.
void App::dropRankLoad() {
  if (rankLoad_.thread.joinable()) rankLoad_.thread.join();
  rankLoad_.ranks.clear();
  rankLoad_.failed.clear();
}

void App::finishLoading() {
  std::unique_ptr<BackgroundLoad> load = std::move(loading_);
  const bool fromCommandLine = loadingFromCommandLine_;
  loadingFromCommandLine_ = false;
  std::unique_ptr<TraceStore> fresh;
  try {
    fresh = load->take();
  } catch (const std::exception& e) {
    if (!fromCommandLine) {
      ui_.setMessage(e.what(), true);
      return;
    }
    std::fprintf(stderr, "ringx-viewer: error: %s\n", e.what());
    exitCode_ = 1;
    window_->requestClose();
    return;
  }
  loadMs_ = load->elapsedMs();
  live_.reset();
  dropRankLoad();
  store_ = std::move(fresh);
  view_.selection = Selection{};
  view_.searchHit = EventRef{};
  if (fromCommandLine) {
    showLoaded();
    return;
  }
  resetView();
  openWorkspace(load->paths());
  const std::string& path = load->paths().front();
  recent_.add(path);
  ui_.setMessage(strCat("opened ", path, ": ", store_->ranks().size(), " ranks, ",
                        store_->eventCount(), " events"),
                 false);
}

void App::resetView() {
  view_.time.show(store_->beginNs(), store_->endNs(), 0.01);
  viewFitted_ = !store_->empty();
}

void App::open(const std::string& path) {
  try {
    detectFormat(path);
  } catch (const std::exception& e) {
    ui_.setMessage(e.what(), true);
    return;
  }
  // What is shown stays until the new trace is in (or fails: a message).
  loading_ = std::make_unique<BackgroundLoad>(std::vector<std::string>{path}, loadOptions());
  loadingFromCommandLine_ = false;
}

void App::attach(const std::string& address, const std::string& token,
                 const std::vector<int32_t>& ranks, bool summaryOthers) {
  live_.reset();
  live_ = std::make_unique<LiveSource>(address, token, ranks, summaryOthers);
  dropRankLoad();
  store_ = std::make_unique<TraceStore>();
  view_.selection = Selection{};
  view_.searchHit = EventRef{};
  view_.settings.followLive = true;  // attached: follow until the user moves the view
  recent_.add("attach:" + address);
}

void App::handle(const UiActions& a) {
  if (!a.open.empty()) open(a.open);
  if (!a.attach.empty()) {
    try {
      attach(a.attach, a.attachToken.empty() ? options_.token : a.attachToken);
    } catch (const std::exception& e) {
      ui_.setMessage(e.what(), true);
    }
  }
  if (!a.saveDir.empty() && live_) {
    try {
      live_->saveTo(a.saveDir);
      ui_.setMessage("saved what the job sent to " + a.saveDir, false);
    } catch (const std::exception& e) {
      ui_.setMessage(e.what(), true);
    }
  }
  if (a.detach) live_.reset();
  if (a.quit) window_->requestClose();
}

void App::frame() {
  if (storeB_) {
    window_->beginFrame(/*waitForInput=*/!options_.scripted());
    diff_.frame(*store_, *storeB_, view_, viewB_);
    window_->render();
    return;
  }
  if (loading_ && loading_->done()) finishLoading();
  if (!loading_) loadExpandedRanks();
  if (loading_) {
    // Scripted runs measure the loaded trace: poll, do not spin the CPU the load needs.
    window_->beginFrame(/*waitForInput=*/false);
    loadView_.frame(*loading_, loading_->elapsedSoFarMs());
    window_->render();
    if (options_.scripted()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return;
  }
  // Follow mode (the newest data in view) is the UI's; without it, a live
  // job's first data is fitted once.
  if (live_ && live_->drainInto(*store_) && !view_.settings.followLive && !viewFitted_) resetView();
  // A person at an idle viewer: draw when something happens (live data needs no
  // input to change, and scripted runs measure frames).
  window_->beginFrame(/*waitForInput=*/!options_.scripted() && !live_);
  UiActions actions;
  ui_.frame(*store_, view_, live_.get(), recent_.entries(), actions);
  handle(actions);
  saveWorkspaceIfChanged(false);
  window_->render();
}

void App::openWorkspace(const std::vector<std::string>& inputs) {
  workspacePath_ = live_ ? std::string() : workspacePath(inputs);
  std::string error;
  if (!workspacePath_.empty() && !loadWorkspace(workspacePath_, view_, *store_, &error) &&
      !error.empty()) {
    std::fprintf(stderr, "ringx-viewer: warning: %s\n", error.c_str());
  }
  savedTracks_ = view_.tracks;
  savedPanel_ = view_.panel;
}

void App::saveWorkspaceIfChanged(bool atExit) {
  if (workspacePath_.empty() || options_.scripted()) return;
  const TrackArrangement& t = view_.tracks;
  const bool changed = !(t.pinned == savedTracks_.pinned) || t.hidden != savedTracks_.hidden ||
                       t.filter != savedTracks_.filter || t.rankOrder != savedTracks_.rankOrder ||
                       view_.panel != savedPanel_;
  if (!changed && !atExit) return;
  if (!saveWorkspace(workspacePath_, view_, *store_)) {
    std::fprintf(stderr, "ringx-viewer: warning: cannot write the workspace %s\n",
                 workspacePath_.c_str());
    workspacePath_.clear();  // said once
    return;
  }
  savedTracks_ = t;
  savedPanel_ = view_.panel;
}

int App::run() {
  const bool scripted = options_.scripted();
  int frames = options_.frames;
  if (scripted && frames < 0 && options_.seconds < 0) frames = 10;
  int rendered = 0;
  Clock::time_point measuredFrom;
  const auto start = Clock::now();
  while (!window_->shouldClose()) {
    frame();
    if (firstFrameMs_ < 0) firstFrameMs_ = msSince(created_);
    if (exitCode_ != 0) break;  // the trace or an option failed (said on stderr)
    if (loading_) {             // the loading frames are not the trace's
      window_->present();
      continue;
    }
    ++rendered;
    // The first frame uploads the font atlas and warms caches: fps counts the rest.
    if (rendered == 1) measuredFrom = Clock::now();
    const bool last =
        scripted && ((frames >= 0 && rendered >= frames) ||
                     (options_.seconds >= 0 && msSince(start) >= options_.seconds * 1e3));
    if (last && !options_.screenshot.empty()) {
      // A screenshot of a timeline with nothing on it shows nothing of the trace: refused, so
      // that a fixed zoom the run's timing moved away from fails instead of an empty picture.
      if (!storeB_ && !store_->empty() && ui_.timeline().itemsDrawn() == 0) {
        std::fprintf(stderr,
                     "ringx-viewer: error: the timeline shows no event between %.3f and %.3f ms "
                     "of the trace, so the screenshot would be empty; nothing written to %s "
                     "(zoom to what the trace holds: --zoom-steps FIRST:LAST, --zoom-event "
                     "NAME)\n",
                     double(view_.time.t0 - store_->beginNs()) / 1e6,
                     double(view_.time.t1 - store_->beginNs()) / 1e6, options_.screenshot.c_str());
        exitCode_ = 1;
        break;
      }
      window_->screenshot(options_.screenshot);
    }
    window_->present();
    if (last) break;
  }
  if (exitCode_ != 0) return exitCode_;
  if (!storeB_ && !loading_) saveWorkspaceIfChanged(true);
  if (live_ && !options_.saveDir.empty()) {
    live_->saveTo(options_.saveDir);
    std::fprintf(stderr, "ringx-viewer: saved what the job sent to %s\n", options_.saveDir.c_str());
  }
  if (options_.printStats && storeB_) {
    const double ms = msSince(measuredFrom);
    const double fps = rendered > 1 && ms > 0 ? (rendered - 1) * 1e3 / ms : 0;
    printDiffStats();
    std::printf("load_ms=%.0f fps=%.1f\n", loadMs_, fps);
    std::fflush(stdout);
  } else if (options_.printStats) {
    const double ms = msSince(measuredFrom);
    const double fps = rendered > 1 && ms > 0 ? (rendered - 1) * 1e3 / ms : 0;
    std::printf("ranks=%zu events=%" PRIu64 " load_ms=%.0f fps=%.1f\n", store_->ranks().size(),
                store_->eventCount(), loadMs_, fps);
    // How long the loaded trace spans: shows whether files recorded together line up.
    const AggregateLanes* lanes = store_->aggregates();
    std::printf("span_ms=%.3f flows=%zu first_frame_ms=%.0f lanes=%zu indexed=%d\n",
                double(store_->endNs() - store_->beginNs()) / 1e6, store_->flows().size(),
                firstFrameMs_, lanes ? lanes->groups().size() : size_t(0),
                lanes && lanes->fromFiles() ? 1 : 0);
    // What the last frame showed: the view, from the trace's start, and the items drawn in it.
    std::printf("view_ms=%.3f:%.3f items=%" PRIu64 "\n",
                double(view_.time.t0 - store_->beginNs()) / 1e6,
                double(view_.time.t1 - store_->beginNs()) / 1e6, ui_.timeline().itemsDrawn());
    // The collectives panel's hang suspects (torch's dumps: the hang report's lines), once drawn.
    for (const HangLine& h : ui_.collectives().hangLines())
      std::printf("hang: %s\n", h.text.c_str());
    if (!options_.areaRanks.empty()) {
      const StatsPanel& stats = ui_.stats();
      std::printf("area_tracks=%zu area_rows=%zu area_ms=%.1f\n", view_.selection.areaTracks.size(),
                  stats.areaRows().size(), stats.computeMs());
    }
    if (!options_.search.empty()) {
      const SearchBar& search = ui_.search();
      std::printf("search_matches=%zu current=%lld\n", search.search().matches().size(),
                  static_cast<long long>(search.current() + 1));
    }
    std::fflush(stdout);
  }
  return 0;
}

// --print-stats with --diff: each run, then the rows and the selected one
// (with where each timeline shows it).
void App::printDiffStats() const {
  int run = 0;
  for (const auto* store : {store_.get(), storeB_.get()}) {
    std::printf("run=%c ranks=%zu events=%" PRIu64 "\n", run++ == 0 ? 'A' : 'B',
                store->ranks().size(), store->eventCount());
  }
  const analysis::RunDiff& d = diff_.diff();
  std::printf("diff_rows=%zu matched_collectives=%" PRIu64 " selected=%d", d.rows.size(),
              d.matchedCollectives, diff_.selectedRow() + 1);
  if (diff_.selectedRow() >= 0) {
    const analysis::DiffRow& r = d.rows[size_t(diff_.selectedRow())];
    std::printf(" what=\"%s\" delta_ns=%lld a_at_ns=%lld b_at_ns=%lld", r.name.c_str(),
                (long long)r.deltaNs, (long long)(r.aTimeNs - store_->beginNs()),
                (long long)(r.bTimeNs - storeB_->beginNs()));
    std::printf(" a_view_ns=%lld:%lld b_view_ns=%lld:%lld",
                (long long)(view_.time.t0 - store_->beginNs()),
                (long long)(view_.time.t1 - store_->beginNs()),
                (long long)(viewB_.time.t0 - storeB_->beginNs()),
                (long long)(viewB_.time.t1 - storeB_->beginNs()));
  }
  std::printf("\n");
}

}  // namespace ringx::viewer
