#include "trace/record/file_sink.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace ringx::trace {

FileSink::FileSink(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd_ < 0) {
    RINGX_THROW(IoError, "cannot create trace file ", path_, ": ", std::strerror(errno),
                " (does the directory exist and is it writable?)");
  }
}

FileSink::~FileSink() { close(); }

void FileSink::append(const std::string& bytes) {
  if (fd_ < 0) return;
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      RINGX_THROW(IoError, "writing trace file ", path_, " failed: ", std::strerror(errno));
    done += static_cast<size_t>(n);
  }
}

void FileSink::begin(const std::string& preamble) { append(preamble); }

void FileSink::write(const Batch& batch) {
  append(batch.strings);
  append(batch.records);
}

void FileSink::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace ringx::trace
