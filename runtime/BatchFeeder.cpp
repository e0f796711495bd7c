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
  float *hx = x.hostInput(b);
  auto *hy = static_cast<char *>(x.hostLabels(b));
  const int64_t labelBytes = p.labelPerSample * 4;
  if (const TokenStream *t = data.tokens.get()) {
    // Window i: its T ids as the input, the T after each as the labels.
    const int64_t T = data.seqLen;
    auto *labels = reinterpret_cast<int32_t *>(hy);
    for (int64_t i = 0; i < p.batch; ++i) {
      const int64_t start =
          windowStart(order.idx[at + mine + i], order.epoch, t->size(), T,
                      data.tokenRandom, data.tokenSeed);
      for (int64_t k = 0; k < T; ++k) {
        const auto id = static_cast<int32_t>(t->at(start + k));
        std::memcpy(hx + i * T + k, &id, 4);
        labels[i * T + k] = static_cast<int32_t>(t->at(start + k + 1));
      }
    }
    return;
  }
  if (data.xs) {
    const MappedArray &xs = *data.xs, &ys = *data.ys;
    const int64_t in = p.inputPerSample, out = p.labelPerSample;
    for (int64_t i = 0; i < p.batch; ++i) {
      const int64_t s = order.idx[at + mine + i];
      float *dst = hx + i * in;
      if (p.intInput) {
        for (int64_t k = 0; k < in; ++k) {
          const auto id = static_cast<int32_t>(xs.intAt(s * in + k));
          std::memcpy(dst + k, &id, 4);
        }
      } else if (data.mean.empty()) {
        for (int64_t k = 0; k < in; ++k)
          dst[k] = xs.floatAt(s * in + k) * data.scale;
      } else {
        for (int64_t k = 0; k < in; ++k) {
          const size_t c = static_cast<size_t>(k / data.channelSize);
          dst[k] = (xs.floatAt(s * in + k) * data.scale - data.mean[c]) /
                   data.std[c];
        }
      }
      if (p.mseLoss) {
        auto *dy = reinterpret_cast<float *>(hy + i * labelBytes);
        for (int64_t k = 0; k < out; ++k)
          dy[k] = ys.floatAt(s * out + k);
      } else {
        auto *dy = reinterpret_cast<int32_t *>(hy + i * labelBytes);
        for (int64_t k = 0; k < out; ++k)
          dy[k] = static_cast<int32_t>(ys.intAt(s * out + k));
      }
    }
    return;
  }
  for (int64_t i = 0; i < p.batch; ++i) {
    int64_t s = order.idx[at + mine + i];
    std::memcpy(hx + i * p.inputPerSample, &data.x[s * p.inputPerSample],
                p.inputPerSample * 4);
    const void *src =
        p.mseLoss ? static_cast<const void *>(&data.yf[s * p.labelPerSample])
                  : static_cast<const void *>(&data.y[s * p.labelPerSample]);
    std::memcpy(hy + i * labelBytes, src, labelBytes);
  }
}

} // namespace memfit::rt
