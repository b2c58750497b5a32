// The What-if panel (see whatif_panel.h).
#include "viewer/ui/whatif_panel.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>

#include "analysis/profiler_ddp.h"
#include "analysis/trace_analyses.h"
#include "trace/model/chrome_ingest.h"
#include "viewer/ui/style.h"

namespace ringx::viewer {
namespace {

constexpr ImU32 kBestColor = IM_COL32(130, 220, 130, 255);
constexpr ImU32 kErrorColor = IM_COL32(255, 110, 100, 255);
constexpr ImU32 kLaneBackground = IM_COL32(38, 41, 46, 255);
constexpr float kLaneHeight = 16, kLaneLabelWidth = 70;

// `color` faded towards the lanes' background: collectives off the critical path.
ImU32 faded(ImU32 color) {
  const auto ch = [&](int shift) {
    const float a = float((kLaneBackground >> shift) & 0xff), b = float((color >> shift) & 0xff);
    return ImU32(a + (b - a) * 0.4f + 0.5f) << shift;
  };
  return ch(IM_COL32_R_SHIFT) | ch(IM_COL32_G_SHIFT) | ch(IM_COL32_B_SHIFT) | IM_COL32_A_MASK;
}

std::string shareText(double share) {
  char text[32];
  std::snprintf(text, sizeof text, "%+.1f%%", share * 100);
  return text;
}

// "allreduce 2", "forward".
std::string itemName(const std::string& kind, int64_t index) {
  std::string name = kind;
  if (index >= 0) {
    name += ' ';
    name += std::to_string(index);
  }
  return name;
}

std::string laneName(int32_t lane) {
  return lane == PredictedItem::kRing ? std::string("ring") : "rank " + std::to_string(lane);
}

}  // namespace

ImU32 pathKindColor(replay::PathSegment::Kind kind) {
  // Colours no event category uses (style.cc), so that the path stands out over the events.
  using K = replay::PathSegment::Kind;
  switch (kind) {
    case K::kForward:
      return IM_COL32(118, 255, 3, 255);  // lime
    case K::kBackward:
      return IM_COL32(0, 229, 255, 255);  // bright cyan
    case K::kAllreduce:
      return IM_COL32(255, 61, 0, 255);  // deep orange
    case K::kCopyBack:
      return IM_COL32(234, 128, 252, 255);  // light purple
    case K::kOptimizer:
      return IM_COL32(255, 215, 64, 255);  // amber
    default:
      // A kind this viewer does not know yet: a colour of its own, from its name.
      return categoryColor(std::string("path:") + replay::pathKindName(kind));
  }
}

// ---- the adapter: everything the panel knows of the report is read here -------------------

namespace {

// What both engines' reports give the panel: the recorded step and where the model starts, the
// baseline row (its change is the model's own error) and one row per change, each drawn from
// its replay by rowOf(label, replay).
template <class Report, class RowOf>
WhatIfView tableOf(const char* engine, int64_t recordedStepNs, int64_t firstStep,
                   const Report& report, int64_t bestRow, const char* baselineLabel, RowOf rowOf) {
  WhatIfView v;
  v.engine = engine;
  v.recordedStepNs = recordedStepNs;
  v.firstStep = firstStep;
  v.anchorRank = report.baseline.slowestRank;
  v.baseline = rowOf(baselineLabel, report.baseline);
  v.baseline.predictedStepNs = report.baseline.stepNs;
  v.baseline.changeShare = report.baselineErrorShare;
  v.baseline.lowNs = report.baseline.stepLowNs;
  v.baseline.highNs = report.baseline.stepHighNs;
  for (size_t i = 0; i < report.rows.size(); ++i) {
    const auto& r = report.rows[i];
    WhatIfRowView row = rowOf(r.change.label, r.replay);
    row.predictedStepNs = r.predictedStepNs;
    row.changeShare = r.changeShare;
    row.lowNs = r.predictedLowNs;
    row.highNs = r.predictedHighNs;
    row.withinNoise = r.withinNoise;
    row.error = r.error;
    row.best = int64_t(i) == bestRow;
    v.rows.push_back(std::move(row));
  }
  return v;
}

}  // namespace

WhatIfView adaptWhatIf(const analysis::WhatIfReport& report) {
  const analysis::DdpModelSource& src = report.source;
  auto rowOf = [&](const std::string& label, const replay::DdpReplay& replay) {
    WhatIfRowView row;
    row.label = label;
    row.exposedCommNs = replay.exposedCommNs;
    row.collectives = replay.buckets.size();
    row.replayedStepNs = replay.stepNs;
    std::map<int64_t, bool> ringOnPath;  // bucket -> its allreduce is on the path
    for (const replay::PathSegment& s : replay.criticalPath) {
      const bool ring = s.kind == replay::PathSegment::Kind::kAllreduce;
      PredictedItem item{ring ? PredictedItem::kRing : s.rank,
                         replay::pathKindName(s.kind),
                         pathKindColor(s.kind),
                         s.bucket,
                         s.beginNs,
                         s.endNs,
                         /*onPath=*/true};
      // On the timeline a collective on the path is drawn over the rank that launched it last.
      row.path.push_back(item);
      row.path.back().lane = s.rank;
      if (ring)
        ringOnPath[s.bucket] = true;
      else
        row.items.push_back(item);
    }
    for (size_t k = 0; k < replay.buckets.size(); ++k) {
      const replay::ReplayedBucket& b = replay.buckets[k];
      const replay::PathSegment::Kind kind = replay::PathSegment::Kind::kAllreduce;
      row.items.push_back({PredictedItem::kRing, replay::pathKindName(kind), pathKindColor(kind),
                           int64_t(k), b.startNs, b.endNs, ringOnPath.count(int64_t(k)) > 0});
    }
    return row;
  };
  return tableOf("ddp", src.recordedStepNs, src.planStep, report, report.bestPlanRow,
                 "recorded plan, replayed", rowOf);
}

namespace {

// A row whose replay has no ring of its own to draw (FSDP's, a profiler trace's): its path is
// its slowest rank's step, compute and the collectives it waited for (drawn on the rank that
// issued each last, as DDP's allreduces are); the predicted step is drawn on one lane.
template <class Replay>
WhatIfRowView pathRow(const std::string& label, const Replay& replay, size_t collectives) {
  WhatIfRowView row;
  row.label = label;
  row.exposedCommNs = replay.exposedCommNs;
  row.collectives = collectives;
  row.replayedStepNs = replay.stepNs;
  for (const replay::PathSegment& s : replay.criticalPath) {
    PredictedItem item{
        s.rank,         replay::pathKindName(s.kind), pathKindColor(s.kind), s.bucket, s.beginNs,
        s.endNs,
        /*onPath=*/true};
    row.path.push_back(item);
    item.lane = replay.slowestRank;  // the predicted step: the slowest rank's lane
    row.items.push_back(item);
  }
  return row;
}

}  // namespace

WhatIfView adaptWhatIf(const analysis::FsdpWhatIfReport& report) {
  auto rowOf = [&](const std::string& label, const replay::FsdpReplay& replay) {
    return pathRow(label, replay, replay.gathers);
  };
  return tableOf("fsdp", report.source.recordedStepNs, report.source.firstStep, report,
                 report.bestRow, "recorded schedule, replayed", rowOf);
}

WhatIfView adaptWhatIf(const analysis::ProfilerWhatIfReport& report) {
  const analysis::ProfilerProgram& src = report.source;
  auto rowOf = [&](const std::string& label, const analysis::ProfilerReplay& replay) {
    return pathRow(label, replay, src.collectives);
  };
  return tableOf("profiler", src.recordedStepNs,
                 src.stepNumbers.empty() ? 0 : src.stepNumbers.front(), report, -1,
                 "recorded trace, replayed", rowOf);
}

WhatIfView whatIfViewOf(const TraceStore& store) {
  try {
    const std::string engine = analysis::whatIfEngine(store);
    WhatIfView v = engine == "profiler" ? adaptWhatIf(analysis::profilerWhatIf(store))
                   : engine == "fsdp"   ? adaptWhatIf(analysis::fsdpWhatIf(store))
                                        : adaptWhatIf(analysis::whatIf(store));
    v.findings = analysis::advise(store, analysis::summarize(store, "")).findings;
    return v;
  } catch (const std::exception& e) {
    WhatIfView v;
    v.error = e.what();
    return v;
  }
}

// ---- the recorded timeline ----------------------------------------------------------------

namespace {

// A profiler trace's steps on `rank`: its ProfilerStep#N scopes, each to the next one's begin,
// the last to its own end or its device's last op's, whichever is later (the recorded step of
// analysis/profiler_program.h).
std::vector<RecordedStep> profilerStepsOf(const TraceStore& store, int32_t rank,
                                          int64_t firstStep) {
  std::map<int64_t, std::pair<int64_t, int64_t>> spans;  // N -> (begin, end)
  int64_t deviceEnd = 0;  // the last step runs on to its device work's end
  if (const model::RankData* r = store.findRank(rank)) {
    for (const model::Track& t : r->tracks) {
      if (model::isDeviceTrack(store.str(t.name))) {  // the device's (and its steps' copies)
        for (const auto& level : t.levels) {
          if (!level.empty()) deviceEnd = std::max(deviceEnd, level.back().end);
        }
        continue;
      }
      for (const auto& level : t.levels) {
        for (const model::Span& s : level) {
          const std::optional<int64_t> n = model::profilerStepNumber(store.str(s.name));
          if (n && *n >= firstStep) spans.try_emplace(*n, s.begin, s.end);
        }
      }
    }
  }
  std::vector<RecordedStep> steps;
  for (auto it = spans.begin(); it != spans.end(); ++it) {
    const auto next = std::next(it);
    steps.push_back(
        {it->first, it->second.first,
         next != spans.end() ? next->second.first : std::max(it->second.second, deviceEnd)});
  }
  return steps;
}

}  // namespace

std::vector<RecordedStep> recordedStepsOf(const TraceStore& store, int32_t rank,
                                          int64_t firstStep) {
  const std::string engine = analysis::whatIfEngine(store);
  if (engine == "profiler") return profilerStepsOf(store, rank, firstStep);
  std::map<int64_t, int64_t> begins;  // step -> forward begin
  auto add = [&](const auto& it) {
    if (it.rank == rank && it.forwardBeginNs > 0 && it.step >= firstStep)
      begins[it.step] = it.forwardBeginNs;
  };
  if (analysis::holdsProfiledTorchDdp(store)) {
    // torch DDP recovered from profiler traces: the recording's forwards (profiler_ddp.h).
    for (const replay::DdpRankRecord& r : analysis::profiledTorchDdp(store).recording.ranks) {
      for (const replay::DdpStepRecord& s : r.steps) {
        if (r.rank == rank && s.step >= firstStep) begins[s.step] = s.forwardBeginNs;
      }
    }
  } else if (engine == "fsdp") {
    for (const analysis::FsdpIteration& it : analysis::analyzeFsdp(store).iterations) add(it);
  } else {
    for (const analysis::DdpIteration& it : analysis::analyzeDdp(store).iterations) add(it);
  }
  std::vector<RecordedStep> steps;
  for (auto it = begins.begin(); it != begins.end(); ++it) {
    auto next = std::next(it);
    if (next != begins.end() && next->first == it->first + 1)
      steps.push_back({it->first, it->second, next->second});
  }
  return steps;
}

int pickStep(const std::vector<RecordedStep>& steps, int64_t medianNs) {
  int best = -1;
  for (int i = 0; i < int(steps.size()); ++i) {
    const RecordedStep& s = steps[size_t(i)];
    if (best < 0 ||
        std::llabs(s.endNs - s.beginNs - medianNs) <
            std::llabs(steps[size_t(best)].endNs - steps[size_t(best)].beginNs - medianNs))
      best = i;
  }
  return best;
}

std::vector<RankBand> pathOnTimeline(const WhatIfRowView& baseline, const RecordedStep& step,
                                     int64_t* clippedNs) {
  std::vector<RankBand> bands;
  int64_t clipped = 0;
  for (const PredictedItem& s : baseline.path) {
    const int64_t begin = step.beginNs + s.beginNs;
    const int64_t end = std::min(step.beginNs + s.endNs, step.endNs);
    clipped += step.beginNs + s.endNs - std::max(end, begin);
    if (end <= begin) continue;
    bands.push_back({s.lane, begin, end, s.color, itemName(s.kind, s.index)});
  }
  if (clippedNs) *clippedNs = clipped;
  return bands;
}

// ---- the panel ----------------------------------------------------------------------------

void WhatIfPanel::compute(const TraceStore& store) {
  report_ = whatIfViewOf(store);
  computed_ = true;
  outdated_ = false;
  store_ = &store;
  generation_ = store.generation();
  ++computations_;
  steps_.clear();
  if (report_.ok()) steps_ = recordedStepsOf(store, report_.anchorRank, report_.firstStep);
  if (selected_ >= int(report_.rows.size())) selected_ = -1;
  chooseStep(pickStep(steps_, report_.recordedStepNs));
}

void WhatIfPanel::chooseStep(int index) {
  chosenStep_ = index >= 0 && index < int(steps_.size()) ? index : -1;
  bands_.clear();
  clippedNs_ = 0;
  if (chosenStep_ >= 0)
    bands_ = pathOnTimeline(report_.baseline, steps_[size_t(chosenStep_)], &clippedNs_);
}

void WhatIfPanel::prepare(const TraceStore& store, ViewState& view, bool live) {
  const bool fresh = computed_ && store_ == &store && generation_ == store.generation();
  const bool wanted = view.panel == PanelId::kWhatIf || (computed_ && highlight_);
  if (!fresh) {
    if (computed_ && live && store_ == &store) {
      outdated_ = true;  // a live job's store: the report stays until the user asks again
    } else if (wanted && !store.empty()) {
      compute(store);
    } else {
      computed_ = false;  // another trace: this one's path is not drawn over it
      bands_.clear();
    }
  }
  if (highlight_ && computed_)
    view.bands = bands_;
  else
    view.bands.clear();
}

float WhatIfPanel::rowY(int row) const {
  const size_t i = size_t(row + 1);
  return i < rowY_.size() ? rowY_[i] : -1.0f;
}

float WhatIfPanel::ganttX(int64_t ns) const {
  return ganttX0_ + float(double(ns - ganttT0_) /
                          double(std::max<int64_t>(ganttT1_ - ganttT0_, 1)) * double(ganttWidth_));
}

void WhatIfPanel::draw(const TraceStore& store, ViewState& view) {
  rowY_.clear();
  lanes_.clear();
  if (!computed_) {
    ImGui::TextWrapped(store.empty() ? "No trace open." : "Replaying the recorded step...");
    return;
  }
  const WhatIfView& r = report_;
  if (outdated_) {
    if (ImGui::Button("Recompute")) compute(store);
    ImGui::SameLine();
    ImGui::TextDisabled("the job has recorded more since this report");
  }
  if (!r.ok()) {
    ImGui::PushStyleColor(ImGuiCol_Text, kErrorColor);
    ImGui::TextWrapped("What-if cannot replay this trace: %s", r.error.c_str());
    ImGui::PopStyleColor();
    return;
  }
  ImGui::Text(
      "recorded step %s (the median from step %lld)   replayed %s: the model's error %s   "
      "slowest rank %d",
      formatNs(r.recordedStepNs).c_str(), (long long)r.firstStep,
      formatNs(r.baseline.replayedStepNs).c_str(), shareText(r.baseline.changeShare).c_str(),
      r.anchorRank);
  ImGui::Checkbox("critical path on the timeline", &highlight_);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "the replayed chain of compute and exposed communication that sets the step time,\n"
        "over the ranks it runs on, from the chosen step's start on rank %d",
        r.anchorRank);
  if (chosenStep_ >= 0) {
    ImGui::SameLine(0, 20);
    ImGui::SetNextItemWidth(110);
    int step = int(steps_[size_t(chosenStep_)].step);
    if (ImGui::InputInt("step", &step)) {
      for (int i = 0; i < int(steps_.size()); ++i)
        if (steps_[size_t(i)].step == step) chooseStep(i);
    }
    const RecordedStep& s = steps_[size_t(chosenStep_)];
    ImGui::SameLine();
    if (ImGui::Button("Show it")) view.time.show(s.beginNs, s.endNs);
    ImGui::SameLine();
    ImGui::TextDisabled(
        "recorded %s%s", formatNs(s.endNs - s.beginNs).c_str(),
        clippedNs_ > 0 ? (", the path's last " + formatNs(clippedNs_) + " past its end").c_str()
                       : "");
  }
  if (!r.findings.empty() &&
      ImGui::CollapsingHeader("What the trace shows", ImGuiTreeNodeFlags_DefaultOpen)) {
    for (const analysis::Finding& f : r.findings) {
      ImGui::Bullet();
      ImGui::TextWrapped("%s", f.what.c_str());
      ImGui::Indent();
      ImGui::TextDisabled("%s", f.evidence.c_str());
      ImGui::TextWrapped("change: %s", f.change.c_str());
      ImGui::Unindent();
    }
  }
  if (!ImGui::BeginTable("##whatif", 2, ImGuiTableFlags_Resizable | ImGuiTableFlags_BordersInnerV))
    return;
  ImGui::TableNextColumn();
  table();
  ImGui::TableNextColumn();
  // One time axis for both: from the earliest item to the longer step.
  const WhatIfRowView* alt = selected_ >= 0 ? &r.rows[size_t(selected_)] : nullptr;
  int64_t t0 = 0, t1 = r.baseline.replayedStepNs;
  for (const WhatIfRowView* row : {&r.baseline, alt}) {
    if (!row || !row->error.empty()) continue;
    t1 = std::max(t1, row->replayedStepNs);
    for (const PredictedItem& i : row->items) t0 = std::min(t0, i.beginNs);
  }
  predicted(r.baseline, false, t0, t1);
  if (alt) {
    ImGui::Dummy(ImVec2(0, 4));
    predicted(*alt, true, t0, t1);
  } else {
    ImGui::TextDisabled("click a row to draw its predicted step here");
  }
  ImGui::EndTable();
}

void WhatIfPanel::table() {
  const WhatIfView& r = report_;
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders |
                                ImGuiTableFlags_ScrollY | ImGuiTableFlags_SizingStretchProp;
  if (!ImGui::BeginTable("##rows", 6, flags)) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  for (const char* h : {"change", "predicted step", "vs recorded", "steps p25-p75", "exposed comm",
                        r.engine == "fsdp"       ? "gathers"
                        : r.engine == "profiler" ? "collectives"
                                                 : "buckets"})
    ImGui::TableSetupColumn(h);
  ImGui::TableHeadersRow();
  rowY_.assign(r.rows.size() + 1, -1.0f);
  for (int i = -1; i < int(r.rows.size()); ++i) {
    const WhatIfRowView& row = i < 0 ? r.baseline : r.rows[size_t(i)];
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    const ImVec2 at = ImGui::GetCursorScreenPos();
    rowY_[size_t(i + 1)] = at.y + ImGui::GetTextLineHeight() / 2;
    rowX_ = at.x + 4;
    ImGui::PushID(i);
    const std::string label = row.best ? row.label + "  (fastest plan)" : row.label;
    if (row.best) ImGui::PushStyleColor(ImGuiCol_Text, kBestColor);
    if (ImGui::Selectable(label.c_str(), selected_ == i && i >= 0,
                          ImGuiSelectableFlags_SpanAllColumns))
      selected_ = i;
    if (row.best) ImGui::PopStyleColor();
    ImGui::PopID();
    ImGui::TableNextColumn();
    if (!row.error.empty()) {
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kErrorColor), "%s", row.error.c_str());
      continue;
    }
    ImGui::TextUnformatted(formatNs(row.predictedStepNs).c_str());
    ImGui::TableNextColumn();
    if (i < 0)
      ImGui::Text("model error %s", shareText(row.changeShare).c_str());
    else if (row.withinNoise)
      ImGui::TextDisabled("%s (noise)", shareText(row.changeShare).c_str());
    else
      ImGui::TextUnformatted(shareText(row.changeShare).c_str());
    ImGui::TableNextColumn();
    ImGui::Text("%s-%s", formatNs(row.lowNs).c_str(), formatNs(row.highNs).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(formatNs(row.exposedCommNs).c_str());
    ImGui::TableNextColumn();
    ImGui::Text("%zu", row.collectives);
  }
  ImGui::EndTable();
}

// One predicted step: a lane per rank on its critical path and one for the ring, bars in the
// path's colours (collectives off the path faded), the step's end a white line.
void WhatIfPanel::predicted(const WhatIfRowView& row, bool alternative, int64_t t0, int64_t t1) {
  ImGui::Text("%s: %s replayed", row.label.c_str(), formatNs(row.replayedStepNs).c_str());
  if (!row.error.empty()) {
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kErrorColor), "%s", row.error.c_str());
    return;
  }
  // The ranks' lanes, then the ring's when the replay has one (FSDP's has none to draw).
  std::vector<int32_t> lanes;
  bool ring = false;
  for (const PredictedItem& i : row.items) {
    if (i.lane != PredictedItem::kRing) lanes.push_back(i.lane);
    ring = ring || i.lane == PredictedItem::kRing;
  }
  std::sort(lanes.begin(), lanes.end());
  lanes.erase(std::unique(lanes.begin(), lanes.end()), lanes.end());
  if (ring) lanes.push_back(PredictedItem::kRing);
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  ganttX0_ = origin.x + kLaneLabelWidth;
  ganttWidth_ = std::max(ImGui::GetContentRegionAvail().x - kLaneLabelWidth - 8, 20.0f);
  ganttT0_ = t0;
  ganttT1_ = t1;
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  const PredictedItem* hovered = nullptr;
  float y = origin.y;
  for (int32_t lane : lanes) {
    lanes_.push_back({alternative, lane, y, y + kLaneHeight});
    draw->AddText(ImVec2(origin.x, y + 1), IM_COL32(220, 220, 220, 255), laneName(lane).c_str());
    draw->AddRectFilled(ImVec2(ganttX0_, y), ImVec2(ganttX0_ + ganttWidth_, y + kLaneHeight - 2),
                        kLaneBackground);
    for (const PredictedItem& i : row.items) {
      if (i.lane != lane) continue;
      const float x0 = ganttX(i.beginNs), x1 = std::max(ganttX(i.endNs), x0 + 1);
      draw->AddRectFilled(ImVec2(x0, y + 1), ImVec2(x1, y + kLaneHeight - 3),
                          i.onPath ? i.color : faded(i.color));
      if (x1 - x0 > 40) {
        const std::string text = itemName(i.kind, i.index);
        const ImVec4 clip(x0, y, x1 - 2, y + kLaneHeight);
        draw->AddText(ImGui::GetFont(), ImGui::GetFontSize(), ImVec2(x0 + 3, y),
                      textColorOn(i.color), text.c_str(), nullptr, 0, &clip);
      }
      if (mouse.x >= x0 && mouse.x <= x1 && mouse.y >= y && mouse.y < y + kLaneHeight) hovered = &i;
    }
    y += kLaneHeight;
  }
  const float end = ganttX(row.replayedStepNs);
  draw->AddLine(ImVec2(end, origin.y), ImVec2(end, y), IM_COL32(255, 255, 255, 200), 2);
  ImGui::Dummy(ImVec2(kLaneLabelWidth + ganttWidth_, y - origin.y));
  if (hovered && ImGui::IsWindowHovered())
    ImGui::SetTooltip("%s on %s\n%s to %s from the step's start%s",
                      itemName(hovered->kind, hovered->index).c_str(),
                      laneName(hovered->lane).c_str(), formatNs(hovered->beginNs).c_str(),
                      formatNs(hovered->endNs).c_str(),
                      hovered->onPath ? "\non the critical path" : "");
}

}  // namespace ringx::viewer
