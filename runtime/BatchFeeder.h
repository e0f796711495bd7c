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

#include "runtime/Exec.h"
#include "runtime/MappedArray.h"
#include "runtime/TokenStream.h"

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

/// The data set: `count` samples, from mapped files (xs, ys: converted as
/// each batch is filled), a token stream, or held whole (synthetic: inputs
/// as float, labels as int32 class ids or floats for mse).
struct Dataset {
  int64_t count = 0;
  std::vector<float> x;
  std::vector<int32_t> y;
  std::vector<float> yf;
  /// --data and --labels, mapped; float inputs are (v / divisor - mean[c])
  /// / std[c] in float, c the channel of channelSize values (no mean:
  /// v / divisor), as torchvision's ToTensor and Normalize compute.
  std::shared_ptr<const MappedArray> xs, ys;
  float divisor = 1.0f;
  /// Augmentation of [C, H, W] images, drawn per (seed, epoch, sample):
  /// torchvision's RandomCrop(padding=cropPad) when cropPad >= 0, then
  /// RandomHorizontalFlip when hflip; padding reads as 0 before scaling.
  int64_t cropPad = -1;
  bool hflip = false;
  int64_t height = 0, width = 0;
  uint64_t augmentSeed = 0;
  std::vector<float> mean, std;
  int64_t channelSize = 0;
  /// --tokens: `count` windows of seqLen tokens cut from a mapped token
  /// file as the samples come (x and y stay empty).
  std::shared_ptr<const TokenStream> tokens;
  int64_t seqLen = 0;
  bool tokenRandom = true;
  uint64_t tokenSeed = 0;
};

inline std::vector<int64_t> epochOrder(int64_t count, bool shuffle,
                                       uint64_t seed, uint64_t epoch) {
  std::vector<int64_t> idx(count);
  std::iota(idx.begin(), idx.end(), 0);
  if (shuffle) {
    std::mt19937_64 rng(seed * 1000003 + epoch);
    for (int64_t i = count - 1; i > 0; --i)
      std::swap(idx[i], idx[rng() % (i + 1)]);
  }
  return idx;
}

/// Which samples batch after batch holds: the epoch's order and the cursor
/// in it, as a checkpoint keeps them. The trainer's loop and the feeder
/// thread each walk their own copy, so they agree without sharing it.
struct SampleOrder {
  int64_t count, global;
  bool shuffle;
  uint64_t seed, cursor, epoch;
  std::vector<int64_t> idx;
  SampleOrder(int64_t count, int64_t global, bool shuffle, uint64_t seed,
              uint64_t cursor, uint64_t epoch)
      : count(count), global(global), shuffle(shuffle), seed(seed),
        cursor(cursor), epoch(epoch),
        idx(epochOrder(count, shuffle, seed, epoch)) {}
  /// The next global batch's first position in idx; the last partial
  /// batch of an epoch is dropped.
  uint64_t next() {
    if (cursor + global > static_cast<uint64_t>(count)) {
      cursor = 0;
      ++epoch;
      idx = epochOrder(count, shuffle, seed, epoch);
    }
    uint64_t at = cursor;
    cursor += global;
    return at;
  }
};

/// Fills the batches of `batches` iterations, in order, into the two host
/// buffers on a thread of its own: buffer k % 2 for the k-th. A buffer is
/// refilled once the trainer has handed it back (its iteration issued) and
/// the device has finished reading it (Exec::waitBatchFree).
class BatchFeeder {
public:
  BatchFeeder(Exec &x, const Dataset &data, int64_t mine, SampleOrder order,
              uint64_t batches)
      : x(x), data(data), mine(mine), order(std::move(order)),
        batches(batches) {
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
      waited +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
              .count();
    }
    state[b] = InUse;
    return b;
  }
  /// Seconds acquire waited for a batch not yet filled (the first's
  /// included): the time the run was input-bound.
  double waitedSeconds() const { return waited; }
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
  uint64_t taken = 0; // the trainer's thread only
  double waited = 0;  // the trainer's thread only
  std::mutex mu;
  std::condition_variable cv;
  State state[kBatchBuffers] = {Free, Free};
  bool stop = false;
  std::thread thread;
};

} // namespace memfit::rt

#endif
