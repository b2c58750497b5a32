// The recent-files list (see recent_files.h): one entry per line.
#include "viewer/app/recent_files.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace ringx::viewer {

RecentFiles::RecentFiles(std::string path) : path_(std::move(path)) {
  if (path_.empty()) {
    const char* xdg = std::getenv("XDG_CONFIG_HOME");
    const char* home = std::getenv("HOME");
    if (xdg && *xdg)
      path_ = std::string(xdg) + "/ringx-viewer/recent";
    else if (home && *home)
      path_ = std::string(home) + "/.config/ringx-viewer/recent";
  }
  std::ifstream in(path_);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty() && entries_.size() < kMax) entries_.push_back(line);
}

void RecentFiles::add(const std::string& entry) {
  entries_.erase(std::remove(entries_.begin(), entries_.end(), entry), entries_.end());
  entries_.insert(entries_.begin(), entry);
  if (entries_.size() > kMax) entries_.resize(kMax);
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ec);
  std::ofstream out(path_, std::ios::trunc);
  for (const auto& e : entries_) out << e << "\n";
}

}  // namespace ringx::viewer
