// Panel names for the command line and the tab bar.
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

}  // namespace ringx::viewer
