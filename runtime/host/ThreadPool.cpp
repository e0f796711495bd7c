//===- ThreadPool.cpp - A fixed pool for chunked host jobs ----------------===//
#include "runtime/host/ThreadPool.h"

#include <algorithm>
#include <cassert>

namespace memfit::rt::host {

ThreadPool::ThreadPool(int threads) {
  assert(threads >= 1 && "a pool needs a thread");
  workers.reserve(threads);
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([this] { work(); });
}

ThreadPool::~ThreadPool() {
  {
    std::unique_lock<std::mutex> lock(mu);
    doneCv.wait(lock, [&] { return live.empty(); });
    stopping = true;
  }
  workCv.notify_all();
  for (std::thread &t : workers)
    t.join();
}

JobId ThreadPool::submit(int64_t count, int64_t chunk, Body body) {
  assert(count >= 0 && chunk >= 1 && "a job's elements and chunk");
  std::lock_guard<std::mutex> lock(mu);
  JobId id = nextId++;
  if (count == 0) {
    if (dispatchFrom == id)
      dispatchFrom = id + 1;
    return id;
  }
  Job &job = live[id];
  job.body = std::move(body);
  job.count = count;
  job.chunk = chunk;
  job.remaining = (count + chunk - 1) / chunk;
  workCv.notify_all();
  return id;
}

void ThreadPool::wait(JobId id) {
  assert(id >= 0 && id < nextId && "waiting for a job never submitted");
  std::unique_lock<std::mutex> lock(mu);
  doneCv.wait(lock, [&] { return live.find(id) == live.end(); });
}

void ThreadPool::waitAll() {
  std::unique_lock<std::mutex> lock(mu);
  doneCv.wait(lock, [&] { return live.empty(); });
}

void ThreadPool::work() {
  std::unique_lock<std::mutex> lock(mu);
  for (;;) {
    auto pending = [&] { return live.lower_bound(dispatchFrom); };
    workCv.wait(lock, [&] { return stopping || pending() != live.end(); });
    auto it = pending();
    if (it == live.end())
      return; // stopping, and nothing left to hand out
    const JobId id = it->first;
    Job &job = it->second;
    const int64_t lo = job.next, hi = std::min(job.count, lo + job.chunk);
    job.next = hi;
    if (hi == job.count)
      dispatchFrom = id + 1;
    // A std::map node stays where it is while other jobs come and go, and
    // this one is not erased before its last chunk finishes.
    lock.unlock();
    job.body(lo, hi);
    lock.lock();
    if (--job.remaining == 0) {
      live.erase(id);
      doneCv.notify_all();
    }
  }
}

} // namespace memfit::rt::host
