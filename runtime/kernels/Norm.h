//===- Norm.h - Normalization kernels of both backends ----------*- C++ -*-===//
//
// BatchNorm's per-element arithmetic and LRN, compiled into the CPU
// emulation and the CUDA backend alike. BatchNorm's per-channel reductions
// (the mean and variance, the sums of dy and dy * xhat) are the one part
// each backend schedules its own way: in double, in order on the CPU, and
// a block reduction in double per channel on the GPU; everything computed
// from them is here. LRN computes each element's channel window itself.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_KERNELS_NORM_H
#define MEMFIT_RUNTIME_KERNELS_NORM_H

#include "runtime/kernels/Pool.h"

namespace memfit::rt::kernels {

// --- BatchNorm ---

/// y from the saved (float) statistics: what the forward and a recomputed
/// forward both compute, so a recompute is bit-identical.
MEMFIT_HD float bnNormalize(float x, float scale, float bias, float mean,
                            float invStd) {
  double a = double(scale) * double(invStd);
  return float((double(x) - double(mean)) * a + double(bias));
}

/// The running statistics after one training step: ONNX's momentum
/// (running * m + batch * (1 - m)), with the unbiased variance as PyTorch
/// keeps it (the biased one for a single value per channel, which has no
/// unbiased variance).
MEMFIT_HD void bnUpdateRunning(const BatchNormParams &p, double count,
                               double mean, double sumSq, float &runMean,
                               float &runVar) {
  double var = sumSq / count;
  double unbiased = count > 1 ? sumSq / (count - 1) : var;
  float m = p.momentum;
  runMean = float(double(runMean) * m + mean * (1.0 - m));
  runVar = float(double(runVar) * m + unbiased * (1.0 - m));
}

MEMFIT_HD double bnInvStd(const BatchNormParams &p, double count,
                          double sumSq) {
  return 1.0 / ::sqrt(sumSq / count + double(p.epsilon));
}

/// Where a batch split into chunks keeps a BatchNorm's running combination
/// inside its stats block: after the float mean and inverse deviation
/// (2 * c floats), per channel the mean and the sum of squared deviations
/// in double, then the count of values combined so far.
struct BnChunkState {
  double *mean, *m2, *count;
};
MEMFIT_HD BnChunkState bnChunkState(const BatchNormParams &p, float *stats) {
  auto *d = reinterpret_cast<double *>(stats + 2 * p.c);
  return {d, d + p.c, d + 2 * p.c};
}

/// Adds a chunk's mean and sum of squared deviations over `nb` values to
/// the combination so far over `na` (Chan, Golub and LeVeque's pairwise
/// update): the batch's statistics without a second pass over it.
MEMFIT_HD void bnCombine(double &mean, double &m2, double na, double meanB,
                         double m2B, double nb) {
  double n = na + nb, delta = meanB - mean;
  mean += delta * (nb / n);
  m2 += m2B + delta * delta * (na * nb / n);
}

/// The term dy * xhat of the weight gradient's second reduction.
MEMFIT_HD double bnDyXhat(float x, float dy, double mean, double invStd) {
  return double(dy) * ((double(x) - mean) * invStd);
}

/// dx = scale * invStd * (dy - mean(dy) - xhat * mean(dy * xhat)).
MEMFIT_HD float bnGrad(float x, float dy, float scale, double mean,
                       double invStd, double meanDy, double meanDyXhat) {
  double xhat = (double(x) - mean) * invStd;
  double k = double(scale) * invStd;
  return float(k * (double(dy) - meanDy - xhat * meanDyXhat));
}

// --- LRN ---

/// bias + alpha / size * (sum of x^2 over channel ch's window), at spatial
/// position q of one sample.
MEMFIT_HD double lrnDenominator(const LRNParams &p, auto xs, int64_t ch,
                                int64_t q) {
  const int64_t before = (p.size - 1) / 2, after = p.size - 1 - before;
  int64_t lo = maxOf(ch - before, 0), hi = minOf(ch + after, p.c - 1);
  double sq = 0;
  for (int64_t j = lo; j <= hi; ++j) {
    double v = xs[j * p.spatial + q];
    sq += v * v;
  }
  return double(p.bias) + double(p.alpha) / double(p.size) * sq;
}

/// Output element t: y = x * d^-beta.
MEMFIT_HD float lrnAt(const LRNParams &p, auto x, int64_t t) {
  const int64_t per = p.c * p.spatial;
  int64_t s = t / per, i = t - s * per;
  int64_t ch = i / p.spatial, q = i - ch * p.spatial;
  double d = lrnDenominator(p, x + s * per, ch, q);
  return float(x[t] * ::pow(d, -double(p.beta)));
}

/// Input gradient element t. With y_c = x_c * d_c^-beta:
///   dx_i = dy_i * d_i^-beta
///          - 2 alpha beta / size * x_i * sum_{c: i in window(c)} dy_c y_c /
///          d_c
/// and i lies in window(c) exactly when c is in i - after .. i + before.
MEMFIT_HD float lrnGradAt(const LRNParams &p, auto x, auto y, auto dy,
                          int64_t t) {
  const int64_t per = p.c * p.spatial;
  const int64_t before = (p.size - 1) / 2, after = p.size - 1 - before;
  const double k = 2.0 * double(p.alpha) * double(p.beta) / double(p.size);
  int64_t s = t / per, i = t - s * per;
  int64_t ch = i / p.spatial, q = i - ch * p.spatial;
  auto xs = x + s * per, ys = y + s * per, dys = dy + s * per;
  int64_t lo = maxOf(ch - after, 0), hi = minOf(ch + before, p.c - 1);
  double sum = 0;
  for (int64_t j = lo; j <= hi; ++j) {
    int64_t at = j * p.spatial + q;
    sum += double(dys[at]) * ys[at] / lrnDenominator(p, xs, j, q);
  }
  double d = lrnDenominator(p, xs, ch, q);
  return float(dys[i] * ::pow(d, -double(p.beta)) - k * xs[i] * sum);
}

// --- LayerNorm: one row of d features at a time ---

/// The row's mean and 1/sqrt(biased var + eps), in double.
MEMFIT_HD void lnRowStats(const LayerNormParams &p, auto xr, double &mean,
                          double &invStd) {
  double sum = 0;
  for (int64_t j = 0; j < p.d; ++j)
    sum += xr[j];
  mean = sum / double(p.d);
  double sq = 0;
  for (int64_t j = 0; j < p.d; ++j) {
    double c = double(xr[j]) - mean;
    sq += c * c;
  }
  invStd = 1.0 / ::sqrt(sq / double(p.d) + double(p.epsilon));
}

MEMFIT_HD void lnForwardRow(const LayerNormParams &p, auto xr, auto scale,
                            auto bias, auto yr) {
  double mean, invStd;
  lnRowStats(p, xr, mean, invStd);
  for (int64_t j = 0; j < p.d; ++j) {
    double xhat = (double(xr[j]) - mean) * invStd;
    yr[j] = float(xhat * scale[j] + (bias ? double(bias[j]) : 0.0));
  }
}

/// dx = invStd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * scale.
MEMFIT_HD void lnBackwardRow(const LayerNormParams &p, auto xr, auto scale,
                             auto dyr, auto dxr, bool accumulate) {
  double mean, invStd;
  lnRowStats(p, xr, mean, invStd);
  double sumG = 0, sumGX = 0;
  for (int64_t j = 0; j < p.d; ++j) {
    double g = double(dyr[j]) * scale[j];
    sumG += g;
    sumGX += g * (double(xr[j]) - mean) * invStd;
  }
  double mg = sumG / double(p.d), mgx = sumGX / double(p.d);
  for (int64_t j = 0; j < p.d; ++j) {
    double xhat = (double(xr[j]) - mean) * invStd;
    double g = double(dyr[j]) * scale[j];
    put(dxr[j], float(invStd * (g - mg - xhat * mgx)), accumulate);
  }
}

} // namespace memfit::rt::kernels

#endif
