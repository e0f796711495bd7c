//===- ThreadPool.h - A fixed pool for chunked host jobs --------*- C++ -*-===//
//
// A fixed set of threads that runs jobs split into chunks of elements.
// Chunks are handed out in submission order, so every thread works on the
// oldest job until its chunks are all taken, and a job submitted first
// finishes first (up to its last chunks). Jobs have dense ids in
// submission order; a caller waits for one or for all. The destructor
// waits for every job, then stops and joins the threads.
//
// Bodies must not throw (the host optimizer's loops do not): an exception
// leaving a thread ends the process, which beats a silently lost update.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_HOST_THREADPOOL_H
#define MEMFIT_RUNTIME_HOST_THREADPOOL_H

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace memfit::rt::host {

using JobId = int64_t;

class ThreadPool {
public:
  /// Runs elements [lo, hi) of a job.
  using Body = std::function<void(int64_t lo, int64_t hi)>;

  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  /// A job over `count` elements in chunks of `chunk`; a job of no
  /// elements is done at once.
  JobId submit(int64_t count, int64_t chunk, Body body);
  void wait(JobId id);
  void waitAll();
  int threads() const { return static_cast<int>(workers.size()); }

private:
  struct Job {
    Body body;
    int64_t count, chunk;
    int64_t next = 0;      // the first element not yet handed out
    int64_t remaining = 0; // chunks not yet finished
  };
  void work();

  std::mutex mu;
  std::condition_variable workCv, doneCv;
  /// Jobs not yet finished, by id; those below `dispatchFrom` have every
  /// chunk handed out.
  std::map<JobId, Job> live;
  JobId nextId = 0, dispatchFrom = 0;
  bool stopping = false;
  std::vector<std::thread> workers;
};

} // namespace memfit::rt::host

#endif
