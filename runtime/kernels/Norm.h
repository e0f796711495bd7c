//===- Norm.h - Normalization kernels of both backends ----------*- C++ -*-===//
//
// BatchNorm's per-element arithmetic and LRN, compiled into the CPU
// emulation and the CUDA backend alike. BatchNorm's per-channel reductions
// (the mean and variance, the sums of dy and dy * xhat) are the one part
// each backend schedules its own way: in double, in order on the CPU, and
// in float with compensated sums over many blocks per channel on the GPU
// (the slicing and the partials' arithmetic are here, so the CPU tests run
// them); the per-element arithmetic is float and shared. LRN computes each
// element's channel window itself.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_KERNELS_NORM_H
#define MEMFIT_RUNTIME_KERNELS_NORM_H

#include "runtime/kernels/Pool.h"
#include "runtime/kernels/Sum.h"

namespace memfit::rt::kernels {

// --- BatchNorm ---

/// y from the saved (float) statistics: what the forward and a recomputed
/// forward both compute, so a recompute is bit-identical. Float, as
/// PyTorch's kernels compute it: this runs once per element on the GPU,
/// where double is 1/64 of float on most cards.
MEMFIT_HD float bnNormalize(float x, float scale, float bias, float mean,
                            float invStd) {
  const float a = scale * invStd;
  return (x - mean) * a + bias;
}

/// What a BatchNorm writes: its normalized value, through a fused ReLU's
/// rule when it has one (Elementwise.h's Relu: NaN passes).
MEMFIT_HD float bnOut(const BatchNormParams &p, float v) {
  if (p.clip)
    return v < p.lo ? p.lo : (v > p.hi ? p.hi : v);
  return p.relu && v < 0 ? 0.0f : v;
}

/// Whether the BatchNorm runs an activation after it (a ReLU or a Clip),
/// whose backward kernels then take the scale and bias for the mask.
MEMFIT_HD bool bnFusesAct(const BatchNormParams &p) { return p.relu || p.clip; }

/// The gradient a BatchNorm's backward differentiates at one element: dY,
/// masked by a fused ReLU as the ReLU's backward masks it (0 where the
/// output is not positive, NaN included). The mask comes from the
/// normalized value recomputed from x with the saved statistics, which is
/// the forward's bit for bit (bnNormalize), so the ReLU's output need not
/// be kept for it.
MEMFIT_HD float bnMaskedDy(const BatchNormParams &p, float x, float dy,
                           float scale, float bias, float mean, float invStd) {
  if (!bnFusesAct(p))
    return dy;
  // An output strictly inside the activation's open range passes dy (a
  // Clip's output there equals its input; NaN passes neither test).
  const float v = bnNormalize(x, scale, bias, mean, invStd);
  const bool pass = p.clip ? v > p.lo && v < p.hi : v > 0;
  return pass ? dy : 0.0f;
}

/// Evaluation's 1/sqrt(running var + eps), in float as PyTorch's eval-mode
/// kernels compute it; y is then bnNormalize with the running mean.
MEMFIT_HD float bnRunningInvStd(const BatchNormParams &p, float runVar) {
  return 1.0f / ::sqrtf(runVar + p.epsilon);
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
MEMFIT_HD float bnDyXhat(float x, float dy, float mean, float invStd) {
  return dy * ((x - mean) * invStd);
}

/// dx = scale * invStd * (dy - mean(dy) - xhat * mean(dy * xhat)), in float
/// (once per element, as bnNormalize).
MEMFIT_HD float bnGrad(float x, float dy, float scale, float mean, float invStd,
                       float meanDy, float meanDyXhat) {
  const float xhat = (x - mean) * invStd;
  const float k = scale * invStd;
  return k * ((dy - meanDy) - xhat * meanDyXhat);
}

// --- BatchNorm's reductions on the GPU ---
//
// One block per channel leaves most of a 132-SM GPU idle at 64 to 256
// channels, so the CUDA backend splits each channel's n * spatial values
// into `slices` runs of `per` consecutive values (in sample-major order),
// one block each; a block leaves one BnPartial, and the channel's partials
// combine in slice order. Everything is float with compensated sums; the
// order depends on the launch shape alone, so a rerun gives the same bits.

/// Blocks wanted over all channels of a launch: about 15 blocks of 512
/// threads per SM of a 132-SM H200, several waves on smaller GPUs.
constexpr int64_t kBnTargetBlocks = 2048;
/// Fewest values a slice holds: 8 per thread of a 512-thread block, below
/// which the partial's write and combine outweigh the slice's reads.
constexpr int64_t kBnMinPerSlice = 4096;
/// Channels per launch: the partials of one launch fit the scratch the
/// backend allocates at start-up (kBnMaxPartials).
constexpr int64_t kBnGroupChannels = 8192;
/// At most kBnGroupChannels + kBnTargetBlocks partials (bnSlices keeps
/// channels * slices below it).
constexpr int64_t kBnMaxPartials = kBnGroupChannels + kBnTargetBlocks;

struct BnSlices {
  int64_t slices, per;
};

/// How `channels` channels of `count` values each are sliced: enough
/// blocks to fill the GPU, none with fewer than kBnMinPerSlice values
/// unless a channel has fewer, and no empty slice.
MEMFIT_HD BnSlices bnSlices(int64_t channels, int64_t count) {
  int64_t want = (kBnTargetBlocks + channels - 1) / channels;
  int64_t most = maxOf(count / kBnMinPerSlice, int64_t(1));
  int64_t slices = maxOf(minOf(want, most), int64_t(1));
  int64_t per = (count + slices - 1) / slices;
  return {(count + per - 1) / per, per};
}

/// bnSlices with every slice a whole number of `align` values (the CUDA
/// backend's 16-byte packs, where a sample's positions are whole packs):
/// the per-slice length rounded up, the slice count recomputed, so still
/// no empty slice and no more partials.
MEMFIT_HD BnSlices bnSlicesAligned(int64_t channels, int64_t count,
                                   int64_t align) {
  BnSlices sl = bnSlices(channels, count);
  if (align <= 1)
    return sl;
  const int64_t per = (sl.per + align - 1) / align * align;
  return {(count + per - 1) / per, per};
}

/// One slice's sums of d = x - shift and of d * d. The shift is the
/// channel's first value, so the sums stay near the spread of the data
/// rather than its offset, and the variance from them does not cancel
/// (the shifted-data algorithm).
struct BnPartial {
  CompensatedSum d, dd;
  MEMFIT_HD void addValue(float x, float shift) {
    const float v = x - shift;
    d.add(v);
    dd.add(v * v);
  }
  MEMFIT_HD void add(const BnPartial &o) {
    d.add(o.d);
    dd.add(o.dd);
  }
};

/// A channel's float mean and sum of squared deviations over `count`
/// values, from its combined partial.
MEMFIT_HD void bnMoments(const BnPartial &all, float shift, float count,
                         float &mean, float &m2) {
  const float d = all.d.value(), dd = all.dd.value();
  const float md = d / count;
  mean = shift + md;
  m2 = dd - d * md;
  m2 = m2 < 0 ? 0.0f : m2; // rounding below an exact 0; NaN stays
}

/// 1/sqrt(biased var + eps) in float, from the sum of squared deviations.
MEMFIT_HD float bnInvStdF(const BatchNormParams &p, float count, float m2) {
  return 1.0f / sqrtf(m2 / count + p.epsilon);
}

/// One backward slice's sums of dy and dy * xhat (BnPartial's layout: d is
/// the sum of dy, dd that of dy * xhat).
MEMFIT_HD void bnAddGrad(BnPartial &s, float x, float dy, float mean,
                         float invStd) {
  s.d.add(dy);
  s.dd.add(bnDyXhat(x, dy, mean, invStd));
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

// --- LayerNorm on the GPU: float, compensated ---
//
// The CUDA backend reduces each row in float over a warp (the CPU in
// double, in order): a row's sums are BnPartials, shifted by the row's
// first value, combined in a tree fixed by the launch shape. Results agree
// with the CPU's to float rounding (about 1e-6 relative), not bit for bit.

/// A row's mean and 1/sqrt(biased var + eps) from its combined partial.
MEMFIT_HD void lnMomentsF(const BnPartial &all, float shift, int64_t d,
                          float epsilon, float &mean, float &invStd) {
  float m2;
  bnMoments(all, shift, float(d), mean, m2);
  invStd = 1.0f / sqrtf(m2 / float(d) + epsilon);
}

MEMFIT_HD float lnNormalizeF(float x, float mean, float invStd, float scale,
                             float bias) {
  return (x - mean) * invStd * scale + bias;
}

/// The backward's row sums: of g = dy * scale (d) and of g * (x - shift)
/// (dd), in BnPartial's layout.
MEMFIT_HD void lnAddGrad(BnPartial &s, float x, float dy, float scale,
                         float shift) {
  const float g = dy * scale;
  s.d.add(g);
  s.dd.add(g * (x - shift));
}

/// mean(g) and mean(g * xhat) of a row from its combined grad partial:
/// sum g * xhat = invStd * (sum g * (x - shift) - (mean - shift) * sum g).
MEMFIT_HD void lnGradMeans(const BnPartial &g, float shift, int64_t d,
                           float mean, float invStd, float &meanG,
                           float &meanGX) {
  const float sumG = g.d.value();
  meanG = sumG / float(d);
  meanGX = invStd * (g.dd.value() - (mean - shift) * sumG) / float(d);
}

/// dx = invStd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * scale.
MEMFIT_HD float lnGradF(float x, float dy, float scale, float mean,
                        float invStd, float meanG, float meanGX) {
  const float xhat = (x - mean) * invStd;
  return invStd * ((dy * scale - meanG) - xhat * meanGX);
}

} // namespace memfit::rt::kernels

#endif
