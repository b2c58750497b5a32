// A sink that appends the stream to one file (DIR/rank-N.ringx).
//
// Each batch goes out with write() as soon as the writer thread has it, so a
// job that crashes loses at most the last flush interval, and what is on disk
// always ends at a record boundary or inside the last record (which readers
// skip, see codec.h).
#pragma once

#include <string>

#include "trace/record/sink.h"

namespace ringx::trace {

class FileSink : public Sink {
 public:
  // Creates (or truncates) `path`, readable only by the job's user. Throws
  // IoError naming the path when it cannot.
  explicit FileSink(std::string path);
  ~FileSink() override;

  void begin(const std::string& preamble) override;
  void write(const Batch& batch) override;
  void close() override;
  const std::string& path() const { return path_; }

 private:
  void append(const std::string& bytes);
  std::string path_;
  int fd_ = -1;
};

}  // namespace ringx::trace
