// Turns each collective a group runs into one trace span on the group's
// communication track ("comm:<group>"): when the caller issued it, when the
// communication thread started and finished it, and what it was (op, bytes,
// sequence number, algorithm, transports, peers, the error if it failed). Its
// reduce_op is the op the caller asked: AVG and PREMUL_SUM (with premul_factor),
// not the SUM that runs them.
// Readers derive bandwidth from bytes and duration; nothing is stored twice.
// A collective whose work ran on a device (CUDA tensors on the device ring) also
// carries when the device ran it, and gets a second span for that on the rank's
// "cuda:comm" track (Category::kDevice, same name, seq and group).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/types.h"

namespace ringx {

// What the caller knows before the collective runs (Group::noteCall).
struct CallNote {
  int64_t enqueueNs = 0;     // trace::nowNs() when the caller issued it; 0 = unknown
  uint64_t bytes = 0;        // size as nccl-tests counts it (schema.h, arg::kBytes)
  uint64_t flightEntry = 0;  // its FlightRecorder::issue() entry; 0 = none
};

// What the run learned (filled by Group::run).
struct CollectiveOutcome {
  const char* op = "";
  uint64_t seq = 0;
  DataType dtype = DataType::kUInt8;
  AskedReduce reduceOp;  // as the caller asked it (AVG, PREMUL_SUM and its factor)
  bool reduces = false;
  int root = -1;
  const char* algorithm = "none";
  std::vector<int> peers;
  const char* transport = nullptr;  // "shm", "tcp", "shm+tcp"; nullptr when no peer was involved
  int64_t deviceBeginNs = 0;        // when a device ran it (steady ns); 0 when the host did
  int64_t deviceEndNs = 0;
};

class CollectiveTracer {
 public:
  CollectiveTracer(const std::string& groupName, int groupRank, int groupSize);
  // Records the span; `error` is nullptr when the collective succeeded.
  void record(const CollectiveOutcome& outcome, const CallNote& note, int64_t startNs,
              int64_t endNs, const char* error);

 private:
  // Ids of the values that repeat from call to call, so that recording a
  // collective interns nothing in the common case (only the communication
  // thread touches them).
  uint32_t idOf(const char* text);  // static strings, cached by address
  uint32_t peersId(const std::vector<int>& peers);

  uint32_t track_, deviceTrack_, group_;
  int groupRank_, groupSize_;
  std::vector<std::pair<const char*, uint32_t>> staticIds_;
  std::vector<int> lastPeers_;
  uint32_t lastPeersId_ = 0;
};

}  // namespace ringx
