//===- Dropout.cpp - Counter-based inverted dropout -----------------------===//
//
// The mask is a pure function of (seed, iteration, task, sample, element), so
// a recomputed forward and the backward reproduce the forward's mask without
// storing it, whatever the sub-batching. runtime/kernels/Elementwise.h
// computes it for both backends (all arithmetic on uint64_t, modulo 2^64):
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
#include "runtime/kernels/Elementwise.h"

namespace memfit::rt {
using cpu::put;

using kernels::step64;

uint64_t dropoutKey(uint64_t seed, uint64_t iteration, uint64_t task) {
  return kernels::dropoutKeyOf(seed, iteration, task);
}

float dropoutUniform(uint64_t key, uint64_t sample, uint64_t element) {
  return kernels::uniformOf(step64(key + sample), element);
}

void dropoutForward(const DropoutParams &p, int64_t n, uint64_t key,
                    int64_t firstSample, const float *x, float *y) {
  for (int64_t at = 0; at < n * p.perSample; ++at)
    y[at] = kernels::dropoutAt(p, key, firstSample, at, x[at]);
}

void dropoutBackward(const DropoutParams &p, int64_t n, uint64_t key,
                     int64_t firstSample, const float *dy, float *dx,
                     bool accumulate) {
  for (int64_t at = 0; at < n * p.perSample; ++at)
    put(dx[at], kernels::dropoutAt(p, key, firstSample, at, dy[at]),
        accumulate);
}

} // namespace memfit::rt
