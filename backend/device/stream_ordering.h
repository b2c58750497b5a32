// Stream-ordered collectives, as users of ProcessGroupNCCL expect them, on any DeviceStream:
//
//   caller's stream:  ...compute A... [event R] ...compute B (overlaps)...  [wait D] ...C...
//   comm stream:                    [wait R] ==== collective ==== [event D] (host callback)
//
// 1. The collective starts after everything the caller had enqueued on its stream when it
//    called (A): an event R recorded there, waited on by the communication stream.
// 2. It runs on the communication stream, so the caller's later compute (B) overlaps it.
// 3. Work.wait() makes the caller's then-current stream wait for its end (D) without blocking
//    the host; C then sees the result. isCompleted() asks D; synchronize() blocks the host.
// 4. Its future completes, with the error if the collective failed, from a host callback after
//    D; the buffers the collective uses (`keepAlive`, e.g. the tensors) are released there, so
//    the caching allocator cannot hand their memory to other work while the collective may
//    still read or write it.
//
// The real backend passes CUDA streams; tests pass ThreadStreams (thread_stream.h).
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <mutex>

#include "backend/device/device_stream.h"

namespace ringx::device {

class OrderedCollective {
 public:
  // Enqueues the collective's device work on `comm`. Called on the host, in order with the
  // group's other collectives; host-side failures (a lost peer, bad input) are thrown.
  using Body = std::function<void(DeviceStream& comm)>;
  // Called once from a host callback after the collective's device work, with its error or null.
  using OnComplete = std::function<void(std::exception_ptr error)>;

  // Runs steps 1, 2 and 4 above and returns the collective's handle.
  static std::shared_ptr<OrderedCollective> enqueue(DeviceStream& caller, DeviceStream& comm,
                                                    const Body& body,
                                                    std::shared_ptr<void> keepAlive,
                                                    OnComplete onComplete);

  // Step 3: `stream`'s later work waits for the collective; rethrows at once a failure the
  // host already knows of (as ProcessGroupNCCL's wait does for an aborted communicator).
  void blockStream(DeviceStream& stream);
  // Whether the collective's device work has finished (it may have failed).
  bool isCompleted();
  // Blocks the host until the collective's device work has finished; rethrows its error.
  void synchronize();
  // The host-side failure, if any (null while none is known).
  std::exception_ptr error();

 private:
  OrderedCollective() = default;

  std::shared_ptr<DeviceEvent> done_;
  std::mutex mutex_;
  std::exception_ptr error_;
};

}  // namespace ringx::device
