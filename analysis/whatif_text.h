// How the what-if reports (whatif.cc for DDP, whatif_fsdp.cc for FSDP) write numbers and
// columns: one way for both engines' tables and JSON. Internal to analysis/.
#pragma once

#include <cstdio>
#include <string>

#include "analysis/replay/step.h"
#include "base/format.h"
#include "base/json_text.h"

namespace ringx::analysis::whatif_text {

// Six significant digits, no trailing zeros: "25", "0.0999994" (the table and the JSON).
inline std::string shortNumber(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

inline std::string percent(double share) {
  char text[32];
  std::snprintf(text, sizeof text, "%+.1f%%", share * 100);
  return text;
}

inline std::string padRight(std::string text, size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

inline std::string padLeft(const std::string& text, size_t width) {
  return text.size() < width ? std::string(width - text.size(), ' ') + text : text;
}

// A prediction: the recorded step scaled by the replay's ratio of the change to the
// unchanged model, so that the model's own error on the recorded step cancels.
inline int64_t scaledPrediction(int64_t recordedNs, int64_t baselineNs, int64_t changedNs) {
  if (baselineNs <= 0) return changedNs;
  return static_cast<int64_t>(static_cast<double>(recordedNs) * static_cast<double>(changedNs) /
                                  static_cast<double>(baselineNs) +
                              0.5);
}

inline double shareOf(int64_t changedNs, int64_t baselineNs) {
  return baselineNs > 0 ? static_cast<double>(changedNs) / static_cast<double>(baselineNs) - 1 : 0;
}

// The critical path as JSON: [{"kind", "rank", "bucket", "begin_ns", "end_ns"}, ...] ("bucket" is
// the FSDP unit for FSDP's collectives).
inline void appendPathJson(std::string& out, const std::vector<replay::PathSegment>& path) {
  out += "[";
  for (size_t i = 0; i < path.size(); ++i) {
    const replay::PathSegment& s = path[i];
    out += std::string(i ? "," : "") + "{\"kind\":";
    appendJsonString(out, replay::pathKindName(s.kind));
    out += ",\"rank\":" + std::to_string(s.rank) + ",\"bucket\":" + std::to_string(s.bucket) +
           ",\"begin_ns\":" + std::to_string(s.beginNs) + ",\"end_ns\":" + std::to_string(s.endNs) +
           "}";
  }
  out += "]";
}

}  // namespace ringx::analysis::whatif_text
