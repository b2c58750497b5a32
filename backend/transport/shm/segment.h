// A POSIX shared-memory segment mapped into this process.
//
// Names are "/ringx-<pid>-<group token>-<what>" so that each job and group has
// its own, and the pid of the creator tells later runs whether a leftover is
// stale. Segments are created 0600 (only this user can map them) and unlinked
// as soon as every peer has mapped them, so nothing stays in /dev/shm after a
// normal exit, an exception or a SIGKILL; a process that dies during the brief
// set-up window leaves a name that removeStaleSegments() deletes on a later start.
//
// A segment that peers map at different times (a rank's doorbell, mapped by each
// same-host peer when it first connects) has no name at all: it is an unnamed
// file in /dev/shm (createUnnamed), and peers open it through the creator's
// /proc/<pid>/fd entry (procPath), which exists exactly as long as the creator.
#pragma once

#include <cstddef>
#include <string>

namespace ringx::transport::shm {

class Segment {
 public:
  // When this process's mapping of a segment's pages is made. A segment's pages are reserved
  // in /dev/shm when it is created either way (a full /dev/shm is an error there, never a
  // SIGBUS later); kNow also maps every page at once, so that the first pass through a pair's
  // rings takes no page fault per page, kOnTouch maps each page at its first touch, so that a
  // pair that moves little costs little to make.
  enum class Mapping { kNow, kOnTouch };

  // Creates (exclusively) and maps a zero-filled segment of `bytes`.
  static Segment create(const std::string& name, size_t bytes, Mapping mapping = Mapping::kNow);
  // Maps an existing segment created by a peer.
  static Segment open(const std::string& name, size_t bytes, Mapping mapping = Mapping::kNow);
  // Creates and maps a zero-filled segment without a name (an O_TMPFILE in /dev/shm); throws
  // IoError where that is not supported.
  static Segment createUnnamed(size_t bytes);
  // Maps a peer's unnamed segment through the path its procPath() gave.
  static Segment openPath(const std::string& path, size_t bytes);
  // Where another process of this user on this host can open an unnamed segment.
  std::string procPath() const;
  // Whether this segment was made by createUnnamed (see TemporaryName).
  bool unnamed() const { return fd_ >= 0; }
  int fd() const { return fd_; }

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
  // Maps a peer's segment from `fd` (closed here) and names it `name` in errors.
  static Segment mapPeers(int fd, const std::string& name, size_t bytes, Mapping mapping);
  std::string name_;
  void* data_ = nullptr;
  size_t size_ = 0;
  bool linked_ = false;
  int fd_ = -1;  // kept open for an unnamed segment, so that it can be linked later
};

// A segment name for this process, group token and purpose.
std::string segmentName(const std::string& token, const std::string& what);

// Unlinks "ringx-<pid>-..." entries of this user in /dev/shm whose process is gone.
void removeStaleSegments();

}  // namespace ringx::transport::shm
