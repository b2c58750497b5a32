// What a test records through the process's Recorder, read back: recording starts into a
// temporary file as this is made, and finish() stops it and returns the trace (the file goes).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "trace/format/codec.h"
#include "trace/record/file_sink.h"
#include "trace/record/recorder.h"

namespace ringx::testing {

class RecordedFile {
 public:
  RecordedFile() {
    char path[] = "/tmp/ringx-recorded-XXXXXX";
    const int fd = mkstemp(path);
    EXPECT_GE(fd, 0) << "cannot make a temporary file in /tmp";
    if (fd >= 0) close(fd);
    path_ = path;
    trace::Recorder& recorder = trace::Recorder::instance();
    recorder.start(trace::RecorderOptions{});
    recorder.addSink(std::make_unique<trace::FileSink>(path_));
  }
  ~RecordedFile() { std::remove(path_.c_str()); }
  RecordedFile(const RecordedFile&) = delete;
  RecordedFile& operator=(const RecordedFile&) = delete;

  trace::RankTrace finish() {
    trace::Recorder::instance().stop();
    return trace::readTraceFile(path_);
  }

 private:
  std::string path_;
};

}  // namespace ringx::testing
