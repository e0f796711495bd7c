//===- Dropout.cpp - Counter-based inverted dropout
//-------------------------===//
//
// The mask is a pure function of (seed, iteration, task, sample, element), so
// a recomputed forward and the backward reproduce the forward's mask without
// storing it, whatever the sub-batching. The CUDA backend must reproduce the
// following bit for bit (all arithmetic on uint64_t, modulo 2^64):
//
//   mix(z):  z ^= z >> 30; z *= 0xbf58476d1ce4e5b9;
//            z ^= z >> 27; z *= 0x94d049bb133111eb;
//            z ^= z >> 31; return z;
//   step(z) = mix(z + 0x9e3779b97f4a7c15)        (one splitmix64 output)
//   dropoutKey(seed, iteration, task)
//           = step(step(step(seed) + iteration) + task)
//   h       = step(step(key + sample) + element)
//   dropoutUniform(key, sample, element)
//           = float(uint32_t(h >> 40)) * 2^-24   (exact; in [0, 1))
//
// Element `element` (0 .. perSample-1) of batch sample `sample` (the
// sub-batch's firstSample plus its index in the call) is kept when
// dropoutUniform(...) >= ratio (float comparison) and then multiplied by
// scale = 1.0f / (1.0f - ratio), computed in float with IEEE division;
// dropped elements are exactly 0. ratio 1 drops everything.
//
//===----------------------------------------------------------------------===//
#include "runtime/Kernels.h"
#include "runtime/cpu/Common.h"

namespace memfit::rt {
using cpu::put;

namespace {
uint64_t mix(uint64_t z) {
  z ^= z >> 30;
  z *= 0xbf58476d1ce4e5b9ULL;
  z ^= z >> 27;
  z *= 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return z;
}

uint64_t step(uint64_t z) { return mix(z + 0x9e3779b97f4a7c15ULL); }

float uniformFromSampleKey(uint64_t sampleKey, uint64_t element) {
  uint64_t h = step(sampleKey + element);
  return float(uint32_t(h >> 40)) * 0x1.0p-24f;
}
} // namespace

uint64_t dropoutKey(uint64_t seed, uint64_t iteration, uint64_t task) {
  return step(step(step(seed) + iteration) + task);
}

float dropoutUniform(uint64_t key, uint64_t sample, uint64_t element) {
  return uniformFromSampleKey(step(key + sample), element);
}

void dropoutForward(const DropoutParams &p, int64_t n, uint64_t key,
                    int64_t firstSample, const float *x, float *y) {
  const float scale = 1.0f / (1.0f - p.ratio);
  for (int64_t s = 0; s < n; ++s) {
    uint64_t sampleKey = step(key + uint64_t(firstSample + s));
    for (int64_t i = 0; i < p.perSample; ++i) {
      int64_t at = s * p.perSample + i;
      bool keep = uniformFromSampleKey(sampleKey, uint64_t(i)) >= p.ratio;
      y[at] = keep ? x[at] * scale : 0.0f;
    }
  }
}

void dropoutBackward(const DropoutParams &p, int64_t n, uint64_t key,
                     int64_t firstSample, const float *dy, float *dx,
                     bool accumulate) {
  const float scale = 1.0f / (1.0f - p.ratio);
  for (int64_t s = 0; s < n; ++s) {
    uint64_t sampleKey = step(key + uint64_t(firstSample + s));
    for (int64_t i = 0; i < p.perSample; ++i) {
      int64_t at = s * p.perSample + i;
      bool keep = uniformFromSampleKey(sampleKey, uint64_t(i)) >= p.ratio;
      put(dx[at], keep ? dy[at] * scale : 0.0f, accumulate);
    }
  }
}

} // namespace memfit::rt
