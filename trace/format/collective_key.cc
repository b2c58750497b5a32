#include "trace/format/collective_key.h"

#include "base/text.h"
#include "trace/format/schema.h"

namespace ringx::trace {

bool isPointToPoint(std::string_view op) {
  return startsWith(op, "send") || startsWith(op, "recv") || startsWith(op, "isend") ||
         startsWith(op, "irecv");
}

std::string_view collectiveGroup(std::string_view groupArg, std::string_view trackName) {
  if (!groupArg.empty()) return groupArg;
  const std::string_view prefix = track::kCommPrefix;
  return startsWith(trackName, prefix) ? trackName.substr(prefix.size()) : trackName;
}

bool isCollectiveAcrossRanks(std::string_view op, int64_t seq, std::string_view group) {
  return seq >= 0 && !group.empty() && !isPointToPoint(op);
}

}  // namespace ringx::trace
