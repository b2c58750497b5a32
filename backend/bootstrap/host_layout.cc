#include "backend/bootstrap/host_layout.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "base/error.h"

namespace ringx::bootstrap {

HostLayout::HostLayout(const std::vector<int>& labels) : hostOfRank_(labels.size()) {
  // Hosts in the order of their lowest rank: the first label seen is host 0.
  std::map<int, int> number;
  for (size_t r = 0; r < labels.size(); ++r) {
    auto [it, fresh] = number.emplace(labels[r], static_cast<int>(number.size()));
    if (fresh) leaders_.push_back(static_cast<int>(r));
    hostOfRank_[r] = it->second;
  }
  std::vector<int> counts(leaders_.size(), 0);
  for (int host : hostOfRank_) ++counts[host];
  offsets_.assign(leaders_.size() + 1, 0);
  for (size_t h = 0; h < counts.size(); ++h) {
    offsets_[h + 1] = offsets_[h] + counts[h];
    largest_ = std::max(largest_, counts[h]);
  }
  byHost_.resize(labels.size());
  std::vector<int> next(offsets_.begin(), offsets_.end() - 1);
  for (size_t r = 0; r < labels.size(); ++r) byHost_[next[hostOfRank_[r]]++] = static_cast<int>(r);
}

HostLayout HostLayout::oneHost(int size) { return HostLayout(std::vector<int>(size, 0)); }

HostLayout HostLayout::blocks(int size, int ranksPerHost) {
  RINGX_ENFORCE(ranksPerHost >= 1);
  std::vector<int> labels(size);
  for (int r = 0; r < size; ++r) labels[r] = r / ranksPerHost;
  return HostLayout(labels);
}

std::vector<int> HostLayout::ranksOn(int host) const {
  return std::vector<int>(byHost_.begin() + offsets_[host], byHost_.begin() + offsets_[host + 1]);
}

std::string HostLayout::encode() const {
  std::string text;
  for (int r = 0; r < size();) {
    int end = r;
    while (end < size() && hostOfRank_[end] == hostOfRank_[r]) ++end;
    text += strCat(text.empty() ? "" : ",", hostOfRank_[r], "*", end - r);
    r = end;
  }
  return text;
}

HostLayout HostLayout::decode(const std::string& text, int size) {
  std::vector<int> labels;
  labels.reserve(size);
  const char* at = text.c_str();
  while (*at) {
    char* end = nullptr;
    const long host = std::strtol(at, &end, 10);
    RINGX_CHECK(end != at && *end == '*' && host >= 0, "ringx: host layout '", text,
                "' is not a list of host*count runs");
    at = end + 1;
    const long count = std::strtol(at, &end, 10);
    RINGX_CHECK(end != at && count > 0 && (*end == ',' || *end == '\0') &&
                    static_cast<long>(labels.size()) + count <= size,
                "ringx: host layout '", text, "' does not describe ", size, " ranks");
    labels.insert(labels.end(), count, static_cast<int>(host));
    at = end;
    if (*at == ',') {
      ++at;
      RINGX_CHECK(*at != '\0', "ringx: host layout '", text, "' ends with a comma");
    }
  }
  RINGX_CHECK(static_cast<int>(labels.size()) == size, "ringx: host layout '", text, "' describes ",
              labels.size(), " ranks, not ", size);
  return HostLayout(labels);
}

}  // namespace ringx::bootstrap
