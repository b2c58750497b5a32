// A POSIX shared-memory segment mapped into this process.
//
// Names are "/ringx-<pid>-<group token>-<what>" so that each job and group has
// its own, and the pid of the creator tells later runs whether a leftover is
// stale. Segments are created 0600 (only this user can map them) and unlinked
// as soon as every peer has mapped them, so nothing stays in /dev/shm after a
// normal exit, an exception or a SIGKILL; a process that dies during the brief
// set-up window leaves a name that removeStaleSegments() deletes on a later start.
#pragma once

#include <cstddef>
#include <string>

namespace ringx::transport::shm {

class Segment {
 public:
  // Creates (exclusively) and maps a zero-filled segment of `bytes`.
  static Segment create(const std::string& name, size_t bytes);
  // Maps an existing segment created by a peer.
  static Segment open(const std::string& name, size_t bytes);

  Segment() = default;
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();

  void* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }
  // Removes the name (the mapping stays valid). Idempotent.
  void unlink();

 private:
  std::string name_;
  void* data_ = nullptr;
  size_t size_ = 0;
  bool linked_ = false;
};

// A segment name for this process, group token and purpose.
std::string segmentName(const std::string& token, const std::string& what);

// Unlinks "ringx-<pid>-..." entries of this user in /dev/shm whose process is gone.
void removeStaleSegments();

}  // namespace ringx::transport::shm
