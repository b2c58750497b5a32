// Panel names for the command line and the tab bar; the tracks' arrangement.
#include "viewer/ui/view_state.h"

namespace ringx::viewer {

const char* panelName(PanelId id) {
  switch (id) {
    case PanelId::kStats:
      return "stats";
    case PanelId::kCollectives:
      return "collectives";
    case PanelId::kDdp:
      return "ddp";
    case PanelId::kFsdp:
      return "fsdp";
    case PanelId::kMemory:
      return "memory";
    case PanelId::kLive:
      return "live";
    case PanelId::kWhatIf:
      return "whatif";
  }
  return "?";
}

bool parsePanelName(const std::string& name, PanelId* out) {
  for (PanelId id : kAllPanels)
    if (name == panelName(id)) {
      *out = id;
      return true;
    }
  return false;
}

std::vector<int32_t> TrackArrangement::arranged(std::vector<int32_t> ranks) const {
  if (rankOrder.empty()) return ranks;
  // A rank's place: its index in rankOrder, else after all of them, by rank.
  auto place = [&](int32_t r) {
    const auto it = std::find(rankOrder.begin(), rankOrder.end(), r);
    return std::make_pair(it - rankOrder.begin(), r);
  };
  std::sort(ranks.begin(), ranks.end(), [&](int32_t a, int32_t b) { return place(a) < place(b); });
  return ranks;
}

void TrackArrangement::moveRank(int32_t rank, int by, const std::vector<int32_t>& ranks) {
  std::vector<int32_t> order = arranged(ranks);
  // Ranks ordered before and absent now keep their places for when they come back (a trace
  // opened as an index loads its ranks as their lanes open).
  for (int32_t r : rankOrder)
    if (std::find(order.begin(), order.end(), r) == order.end()) order.push_back(r);
  const auto it = std::find(order.begin(), order.end(), rank);
  if (it == order.end()) return;
  const std::ptrdiff_t at = it - order.begin();
  const std::ptrdiff_t to =
      by == kToTop ? 0 : std::clamp<std::ptrdiff_t>(at + by, 0, std::ptrdiff_t(ranks.size()) - 1);
  order.erase(it);
  order.insert(order.begin() + to, rank);
  rankOrder = std::move(order);
}

}  // namespace ringx::viewer
