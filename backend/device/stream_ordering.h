// Stream-ordered collectives, as users of ProcessGroupNCCL expect them, on any DeviceStream:
//
//   caller's stream:  ...compute A... [event R] ...compute B (overlaps)...  [wait D] ...C...
//   comm stream:                    [wait R] ==== collective ==== [event D]
//   completions thread:                                              waits D, completes
//
// 1. The collective starts after everything the caller had enqueued on its stream when it
//    called (A): an event R recorded there, waited on by the communication stream.
// 2. It runs on the communication stream, so the caller's later compute (B) overlaps it.
// 3. Work.wait() makes the caller's then-current stream wait for its end (D) without blocking
//    the host; C then sees the result. isCompleted() asks D; synchronize() blocks the host.
// 4. Its future completes, with the error if the collective failed, on a completions thread
//    (a WorkQueue) once D has; the buffers the collective uses (`keepAlive`, e.g. the tensors)
//    are released there, so the caching allocator cannot hand their memory to other work while
//    the collective may still read or write it. Not from a host callback on the stream
//    (cudaLaunchHostFunc): that may not call the driver, and completing a CUDA future does;
//    not on the communication thread either: it must never wait for the driver
//    (device_stream.h).
//
// A host-staged collective (enqueueStaged) is the same, with the network part on the host: the
// device copies the inputs out, the host runs the CPU collective once they are there, and the
// device copies the results back in after a gate the host opens when it is done (or failed):
//
//   comm stream:  [wait R] copy in [signal I] [gate] copy out [event D]
//   host:                          sees I, runs the collective, opens the gate
//
// The real backend passes CUDA streams; tests pass ThreadStreams (thread_stream.h).
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <mutex>

#include "backend/device/device_stream.h"
#include "backend/device/work_queue.h"
#include "base/deadline.h"

namespace ringx::device {

class OrderedCollective : public std::enable_shared_from_this<OrderedCollective> {
 public:
  // Enqueues the collective's device work on `comm`. Called on the host, in order with the
  // group's other collectives; host-side failures (a lost peer, bad input) are thrown.
  using Body = std::function<void(DeviceStream& comm)>;
  // Called once on the completions queue after the collective's device work, with its error or
  // null.
  using OnComplete = std::function<void(std::exception_ptr error)>;

  // Runs steps 1, 2 and 4 above and returns the collective's handle. `completions` is a queue
  // of the group's own, not its communication thread: each job there waits for the device.
  static std::shared_ptr<OrderedCollective> enqueue(DeviceStream& caller, DeviceStream& comm,
                                                    const Body& body,
                                                    std::shared_ptr<void> keepAlive,
                                                    OnComplete onComplete, WorkQueue& completions);

  // The host part of a staged collective, called on the caller's thread. It arranges for its
  // work to start once `inputsStaged` is reached (waitUntilReached) and to call `finished`
  // exactly once (from any thread) when the staged results are written or the collective has
  // failed. If it throws, it must not call `finished`.
  using HostFinished = std::function<void(std::exception_ptr error)>;
  using HostPart =
      std::function<void(std::shared_ptr<HostSignal> inputsStaged, HostFinished finished)>;

  // A host-staged collective: `copyIn` enqueues the device-to-host copies of its inputs,
  // `copyOut` the host-to-device copies of its results. A failure of the host part becomes the
  // collective's error; the gate is opened whatever happens, so the stream never stops.
  static std::shared_ptr<OrderedCollective> enqueueStaged(
      DeviceStream& caller, DeviceStream& comm, const Body& copyIn, const HostPart& hostPart,
      const Body& copyOut, std::shared_ptr<void> keepAlive, OnComplete onComplete,
      WorkQueue& completions);

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
  void fail(std::exception_ptr error);
  // Records the end event D and queues step 4.
  void finishEnqueue(DeviceStream& comm, std::shared_ptr<void> keepAlive, OnComplete onComplete,
                     WorkQueue& completions);

  std::shared_ptr<DeviceEvent> done_;
  std::mutex mutex_;
  std::exception_ptr error_;
};

// Waits on the calling thread, without calling the device's driver, until `signal` is reached;
// false when `deadline` passed first. Polls fast at first (copies of small inputs take
// microseconds), then backs off so that a long wait does not take a core.
bool waitUntilReached(HostSignal& signal, Deadline deadline);

}  // namespace ringx::device
