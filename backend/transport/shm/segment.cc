#include "backend/transport/shm/segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "base/error.h"

namespace ringx::transport::shm {

namespace {

// Takes a segment's pages now (see create() for why): "" on success, else why it could not
// ("cannot reserve N bytes of shared memory<what>: ..."), with what to do when /dev/shm is full.
std::string reservePages(int fd, size_t bytes, const std::string& what) {
  const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (err == 0) return "";
  return strCat("cannot reserve ", bytes, " bytes of shared memory", what, ": ", std::strerror(err),
                err == ENOSPC ? " (/dev/shm is full: enlarge it, e.g. docker --shm-size, or "
                                "set RINGX_TRANSPORT=tcp to use no shared memory)"
                              : "");
}

int mmapFlags(Segment::Mapping mapping) {
  return MAP_SHARED | (mapping == Segment::Mapping::kNow ? MAP_POPULATE : 0);
}

}  // namespace

Segment Segment::create(const std::string& name, size_t bytes, Mapping mapping) {
  int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd == -1) {
    const int err = errno;
    RINGX_THROW(IoError, "cannot create shared memory segment ", name,
                " in /dev/shm: ", std::strerror(err),
                err == EACCES || err == EROFS
                    ? " (/dev/shm is not writable for this process: fix its permissions, or set "
                      "RINGX_TRANSPORT=tcp to use no shared memory)"
                    : "");
  }
  Segment segment;
  segment.name_ = name;
  segment.linked_ = true;
  // Sizing the segment takes its pages now: ftruncate would reserve nothing on tmpfs, and with
  // /dev/shm full (a container's default 64 MiB) the first touch of a missing page would be
  // SIGBUS in the middle of a collective. This way a full /dev/shm is an error here, saying
  // what to do about it.
  if (const std::string why = reservePages(fd, bytes, " for " + name); !why.empty()) {
    ::close(fd);
    ::shm_unlink(name.c_str());
    RINGX_THROW(IoError, why);
  }
  void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, mmapFlags(mapping), fd, 0);
  ::close(fd);
  if (data == MAP_FAILED) {
    ::shm_unlink(name.c_str());
    RINGX_THROW(IoError, "mmap of ", name, " failed: ", std::strerror(errno));
  }
  segment.data_ = data;
  segment.size_ = bytes;
  return segment;
}

Segment Segment::mapPeers(int fd, const std::string& name, size_t bytes, Mapping mapping) {
  void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, mmapFlags(mapping), fd, 0);
  ::close(fd);
  if (data == MAP_FAILED) RINGX_THROW(IoError, "mmap of ", name, " failed: ", std::strerror(errno));
  Segment segment;
  segment.name_ = name;
  segment.data_ = data;
  segment.size_ = bytes;
  return segment;
}

Segment Segment::open(const std::string& name, size_t bytes, Mapping mapping) {
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  RINGX_SYSCHECK(fd, strCat("shm_open(", name, ") for mapping a peer's segment"));
  return mapPeers(fd, name, bytes, mapping);
}

Segment Segment::createUnnamed(size_t bytes) {
  int fd = ::open("/dev/shm", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd == -1) {
    RINGX_THROW(IoError, "cannot create an unnamed shared memory segment in /dev/shm: ",
                std::strerror(errno));
  }
  // As in create(): take the pages now, so that a full /dev/shm is an error here.
  if (const std::string why = reservePages(fd, bytes, ""); !why.empty()) {
    ::close(fd);
    RINGX_THROW(IoError, why);
  }
  void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (data == MAP_FAILED) {
    ::close(fd);
    RINGX_THROW(IoError, "mmap of an unnamed shared memory segment failed: ", std::strerror(errno));
  }
  Segment segment;
  segment.data_ = data;
  segment.size_ = bytes;
  segment.fd_ = fd;
  return segment;
}

Segment Segment::openPath(const std::string& path, size_t bytes) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  RINGX_SYSCHECK(fd, strCat("open(", path, ") for mapping a peer's unnamed segment"));
  return mapPeers(fd, path, bytes, Mapping::kNow);
}

std::string Segment::procPath() const {
  RINGX_ENFORCE(fd_ >= 0);
  return strCat("/proc/", ::getpid(), "/fd/", fd_);
}

Segment::Segment(Segment&& other) noexcept { *this = std::move(other); }

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    this->~Segment();
    name_ = std::move(other.name_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    linked_ = std::exchange(other.linked_, false);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

Segment::~Segment() {
  unlink();
  if (data_) ::munmap(data_, size_);
  data_ = nullptr;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Segment::unlink() {
  if (linked_) ::shm_unlink(name_.c_str());
  linked_ = false;
}

std::string segmentName(const std::string& token, const std::string& what) {
  return strCat("/ringx-", ::getpid(), "-", token.substr(0, 12), "-", what);
}

void removeStaleSegments() {
  DIR* dir = ::opendir("/dev/shm");
  if (!dir) return;
  while (dirent* entry = ::readdir(dir)) {
    const char* name = entry->d_name;
    if (std::strncmp(name, "ringx-", 6) != 0) continue;
    long pid = std::strtol(name + 6, nullptr, 10);
    if (pid <= 0) continue;
    // Only a creator that no longer exists makes a name stale (EPERM: it runs as someone else).
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    struct stat info;
    std::string path = std::string("/dev/shm/") + name;
    if (::stat(path.c_str(), &info) == 0 && info.st_uid == ::getuid()) {
      ::shm_unlink((std::string("/") + name).c_str());
    }
  }
  ::closedir(dir);
}

}  // namespace ringx::transport::shm
