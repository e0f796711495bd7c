//===- BatchFeeder.cpp - The next batch, filled while this one runs -------===//
#include "runtime/BatchFeeder.h"

#include <cstring>

namespace memfit::rt {

void BatchFeeder::run() {
  for (uint64_t k = 0; k < batches; ++k) {
    const auto b = static_cast<int32_t>(k % kBatchBuffers);
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return stop || state[b] == Free; });
      if (stop)
        return;
    }
    x.waitBatchFree(b);
    {
      std::lock_guard<std::mutex> lock(mu);
      fillStart[b] = std::chrono::steady_clock::now();
    }
    fill(b, order.next());
    x.prepareBatch(b);
    {
      std::lock_guard<std::mutex> lock(mu);
      state[b] = Full;
    }
    cv.notify_all();
  }
}

void BatchFeeder::fill(int32_t b, uint64_t at) {
  const ProgramInfo &p = x.info();
  const SampleLayout l{p.inputPerSample, p.labelPerSample, p.intInput,
                       p.mseLoss};
  fillBatch(data, l, order.idx.data() + at + mine, p.batch, order.epoch,
            x.hostInput(b), static_cast<char *>(x.hostLabels(b)), threads);
}

} // namespace memfit::rt
