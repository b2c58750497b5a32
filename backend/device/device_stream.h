// What ringx needs from a device's execution queues: in-order streams, events recorded on them,
// stream-side waits, and two meeting points with the host that work through plain memory (a
// gate the host opens, a signal the device raises). CUDA provides these (streams,
// cudaEventRecord, cudaStreamWaitEvent, and small kernels that poll or write host memory);
// ThreadStream (thread_stream.h) provides them on the CPU, so that the ordering logic built on
// them (stream_ordering.h) is tested on machines without a GPU.
//
// Why the meeting points avoid the driver: a thread that the device waits for (the group's
// communication thread, which opens the gates) must never call the device's driver. CUDA's
// driver has a lock per context that some calls hold while they wait for the device to drain
// (the first launch of a kernel under lazy module loading, a copy to pageable memory); a gate
// waiting for that thread while that thread waits for the lock is a deadlock (seen on an H200).
#pragma once

#include <exception>
#include <memory>

namespace ringx::device {

// Marks a point in a stream: complete once everything enqueued on the stream before it is.
class DeviceEvent {
 public:
  virtual ~DeviceEvent() = default;
  // Whether the event has completed (does not block).
  virtual bool query() = 0;
  // Blocks the calling host thread until the event has completed.
  virtual void synchronize() = 0;
};

// A point in a stream the host sees reached by reading memory: asking makes no driver call.
class HostSignal {
 public:
  virtual ~HostSignal() = default;
  // Whether the stream has passed this point (everything enqueued before it has completed).
  virtual bool reached() = 0;
};

// A point in a stream that waits for the host: work enqueued after it starts once the host
// opens it. Host-staged collectives use it: the device copies the inputs out, the host runs
// the collective over the network, then opens the gate and the device copies the results in.
class HostGate {
 public:
  virtual ~HostGate() = default;
  // Lets the stream go on past this gate (once it is there). Called once, from any thread; gates
  // of one stream may be opened in any order.
  virtual void open() = 0;
};

// An in-order queue of device work.
class DeviceStream {
 public:
  virtual ~DeviceStream() = default;
  // An event that completes when all work enqueued on this stream so far has.
  virtual std::shared_ptr<DeviceEvent> record() = 0;
  // Work enqueued on this stream from now on starts only after `event` completes. The host
  // does not block.
  virtual void wait(const std::shared_ptr<DeviceEvent>& event) = 0;
  // A signal raised when the stream gets here (the host polls it; see HostSignal).
  virtual std::shared_ptr<HostSignal> signalHost() = 0;
  // Work enqueued on this stream from now on starts only after the returned gate is opened.
  // The gate must be opened, even when the host's part fails, or the stream stops for good.
  virtual std::shared_ptr<HostGate> waitForHost() = 0;
};

}  // namespace ringx::device
