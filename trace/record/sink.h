// Where encoded trace records go: a file (file_sink.h), the live server
// (live_server.h), or a test's buffer.
//
// The recorder's writer thread encodes what the recording threads buffered and
// hands every sink the same batches, in order, on that one thread. A sink must
// never block for long: the writer drains every thread's buffer, and a stalled
// writer makes recording threads drop events.
#pragma once

#include <cstdint>
#include <string>

namespace ringx::trace {

struct Batch {
  // String definition records for ids first used in this batch. They must reach
  // every reader before the records that use them, so a sink that has to shed
  // load drops events, never these.
  std::string strings;
  // Event, clock-sync and dropped records (codec.h framing), in order.
  std::string records;
  // How many event records `records` holds (for a sink's own drop counts).
  uint64_t events = 0;
};

class Sink {
 public:
  virtual ~Sink() = default;
  // Called once before the first batch. `preamble` is the magic, the stream
  // header and every string defined so far: a reader that starts from it can
  // decode every later batch.
  virtual void begin(const std::string& preamble) = 0;
  virtual void write(const Batch& batch) = 0;
  // The recorder stops: write out what is buffered and release resources.
  virtual void close() = 0;
};

}  // namespace ringx::trace
