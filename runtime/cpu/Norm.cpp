//===- Norm.cpp - CPU batch normalization and LRN ------------------------===//
//
// BatchNorm in training mode, PyTorch's semantics with ONNX's momentum:
// normalization uses the biased variance of the n * spatial values of each
// channel, the running variance receives the unbiased one. LRN follows ONNX:
// the square sum of channel c covers channels c - floor((size-1)/2) ..
// c + ceil((size-1)/2) (PyTorch's LocalResponseNorm agrees for odd sizes).
// Reductions run in double, in order; the per-element arithmetic is
// runtime/kernels/Norm.h, which the CUDA backend runs too.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/Norm.h"
#include "runtime/Kernels.h"
#include "runtime/cpu/Common.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace memfit::rt {
using cpu::put;

/// Channel ch's dy at element i, masked by a fused ReLU (scale and bias are
/// read only then).
static float dyAt(const BatchNormParams &p, int64_t ch, int64_t i,
                  const float *x, const float *dy, const float *scale,
                  const float *bias, float mean, float invStd) {
  return kernels::bnFusesAct(p) ? kernels::bnMaskedDy(p, x[i], dy[i], scale[ch],
                                                      bias[ch], mean, invStd)
                                : dy[i];
}

static void normalizeChannel(const BatchNormParams &p, int64_t n, int64_t ch,
                             const float *x, const float *scale,
                             const float *bias, float mean, float invStd,
                             float *y) {
  for (int64_t s = 0; s < n; ++s) {
    int64_t at = (s * p.c + ch) * p.spatial;
    for (int64_t q = 0; q < p.spatial; ++q)
      y[at + q] =
          kernels::bnOut(p, kernels::bnNormalize(x[at + q], scale[ch], bias[ch],
                                                 mean, invStd));
  }
}

void batchNormApply(const BatchNormParams &p, int64_t n, const float *x,
                    const float *scale, const float *bias,
                    const float *savedMean, const float *savedInvStd,
                    float *y) {
  for (int64_t ch = 0; ch < p.c; ++ch)
    normalizeChannel(p, n, ch, x, scale, bias, savedMean[ch], savedInvStd[ch],
                     y);
}

void batchNormInference(const BatchNormParams &p, int64_t n, const float *x,
                        const float *scale, const float *bias,
                        const float *runMean, const float *runVar, float *y) {
  for (int64_t ch = 0; ch < p.c; ++ch)
    normalizeChannel(p, n, ch, x, scale, bias, runMean[ch],
                     kernels::bnRunningInvStd(p, runVar[ch]), y);
}

/// Channel ch's mean and sum of squared deviations over n samples, in two
/// passes in double.
static void channelMoments(const BatchNormParams &p, int64_t n, int64_t ch,
                           const float *x, double &mean, double &sq) {
  double sum = 0;
  for (int64_t s = 0; s < n; ++s) {
    const float *xs = x + (s * p.c + ch) * p.spatial;
    for (int64_t q = 0; q < p.spatial; ++q)
      sum += xs[q];
  }
  mean = sum / double(n * p.spatial);
  sq = 0;
  for (int64_t s = 0; s < n; ++s) {
    const float *xs = x + (s * p.c + ch) * p.spatial;
    for (int64_t q = 0; q < p.spatial; ++q)
      sq += (xs[q] - mean) * (xs[q] - mean);
  }
}

void batchNormForward(const BatchNormParams &p, int64_t n, const float *x,
                      const float *scale, const float *bias, float *runMean,
                      float *runVar, float *y, float *savedMean,
                      float *savedInvStd, bool updateRunning) {
  const double count = double(n * p.spatial);
  for (int64_t ch = 0; ch < p.c; ++ch) {
    double mean, sq;
    channelMoments(p, n, ch, x, mean, sq);
    savedMean[ch] = float(mean);
    savedInvStd[ch] = float(kernels::bnInvStd(p, count, sq));
    // y from the saved (float) statistics, exactly as batchNormApply
    // computes it, so a recomputed forward is bit-identical.
    normalizeChannel(p, n, ch, x, scale, bias, savedMean[ch], savedInvStd[ch],
                     y);
    if (updateRunning)
      kernels::bnUpdateRunning(p, count, mean, sq, runMean[ch], runVar[ch]);
  }
}

void batchNormChunkStatistics(const BatchNormParams &p, int64_t n,
                              const float *x, float *stats, bool accumulate) {
  kernels::BnChunkState st = kernels::bnChunkState(p, stats);
  const double count = double(n * p.spatial);
  for (int64_t ch = 0; ch < p.c; ++ch) {
    double mean, sq;
    channelMoments(p, n, ch, x, mean, sq);
    if (accumulate) {
      kernels::bnCombine(st.mean[ch], st.m2[ch], *st.count, mean, sq, count);
    } else {
      st.mean[ch] = mean;
      st.m2[ch] = sq;
    }
  }
  *st.count = accumulate ? *st.count + count : count;
}

void batchNormFinalize(const BatchNormParams &p, float *stats, float *runMean,
                       float *runVar) {
  kernels::BnChunkState st = kernels::bnChunkState(p, stats);
  for (int64_t ch = 0; ch < p.c; ++ch) {
    stats[ch] = float(st.mean[ch]);
    stats[p.c + ch] = float(kernels::bnInvStd(p, *st.count, st.m2[ch]));
    kernels::bnUpdateRunning(p, *st.count, st.mean[ch], st.m2[ch], runMean[ch],
                             runVar[ch]);
  }
}

void batchNormBackwardDataBatch(const BatchNormParams &p, int64_t n,
                                double batchCount, const float *x,
                                const float *scale, const float *saved,
                                const float *sumDyXhat, const float *sumDy,
                                const float *dy, float *dx, bool accumulate,
                                const float *bias) {
  for (int64_t ch = 0; ch < p.c; ++ch)
    for (int64_t s = 0; s < n; ++s) {
      int64_t at = (s * p.c + ch) * p.spatial;
      for (int64_t q = 0; q < p.spatial; ++q)
        put(dx[at + q],
            kernels::bnGrad(x[at + q],
                            dyAt(p, ch, at + q, x, dy, scale, bias, saved[ch],
                                 saved[p.c + ch]),
                            scale[ch], saved[ch], saved[p.c + ch],
                            double(sumDy[ch]) / batchCount,
                            double(sumDyXhat[ch]) / batchCount),
            accumulate);
    }
}

namespace {
/// Per-channel sums of dy and of dy * xhat, the two reductions both
/// BatchNorm backward kernels need.
void bnSums(const BatchNormParams &p, int64_t n, int64_t ch, const float *x,
            const float *savedMean, const float *savedInvStd, const float *dy,
            const float *scale, const float *bias, double &sumDy,
            double &sumDyXhat) {
  sumDy = 0;
  sumDyXhat = 0;
  for (int64_t s = 0; s < n; ++s) {
    int64_t at = (s * p.c + ch) * p.spatial;
    for (int64_t q = 0; q < p.spatial; ++q) {
      const float d = dyAt(p, ch, at + q, x, dy, scale, bias, savedMean[ch],
                           savedInvStd[ch]);
      sumDy += d;
      sumDyXhat +=
          kernels::bnDyXhat(x[at + q], d, savedMean[ch], savedInvStd[ch]);
    }
  }
}
} // namespace

void batchNormBackwardData(const BatchNormParams &p, int64_t n, const float *x,
                           const float *scale, const float *savedMean,
                           const float *savedInvStd, const float *dy, float *dx,
                           bool accumulate, const float *bias) {
  const double count = double(n * p.spatial);
  for (int64_t ch = 0; ch < p.c; ++ch) {
    double sumDy, sumDyXhat;
    bnSums(p, n, ch, x, savedMean, savedInvStd, dy, scale, bias, sumDy,
           sumDyXhat);
    for (int64_t s = 0; s < n; ++s) {
      int64_t at = (s * p.c + ch) * p.spatial;
      for (int64_t q = 0; q < p.spatial; ++q)
        put(dx[at + q],
            kernels::bnGrad(x[at + q],
                            dyAt(p, ch, at + q, x, dy, scale, bias,
                                 savedMean[ch], savedInvStd[ch]),
                            scale[ch], savedMean[ch], savedInvStd[ch],
                            sumDy / count, sumDyXhat / count),
            accumulate);
    }
  }
}

void batchNormBackwardWeight(const BatchNormParams &p, int64_t n,
                             const float *x, const float *savedMean,
                             const float *savedInvStd, const float *dy,
                             float *dscale, float *dbias, bool accumulate,
                             const float *scale, const float *bias) {
  for (int64_t ch = 0; ch < p.c; ++ch) {
    double sumDy, sumDyXhat;
    bnSums(p, n, ch, x, savedMean, savedInvStd, dy, scale, bias, sumDy,
           sumDyXhat);
    put(dscale[ch], float(sumDyXhat), accumulate);
    put(dbias[ch], float(sumDy), accumulate);
  }
}

void lrnForward(const LRNParams &p, int64_t n, const float *x, float *y) {
  for (int64_t t = 0; t < n * p.c * p.spatial; ++t)
    y[t] = kernels::lrnAt(p, x, t);
}

void lrnBackward(const LRNParams &p, int64_t n, const float *x, const float *y,
                 const float *dy, float *dx, bool accumulate) {
  for (int64_t t = 0; t < n * p.c * p.spatial; ++t)
    put(dx[t], kernels::lrnGradAt(p, x, y, dy, t), accumulate);
}

void layerNormForward(const LayerNormParams &p, int64_t n, const float *x,
                      const float *scale, const float *bias, float *y) {
  for (int64_t r = 0; r < n * p.rows; ++r)
    kernels::lnForwardRow(p, x + r * p.d, scale, bias, y + r * p.d);
}

void layerNormBackwardData(const LayerNormParams &p, int64_t n, const float *x,
                           const float *scale, const float *dy, float *dx,
                           bool accumulate) {
  for (int64_t r = 0; r < n * p.rows; ++r)
    kernels::lnBackwardRow(p, x + r * p.d, scale, dy + r * p.d, dx + r * p.d,
                           accumulate);
}

void layerNormBackwardWeight(const LayerNormParams &p, int64_t n,
                             const float *x, const float *dy, float *dscale,
                             float *dbias, bool accumulate) {
  std::vector<double> ds(p.d, 0.0), dbs(p.d, 0.0);
  for (int64_t r = 0; r < n * p.rows; ++r) {
    const float *xr = x + r * p.d, *dyr = dy + r * p.d;
    double mean, invStd;
    kernels::lnRowStats(p, xr, mean, invStd);
    for (int64_t j = 0; j < p.d; ++j) {
      ds[j] += double(dyr[j]) * ((double(xr[j]) - mean) * invStd);
      dbs[j] += dyr[j];
    }
  }
  for (int64_t j = 0; j < p.d; ++j) {
    if (dscale)
      put(dscale[j], float(ds[j]), accumulate);
    if (dbias)
      put(dbias[j], float(dbs[j]), accumulate);
  }
}

} // namespace memfit::rt
