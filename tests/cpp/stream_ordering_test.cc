// The stream-ordering logic of GPU collectives (backend/device/stream_ordering.h), on
// ThreadStreams: the same semantics as CUDA streams, so it is tested without a GPU. Gates
// (promises the test fulfils) hold stream work back, so every check is about order, never time.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <stdexcept>
#include <thread>

#include "backend/device/stream_ordering.h"
#include "backend/device/thread_stream.h"

namespace ringx::device {
namespace {

// The group's completions queue (stream_ordering.h, step 4).
WorkQueue& completions() {
  static WorkQueue queue;
  return queue;
}

// Work that stays blocked until the test opens the gate.
struct Gate {
  std::promise<void> promise;
  std::shared_future<void> future = promise.get_future().share();
  void open() { promise.set_value(); }
  std::function<void()> holdBack() {
    auto f = future;
    return [f] { f.wait(); };
  }
};

TEST(StreamOrdering, CollectiveStartsAfterTheCallersEarlierWork) {
  ThreadStream caller, comm;
  Gate gate;
  std::atomic<int> input{0}, output{-1};
  caller.enqueue(gate.holdBack());
  caller.enqueue([&] { input = 5; });  // the caller's compute that produces the input
  auto work = OrderedCollective::enqueue(
      caller, comm,
      [&](DeviceStream& s) { static_cast<ThreadStream&>(s).enqueue([&] { output = input * 2; }); },
      nullptr, nullptr, completions());
  // Give an unordered collective every chance to run early (it would within microseconds and
  // read the input before it exists); an ordered one cannot run until the gate opens.
  for (int i = 0; i < 100 && output == -1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(output, -1) << "the collective ran before the caller's earlier work";
  EXPECT_FALSE(work->isCompleted());
  gate.open();
  work->synchronize();
  EXPECT_EQ(output, 10);  // it read the input the caller wrote before calling
}

TEST(StreamOrdering, WaitOrdersTheCallersLaterWorkWithoutBlockingTheHost) {
  ThreadStream caller, comm;
  Gate collectiveGate;
  std::atomic<int> result{0}, seenByCaller{-1}, overlapped{0};
  auto work = OrderedCollective::enqueue(
      caller, comm,
      [&](DeviceStream& s) {
        auto& stream = static_cast<ThreadStream&>(s);
        stream.enqueue(collectiveGate.holdBack());
        stream.enqueue([&] { result = 42; });
      },
      nullptr, nullptr, completions());
  // Compute enqueued before wait() overlaps the collective: it runs while the collective is
  // held back.
  std::promise<void> computeRan;
  caller.enqueue([&] {
    overlapped = 1;
    computeRan.set_value();
  });
  computeRan.get_future().wait();
  EXPECT_EQ(result, 0);
  // wait(): returns on the host at once (the collective is still held), and the caller's
  // later work sees the result.
  work->blockStream(caller);
  caller.enqueue([&] { seenByCaller = result.load(); });
  auto callerDone = caller.record();
  EXPECT_FALSE(callerDone->query());
  EXPECT_FALSE(work->isCompleted());
  collectiveGate.open();
  callerDone->synchronize();
  EXPECT_EQ(seenByCaller, 42);
  EXPECT_TRUE(work->isCompleted());
  EXPECT_EQ(overlapped, 1);
}

TEST(StreamOrdering, FutureCompletesAfterTheDeviceWorkAndReleasesTheBuffers) {
  ThreadStream caller, comm;
  Gate gate;
  auto buffer = std::make_shared<int>(7);
  std::weak_ptr<int> watch = buffer;
  std::promise<std::exception_ptr> completed;
  auto work = OrderedCollective::enqueue(
      caller, comm,
      [&](DeviceStream& s) { static_cast<ThreadStream&>(s).enqueue(gate.holdBack()); },
      std::move(buffer), [&](std::exception_ptr error) { completed.set_value(error); },
      completions());
  auto future = completed.get_future();
  // The collective holds the only reference while its device work is pending.
  EXPECT_FALSE(watch.expired());
  EXPECT_EQ(future.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  gate.open();
  EXPECT_EQ(future.get(), nullptr);
  EXPECT_TRUE(watch.expired());
  EXPECT_TRUE(work->isCompleted());
}

TEST(StreamOrdering, HostSideFailureReachesWaitSynchronizeAndTheFuture) {
  ThreadStream caller, comm;
  std::promise<std::exception_ptr> completed;
  auto work = OrderedCollective::enqueue(
      caller, comm, [](DeviceStream&) { throw std::runtime_error("allreduce #3: rank 1 is gone"); },
      nullptr, [&](std::exception_ptr error) { completed.set_value(error); }, completions());
  EXPECT_THROW(work->blockStream(caller), std::runtime_error);
  EXPECT_THROW(work->synchronize(), std::runtime_error);
  std::exception_ptr error = completed.get_future().get();
  ASSERT_NE(error, nullptr);
  try {
    std::rethrow_exception(error);
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "allreduce #3: rank 1 is gone");
  }
}

TEST(StreamOrdering, CollectivesOnOneCommStreamCompleteInOrder) {
  ThreadStream caller, comm;
  Gate gate;
  std::vector<int> order;
  std::mutex mutex;
  std::vector<std::shared_ptr<OrderedCollective>> works;
  for (int i = 0; i < 3; ++i) {
    works.push_back(OrderedCollective::enqueue(
        caller, comm,
        [&, i](DeviceStream& s) {
          auto& stream = static_cast<ThreadStream&>(s);
          if (i == 0) stream.enqueue(gate.holdBack());
          stream.enqueue([&, i] {
            std::lock_guard<std::mutex> lock(mutex);
            order.push_back(i);
          });
        },
        nullptr, nullptr, completions()));
  }
  EXPECT_FALSE(works[2]->isCompleted());  // held behind the first
  gate.open();
  works[2]->synchronize();
  EXPECT_TRUE(works[0]->isCompleted() && works[1]->isCompleted());
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
}

// The host sees a signal reached by reading memory; a wait for one the stream has not reached
// ends at its deadline.
TEST(StreamOrdering, ASignalIsReachedOnlyAfterTheWorkBeforeIt) {
  ThreadStream comm;
  Gate gate;
  comm.enqueue(gate.holdBack());
  auto signal = comm.signalHost();
  EXPECT_FALSE(signal->reached());
  EXPECT_FALSE(waitUntilReached(*signal, Clock::now()));  // a deadline already past
  gate.open();
  EXPECT_TRUE(waitUntilReached(*signal, Clock::now() + std::chrono::minutes(1)));
  EXPECT_TRUE(signal->reached());
}

// A staged collective on ThreadStreams: the "device" copies, the host queue plays the group's
// communication thread. The host part is held back by a gate so the test can see that the copy
// out waits for it while the communication stream itself is free.
TEST(StagedCollective, CopiesInRunsTheHostPartThenCopiesOut) {
  ThreadStream caller, comm;
  WorkQueue host;
  Gate callerGate, hostGate;
  std::atomic<int> deviceInput{0}, stagedInput{-1}, stagedOutput{-1}, deviceOutput{-1};
  std::atomic<int> seenByCaller{-1};
  caller.enqueue(callerGate.holdBack());
  caller.enqueue([&] { deviceInput = 21; });
  auto work = OrderedCollective::enqueueStaged(
      caller, comm,
      [&](DeviceStream& s) {
        static_cast<ThreadStream&>(s).enqueue([&] { stagedInput = deviceInput.load(); });
      },
      [&](std::shared_ptr<HostSignal> inputsStaged, OrderedCollective::HostFinished finished) {
        host.submit([&, inputsStaged, finished, held = hostGate.holdBack()] {
          ASSERT_TRUE(waitUntilReached(*inputsStaged, Clock::now() + std::chrono::minutes(1)));
          held();
          stagedOutput = stagedInput * 2;  // the CPU collective
          finished(nullptr);
        });
      },
      [&](DeviceStream& s) {
        static_cast<ThreadStream&>(s).enqueue([&] { deviceOutput = stagedOutput.load(); });
      },
      nullptr, nullptr, completions());
  work->blockStream(caller);
  caller.enqueue([&] { seenByCaller = deviceOutput.load(); });
  callerGate.open();
  // The inputs get staged; the copy out then waits for the host, which is held.
  for (int i = 0; i < 1000 && stagedInput != 21; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(stagedInput, 21);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(deviceOutput, -1) << "the copy out ran before the host part finished";
  EXPECT_FALSE(work->isCompleted());
  hostGate.open();
  auto callerDone = caller.record();
  callerDone->synchronize();
  EXPECT_EQ(seenByCaller, 42);
  EXPECT_TRUE(work->isCompleted());
}

TEST(StagedCollective, AHostFailureIsTheCollectivesErrorAndTheStreamGoesOn) {
  ThreadStream caller, comm;
  WorkQueue host;
  std::promise<std::exception_ptr> completed;
  std::atomic<bool> copiedOut{false};
  auto failing = OrderedCollective::enqueueStaged(
      caller, comm, [](DeviceStream&) {},
      [&](std::shared_ptr<HostSignal> staged, OrderedCollective::HostFinished finished) {
        host.submit([staged, finished] {
          waitUntilReached(*staged, Clock::now() + std::chrono::minutes(1));
          finished(std::make_exception_ptr(std::runtime_error("allreduce #7: rank 2 is gone")));
        });
      },
      [&](DeviceStream& s) { static_cast<ThreadStream&>(s).enqueue([&] { copiedOut = true; }); },
      nullptr, [&](std::exception_ptr error) { completed.set_value(error); }, completions());
  std::exception_ptr error = completed.get_future().get();
  ASSERT_NE(error, nullptr);
  EXPECT_THROW(failing->synchronize(), std::runtime_error);
  EXPECT_THROW(failing->blockStream(caller), std::runtime_error);
  EXPECT_TRUE(copiedOut);  // the gate was opened: the stream did not stop
  // A host part that throws never gets to open the gate itself; the stream still goes on.
  auto thrown = OrderedCollective::enqueueStaged(
      caller, comm, [](DeviceStream&) {},
      [](std::shared_ptr<HostSignal>, OrderedCollective::HostFinished) {
        throw std::invalid_argument("allreduce: tensors of different sizes");
      },
      [](DeviceStream&) {}, nullptr, nullptr, completions());
  EXPECT_THROW(thrown->synchronize(), std::invalid_argument);
  std::atomic<bool> later{false};
  auto next = OrderedCollective::enqueue(
      caller, comm,
      [&](DeviceStream& s) { static_cast<ThreadStream&>(s).enqueue([&] { later = true; }); },
      nullptr, nullptr, completions());
  next->synchronize();
  EXPECT_TRUE(later);
}

}  // namespace
}  // namespace ringx::device
