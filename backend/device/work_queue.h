// The communication thread of a process group: runs submitted jobs one at a
// time in submission order. This is the CPU "communication stream": collectives
// of one group never overlap and always run in the order the program issued
// them, which is what keeps the ranks' sequence numbers in step.
//
// A caller that is going to wait for its job anyway (a synchronous collective)
// can run it on its own thread with runHereIfIdle when nothing is queued or
// running: that saves the two thread hand-offs (wake the communication thread,
// wake the caller again), which cost more than a small collective itself. The
// order stays the same: the job is the next one either way, and the
// communication thread starts nothing while a caller runs one.
//
// A job may itself issue jobs to the queue that runs it: a collective completes
// its Work's Future inside its job, and the Future's callbacks (torch's DDP
// comm hooks, ZeRO's overlap) issue and wait on further collectives there. Such
// a job cannot be queued: it would sit behind the job that waits for it, for
// ever. runInPlace runs it at once, inside the running job, which is also what
// keeps the order the same on every rank: a callback's collectives always run
// right after the collective that completed, whatever the other threads issued
// meanwhile. And a callback that waits for a job issued before its own
// collective finished (still queued, so never to start while the callback
// runs) runs the queue's jobs up to it in place (runQueuedInPlace), in
// submission order, as the communication thread would have.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace ringx {

class WorkQueue {
 public:
  WorkQueue();
  // Runs the jobs already queued, then stops the thread.
  ~WorkQueue();

  void submit(std::function<void()> job);

  // Runs `job` on the calling thread and returns true when no job is queued or
  // running; returns false (and runs nothing) otherwise, and the caller submits.
  // Like every job, `job` reports its own errors and must not throw.
  bool runHereIfIdle(const std::function<void()>& job);

  // When the calling thread is running one of this queue's jobs (a Future callback
  // that job completed), runs `job` now, in place, and returns true; returns false
  // (and runs nothing) otherwise.
  bool runInPlace(const std::function<void()>& job);

  // When the calling thread is running one of this queue's jobs, runs queued jobs
  // in place, oldest first, until done() is true or nothing is queued; returns
  // false (and runs nothing) on any other thread. done() is asked before each job.
  bool runQueuedInPlace(const std::function<bool()>& done);

  // Whether the calling thread is running one of this queue's jobs now (any depth).
  bool runningHere() const;

  // Waits (up to `limit`) until every live queue has run and destroyed the jobs
  // submitted so far. Python calls it at exit: a job's captured tensors may be
  // owned by Python objects, and a communication thread that drops the last
  // reference after the interpreter has finalised is killed inside a destructor
  // (std::terminate). Returns false if some queue did not get there in time.
  static bool drainAll(std::chrono::milliseconds limit);

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  bool busy_ = false;  // a job runs, on the communication thread or a caller's
  std::thread thread_;
};

}  // namespace ringx
