//===- BatchFill.cpp - A batch's samples, converted and augmented ---------===//
#include "runtime/BatchFill.h"

#include <cmath>
#include <cstring>
#include <thread>

namespace memfit::rt {

namespace {

struct Augment {
  bool on = false, flip = false;
  int64_t pad = 0, top = 0, left = 0;
};

/// The uniform draws of one sample's resized crop: splitmix64's stream
/// from the sample's hash, 53 bits a double.
struct Draws {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform(double lo, double hi) {
    return lo + (hi - lo) * (double(next() >> 11) * 0x1.0p-53);
  }
  /// In [lo, hi].
  int64_t between(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(next() % uint64_t(hi - lo + 1));
  }
};

/// Python's round(): half to even (the default rounding mode's).
int64_t roundEven(double v) { return static_cast<int64_t>(std::nearbyint(v)); }

/// The flip of the sample whose draw is h (one bit of it, apart from the
/// crop offsets' bits).
bool flipBit(const Dataset &d, uint64_t h) {
  return d.hflip && ((h >> 32) & 1);
}

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
  a.flip = flipBit(d, h);
  return a;
}

/// A float image sample: element by element through the element type,
/// augmented, divided and normalized.
void imageSample(const Dataset &d, const MappedArray &xs, int64_t in, int64_t s,
                 const Augment &a, float *dst) {
  const int64_t H = d.height, W = d.width;
  for (int64_t k = 0; k < in; ++k) {
    float v;
    if (a.on) {
      // Crop from the padded image, then flip the crop.
      const int64_t c = k / (H * W), yx = k % (H * W), col = yx % W;
      const int64_t sy = yx / W + a.top - a.pad;
      const int64_t sx = (a.flip ? W - 1 - col : col) + a.left - a.pad;
      v = sy < 0 || sy >= H || sx < 0 || sx >= W
              ? 0.0f
              : xs.floatAt(s * in + (c * H + sy) * W + sx);
    } else {
      v = xs.floatAt(s * in + k);
    }
    v = v / d.divisor;
    if (!d.mean.empty()) {
      const size_t c = static_cast<size_t>(k / d.channelSize);
      v = (v - d.mean[c]) / d.std[c];
    }
    dst[k] = v;
  }
}

/// The same for uint8 images through Dataset::lut, row by row: what the
/// element loop computes, bit for bit, at a table lookup an element.
void byteImageSample(const Dataset &d, const MappedArray &xs, int64_t in,
                     int64_t s, const Augment &a, float *dst) {
  const unsigned char *src = xs.bytes() + s * in;
  if (!a.on) {
    const int64_t per = d.mean.empty() ? in : d.channelSize;
    for (int64_t k = 0; k < in; ++k)
      dst[k] = d.lut[static_cast<size_t>((k / per) * 256 + src[k])];
    return;
  }
  const int64_t H = d.height, W = d.width, C = in / (H * W);
  for (int64_t c = 0; c < C; ++c) {
    const float *lut = d.lut.data() + (d.mean.empty() ? 0 : c) * 256;
    for (int64_t y = 0; y < H; ++y) {
      float *row = dst + (c * H + y) * W;
      const int64_t sy = y + a.top - a.pad;
      if (sy < 0 || sy >= H) {
        std::fill(row, row + W, lut[0]);
        continue;
      }
      const unsigned char *srow = src + (c * H + sy) * W;
      for (int64_t x = 0; x < W; ++x) {
        const int64_t sx = (a.flip ? W - 1 - x : x) + a.left - a.pad;
        row[x] = sx < 0 || sx >= W ? lut[0] : lut[srow[sx]];
      }
    }
  }
}

/// A resized crop of image sample s (C x height x width, `at` giving
/// v / divisor) into C x outHeight x outWidth: torch's bilinear
/// interpolation (align_corners=False, no antialiasing) on those, in
/// float in its order of operations, then the flip and the normalization.
template <typename At>
void resizedCropSample(const Dataset &d, int64_t channels, const CropBox &b,
                       bool flip, At at, float *dst) {
  const int64_t H = d.height, W = d.width, OH = d.outHeight, OW = d.outWidth;
  struct Tap {
    int64_t i0, i1;
    float l0, l1;
  };
  auto taps = [](int64_t in, int64_t out, int64_t start) {
    std::vector<Tap> t(static_cast<size_t>(out));
    const float scale = float(in) / float(out);
    for (int64_t o = 0; o < out; ++o) {
      float src = scale * (float(o) + 0.5f) - 0.5f;
      src = src < 0 ? 0.0f : src;
      const auto i0 = static_cast<int64_t>(src);
      const float l1 = src - float(i0);
      t[size_t(o)] = {start + i0, start + i0 + (i0 < in - 1 ? 1 : 0), 1.0f - l1,
                      l1};
    }
    return t;
  };
  const std::vector<Tap> ty = taps(b.height, OH, b.top);
  const std::vector<Tap> tx = taps(b.width, OW, b.left);
  for (int64_t c = 0; c < channels; ++c) {
    const float mean = d.mean.empty() ? 0.0f : d.mean[size_t(c)];
    const float stdv = d.mean.empty() ? 1.0f : d.std[size_t(c)];
    auto v = [&](int64_t y, int64_t x) { return at((c * H + y) * W + x); };
    for (int64_t y = 0; y < OH; ++y) {
      const Tap &ry = ty[size_t(y)];
      for (int64_t x = 0; x < OW; ++x) {
        const Tap &rx = tx[size_t(flip ? OW - 1 - x : x)];
        const float t =
            ry.l0 * (rx.l0 * v(ry.i0, rx.i0) + rx.l1 * v(ry.i0, rx.i1)) +
            ry.l1 * (rx.l0 * v(ry.i1, rx.i0) + rx.l1 * v(ry.i1, rx.i1));
        dst[(c * OH + y) * OW + x] = d.mean.empty() ? t : (t - mean) / stdv;
      }
    }
  }
}

void fillRange(const Dataset &d, const SampleLayout &l, const int64_t *samples,
               int64_t from, int64_t to, uint64_t epoch, float *hx, char *hy) {
  const int64_t in = l.inputPerSample, out = l.labelPerSample;
  const int64_t labelBytes = out * 4;
  if (const TokenStream *t = d.tokens.get()) {
    // Window i: its T ids as the input, the T after each as the labels.
    const int64_t T = d.seqLen;
    auto *labels = reinterpret_cast<int32_t *>(hy);
    for (int64_t i = from; i < to; ++i) {
      const int64_t start = windowStart(samples[i], epoch, t->size(), T,
                                        d.tokenRandom, d.tokenSeed);
      for (int64_t k = 0; k < T; ++k) {
        const auto id = static_cast<int32_t>(t->at(start + k));
        std::memcpy(hx + i * T + k, &id, 4);
        labels[i * T + k] = static_cast<int32_t>(t->at(start + k + 1));
      }
    }
    return;
  }
  for (int64_t i = from; i < to; ++i) {
    const int64_t s = samples[i];
    float *dst = hx + i * in;
    if (!d.xs.empty()) {
      const auto [xa, xr] = d.xs.at(s);
      const auto [ya, yr] = d.ys.at(s);
      const MappedArray &xs = *xa, &ys = *ya;
      if (l.intInput) {
        for (int64_t k = 0; k < in; ++k) {
          const auto id = static_cast<int32_t>(xs.intAt(xr * in + k));
          std::memcpy(dst + k, &id, 4);
        }
      } else if (d.resizedCrop) {
        const CropBox b = resizedCropBox(d, epoch, s);
        const bool flip = flipped(d, epoch, s);
        const int64_t stored = d.height * d.width;
        const int64_t channels = in / (d.outHeight * d.outWidth);
        if (xs.type() == ElemType::U8) {
          // v / divisor of each byte, computed once (the same division).
          const float *scaled = d.scaled.data();
          const unsigned char *src = xs.bytes() + xr * channels * stored;
          resizedCropSample(
              d, channels, b, flip,
              [src, scaled](int64_t k) { return scaled[src[k]]; }, dst);
        } else {
          const int64_t base = xr * channels * stored;
          const float divisor = d.divisor;
          resizedCropSample(
              d, channels, b, flip,
              [&xs, base, divisor](int64_t k) {
                return xs.floatAt(base + k) / divisor;
              },
              dst);
        }
      } else if (!d.lut.empty()) {
        byteImageSample(d, xs, in, xr, augmentOf(d, epoch, s), dst);
      } else {
        imageSample(d, xs, in, xr, augmentOf(d, epoch, s), dst);
      }
      if (l.mseLoss) {
        auto *dy = reinterpret_cast<float *>(hy + i * labelBytes);
        for (int64_t k = 0; k < out; ++k)
          dy[k] = ys.floatAt(yr * out + k);
      } else {
        auto *dy = reinterpret_cast<int32_t *>(hy + i * labelBytes);
        for (int64_t k = 0; k < out; ++k)
          dy[k] = static_cast<int32_t>(ys.intAt(yr * out + k));
      }
      continue;
    }
    std::memcpy(dst, &d.x[s * in], in * 4);
    const void *src = l.mseLoss ? static_cast<const void *>(&d.yf[s * out])
                                : static_cast<const void *>(&d.y[s * out]);
    std::memcpy(hy + i * labelBytes, src, labelBytes);
  }
}

} // namespace

CropBox resizedCropBox(const Dataset &d, uint64_t epoch, int64_t s) {
  // Its own stream, apart from the flip's bit.
  Draws r{sampleHash(d.augmentSeed ^ 0x2545f4914f6cdd1dull, epoch, s)};
  const double area = double(d.height) * double(d.width);
  const double lo = std::log(3.0 / 4.0), hi = std::log(4.0 / 3.0);
  for (int k = 0; k < 10; ++k) {
    const double target = area * r.uniform(d.scaleLo, d.scaleHi);
    const double aspect = std::exp(r.uniform(lo, hi));
    const int64_t w = roundEven(std::sqrt(target * aspect));
    const int64_t h = roundEven(std::sqrt(target / aspect));
    if (w > 0 && w <= d.width && h > 0 && h <= d.height) {
      const int64_t top = r.between(0, d.height - h);
      const int64_t left = r.between(0, d.width - w);
      return {top, left, h, w};
    }
  }
  const double ratio = double(d.width) / double(d.height);
  int64_t w = d.width, h = d.height;
  if (ratio < 3.0 / 4.0)
    h = roundEven(double(w) / (3.0 / 4.0));
  else if (ratio > 4.0 / 3.0)
    w = roundEven(double(h) * (4.0 / 3.0));
  return {(d.height - h) / 2, (d.width - w) / 2, h, w};
}

bool flipped(const Dataset &d, uint64_t epoch, int64_t s) {
  return flipBit(d, sampleHash(d.augmentSeed, epoch, s));
}

void buildByteTable(Dataset &d) {
  d.lut.clear();
  d.scaled.clear();
  if (d.xs.empty() || d.xs.front().type() != ElemType::U8)
    return;
  d.scaled.resize(256);
  for (int v = 0; v < 256; ++v)
    d.scaled[static_cast<size_t>(v)] = static_cast<float>(v) / d.divisor;
  // Each channel's 256 values through the element loop's float arithmetic
  // (imageSample), once.
  const size_t tables = d.mean.empty() ? 1 : d.mean.size();
  d.lut.resize(tables * 256);
  for (size_t c = 0; c < tables; ++c)
    for (int v = 0; v < 256; ++v) {
      float f = static_cast<float>(v) / d.divisor;
      if (!d.mean.empty())
        f = (f - d.mean[c]) / d.std[c];
      d.lut[c * 256 + static_cast<size_t>(v)] = f;
    }
}

void fillBatch(const Dataset &d, const SampleLayout &l, const int64_t *samples,
               int64_t count, uint64_t epoch, float *hx, char *hy,
               int threads) {
  const int64_t n =
      std::clamp<int64_t>(threads, 1, std::max<int64_t>(1, count));
  if (n == 1)
    return fillRange(d, l, samples, 0, count, epoch, hx, hy);
  // Contiguous ranges, the first on this thread.
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(n - 1));
  auto range = [&](int64_t k) {
    return std::pair<int64_t, int64_t>{count * k / n, count * (k + 1) / n};
  };
  for (int64_t k = 1; k < n; ++k)
    pool.emplace_back([&, k] {
      auto [lo, hi] = range(k);
      fillRange(d, l, samples, lo, hi, epoch, hx, hy);
    });
  auto [lo, hi] = range(0);
  fillRange(d, l, samples, lo, hi, epoch, hx, hy);
  for (std::thread &t : pool)
    t.join();
}

} // namespace memfit::rt
