// Recently opened traces and attach addresses, remembered across runs in
// $XDG_CONFIG_HOME/ringx-viewer/recent (or ~/.config/...), newest first.
#pragma once

#include <string>
#include <vector>

namespace ringx::viewer {

class RecentFiles {
 public:
  // `path` empty: the default location. Missing or unreadable files give an empty list.
  explicit RecentFiles(std::string path = "");
  const std::vector<std::string>& entries() const { return entries_; }
  // Moves `entry` to the front (at most kMax kept) and saves; saving errors are ignored
  // (a read-only home must not stop the viewer).
  void add(const std::string& entry);
  static constexpr size_t kMax = 10;

 private:
  std::string path_;
  std::vector<std::string> entries_;
};

}  // namespace ringx::viewer
