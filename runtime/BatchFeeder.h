//===- BatchFeeder.h - The next batch, filled while this one runs -*- C++
//-*-===//
//
// The trainer's data on the host and the thread that fills batch after
// batch into the two pinned buffers of the Exec (kBatchBuffers): while the
// device runs an iteration from one buffer, the next batch is written into
// the other. The order of the samples is SampleOrder's, the same one a
// checkpoint records and a resumed run continues.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_BATCHFEEDER_H
#define MEMFIT_RUNTIME_BATCHFEEDER_H

#include "runtime/BatchFill.h"
#include "runtime/Exec.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

namespace memfit::rt {

/// Fills the batches of `batches` iterations, in order, into the two host
/// buffers on a thread of its own: buffer k % 2 for the k-th. A buffer is
/// refilled once the trainer has handed it back (its iteration issued) and
/// the device has finished reading it (Exec::waitBatchFree).
class BatchFeeder {
public:
  BatchFeeder(Exec &x, const Dataset &data, int64_t mine, SampleOrder order,
              uint64_t batches, int threads = 1)
      : x(x), data(data), mine(mine), order(std::move(order)), batches(batches),
        threads(threads) {
    thread = std::thread([this] { run(); });
  }
  ~BatchFeeder() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    thread.join();
  }
  BatchFeeder(const BatchFeeder &) = delete;
  BatchFeeder &operator=(const BatchFeeder &) = delete;

  /// The buffer holding the next iteration's batch, once it is filled.
  int32_t acquire() {
    const int32_t b = static_cast<int32_t>(taken++ % kBatchBuffers);
    std::unique_lock<std::mutex> lock(mu);
    if (state[b] != Full) {
      const auto t0 = std::chrono::steady_clock::now();
      cv.wait(lock, [&] { return state[b] == Full; });
      // Until the filling began the reader itself waited for the device to
      // finish reading the buffer (an iteration still running): only the
      // rest is time the data kept the device waiting.
      const auto began = std::max(t0, fillStart[b]);
      waited += std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                              began)
                    .count();
      waitedForDevice += std::chrono::duration<double>(began - t0).count();
    }
    state[b] = InUse;
    return b;
  }
  /// Seconds acquire waited for a batch while it was being filled (the
  /// first's included): the time the run was input-bound.
  double waitedSeconds() const { return waited; }
  /// Seconds acquire waited while the buffer was still being read by an
  /// iteration on the device: the host ahead of the device, which is the
  /// device being the bottleneck, not the data.
  double waitedForDeviceSeconds() const { return waitedForDevice; }
  /// The iteration reading buffer b is issued.
  void release(int32_t b) {
    {
      std::lock_guard<std::mutex> lock(mu);
      state[b] = Free;
    }
    cv.notify_all();
  }

private:
  enum State { Free, Full, InUse };

  void run();
  void fill(int32_t b, uint64_t at);

  Exec &x;
  const Dataset &data;
  const int64_t mine;
  SampleOrder order;
  const uint64_t batches;
  const int threads;          // reader threads filling each batch (fillBatch)
  uint64_t taken = 0;         // the trainer's thread only
  double waited = 0;          // the trainer's thread only
  double waitedForDevice = 0; // the trainer's thread only
  // When the reader began filling each buffer (after the device freed it);
  // guarded by mu.
  std::chrono::steady_clock::time_point fillStart[kBatchBuffers] = {};
  std::mutex mu;
  std::condition_variable cv;
  State state[kBatchBuffers] = {Free, Free};
  bool stop = false;
  std::thread thread;
};

} // namespace memfit::rt

#endif
