// `ringx-trace summary`'s text: a Summary (analysis/summary.h) as tables for a terminal. The
// figures are the analyses'; only how they are laid out is decided here.
#pragma once

#include <cstddef>
#include <string>

#include "analysis/summary.h"

namespace ringx::analysis {

struct SummaryFormat {
  // The per-rank table is printed in full up to this many ranks (or always
  // with allRanks); beyond, the hosts and the top stragglers stand for it.
  size_t rankTableLimit = 64;
  bool allRanks = false;
  size_t topRanks = 5;  // stragglers named
  size_t topHosts = 8;  // host rows when there are more hosts than that
};

// The summary as text tables for a terminal, ending in a newline.
std::string formatSummary(const Summary& summary, const SummaryFormat& format = {});

}  // namespace ringx::analysis
