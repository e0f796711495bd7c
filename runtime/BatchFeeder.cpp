//===- BatchFeeder.cpp - The next batch, filled while this one runs -------===//
#include "runtime/BatchFeeder.h"

#include <cstring>

namespace memfit::rt {

namespace {

struct Augment {
  bool on = false, flip = false;
  int64_t pad = 0, top = 0, left = 0;
};

/// Sample s's crop offsets in [0, 2 * pad] and flip, from its own draw.
Augment augmentOf(const Dataset &d, uint64_t epoch, int64_t s) {
  Augment a;
  if (d.cropPad < 0 && !d.hflip)
    return a;
  const uint64_t h = sampleHash(d.augmentSeed, epoch, s);
  a.on = true;
  if (d.cropPad >= 0) {
    const auto span = static_cast<uint64_t>(2 * d.cropPad + 1);
    a.pad = d.cropPad;
    a.top = static_cast<int64_t>((h & 0xffff) % span);
    a.left = static_cast<int64_t>(((h >> 16) & 0xffff) % span);
  }
  a.flip = d.hflip && ((h >> 32) & 1);
  return a;
}

} // namespace

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
      } else {
        const Augment a = augmentOf(data, order.epoch, s);
        const int64_t H = data.height, W = data.width;
        for (int64_t k = 0; k < in; ++k) {
          float v;
          if (a.on) {
            // Crop from the padded image, then flip the crop.
            const int64_t c = k / (H * W), yx = k % (H * W);
            const int64_t col = yx % W;
            const int64_t sy = yx / W + a.top - a.pad;
            const int64_t sx = (a.flip ? W - 1 - col : col) + a.left - a.pad;
            v = sy < 0 || sy >= H || sx < 0 || sx >= W
                    ? 0.0f
                    : xs.floatAt(s * in + (c * H + sy) * W + sx);
          } else {
            v = xs.floatAt(s * in + k);
          }
          v = v / data.divisor;
          if (!data.mean.empty()) {
            const size_t c = static_cast<size_t>(k / data.channelSize);
            v = (v - data.mean[c]) / data.std[c];
          }
          dst[k] = v;
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
