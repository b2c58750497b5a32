// libFuzzer target: the headers peers send before each collective's data
// (backend/algorithms/collective.h) and each point-to-point message (backend/group/p2p.h).
// Any bytes from a peer must be accepted only when they are the expected header, and
// otherwise be a MismatchError or a stated problem: never a crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "backend/algorithms/collective.h"
#include "backend/group/p2p.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringx;
  using namespace ringx::algorithms;
  if (size < sizeof(CollectiveHeader) + 16) return 0;
  CollectiveHeader theirs;
  std::memcpy(&theirs, data, sizeof(theirs));
  // This rank's call, from the next bytes (kinds, dtypes and ops in range, as ringx makes them).
  const uint8_t* call = data + sizeof(theirs);
  CallSignature signature;
  signature.kind = static_cast<CollectiveKind>(call[0] % 9);
  signature.dtype = static_cast<DataType>(call[1] % kNumDataTypes);
  signature.op = static_cast<ReduceOp>(call[2] % kNumReduceOps);
  signature.root = static_cast<int8_t>(call[3]);
  std::memcpy(&signature.seq, call + 4, 8);
  uint32_t bytes;
  std::memcpy(&bytes, call + 12, 4);
  const CollectiveHeader ours = collectiveHeader(signature, bytes);
  bool accepted = true;
  try {
    checkPeerHeader(theirs, ours, 0, 1);
  } catch (const MismatchError&) {
    accepted = false;
  }
  // Accepted exactly when the peer sent the header this rank would have sent.
  if (accepted != (std::memcmp(&theirs, &ours, sizeof(ours)) == 0)) std::abort();

  P2pFrameHeader frame;
  std::memcpy(&frame, data + size - sizeof(frame), sizeof(frame));
  const bool frameOk = p2pFrameProblem(frame).empty();
  if (frameOk && frame.bytes > kMaxP2pFrameBytes) std::abort();
  // A message frame or a failure notice, each exactly as the sender would have made it.
  const bool notice = isFailureNotice(frame);
  const P2pFrameHeader made =
      notice ? failureNoticeHeader(frame.bytes) : p2pFrameHeader(frame.tag, frame.bytes);
  const uint64_t limit = notice ? kMaxFailureNoticeBytes : kMaxP2pFrameBytes;
  if (frameOk != (frame.bytes <= limit && std::memcmp(&made, &frame, sizeof(made)) == 0))
    std::abort();
  return 0;
}
