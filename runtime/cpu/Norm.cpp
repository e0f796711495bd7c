//===- Norm.cpp - Reference batch normalization and LRN
//--------------------===//
//
// BatchNorm in training mode, PyTorch's semantics with ONNX's momentum:
// normalization uses the biased variance of the n * spatial values of each
// channel, the running variance receives the unbiased one. LRN follows ONNX:
// the square sum of channel c covers channels c - floor((size-1)/2) ..
// c + ceil((size-1)/2) (PyTorch's LocalResponseNorm agrees for odd sizes).
// Reductions run in double.
//
//===----------------------------------------------------------------------===//
#include "runtime/Kernels.h"
#include "runtime/cpu/Common.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace memfit::rt {
using cpu::put;

static void normalizeChannel(const BatchNormParams &p, int64_t n, int64_t ch,
                             const float *x, const float *scale,
                             const float *bias, float mean, float invStd,
                             float *y) {
  double a = double(scale[ch]) * double(invStd);
  for (int64_t s = 0; s < n; ++s) {
    const float *xs = x + (s * p.c + ch) * p.spatial;
    float *ys = y + (s * p.c + ch) * p.spatial;
    for (int64_t q = 0; q < p.spatial; ++q)
      ys[q] = float((double(xs[q]) - double(mean)) * a + double(bias[ch]));
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

void batchNormForward(const BatchNormParams &p, int64_t n, const float *x,
                      const float *scale, const float *bias, float *runMean,
                      float *runVar, float *y, float *savedMean,
                      float *savedInvStd, bool updateRunning) {
  const int64_t count = n * p.spatial;
  for (int64_t ch = 0; ch < p.c; ++ch) {
    double sum = 0;
    for (int64_t s = 0; s < n; ++s) {
      const float *xs = x + (s * p.c + ch) * p.spatial;
      for (int64_t q = 0; q < p.spatial; ++q)
        sum += xs[q];
    }
    double mean = sum / double(count), sq = 0;
    for (int64_t s = 0; s < n; ++s) {
      const float *xs = x + (s * p.c + ch) * p.spatial;
      for (int64_t q = 0; q < p.spatial; ++q)
        sq += (xs[q] - mean) * (xs[q] - mean);
    }
    double var = sq / double(count);
    double invStd = 1.0 / std::sqrt(var + double(p.epsilon));
    savedMean[ch] = float(mean);
    savedInvStd[ch] = float(invStd);
    // y from the saved (float) statistics, exactly as batchNormApply
    // computes it, so a recomputed forward is bit-identical.
    normalizeChannel(p, n, ch, x, scale, bias, savedMean[ch], savedInvStd[ch],
                     y);
    if (updateRunning) {
      // A single value per channel has no unbiased variance (PyTorch refuses
      // it); the biased one (0) is used then.
      double unbiased = count > 1 ? sq / double(count - 1) : var;
      float m = p.momentum;
      runMean[ch] = float(double(runMean[ch]) * m + mean * (1.0 - m));
      runVar[ch] = float(double(runVar[ch]) * m + unbiased * (1.0 - m));
    }
  }
}

namespace {
/// Per-channel sums of dy and of dy * xhat, the two reductions both
/// BatchNorm backward kernels need.
void bnSums(const BatchNormParams &p, int64_t n, int64_t ch, const float *x,
            const float *savedMean, const float *savedInvStd, const float *dy,
            double &sumDy, double &sumDyXhat) {
  sumDy = 0;
  sumDyXhat = 0;
  double mean = savedMean[ch], invStd = savedInvStd[ch];
  for (int64_t s = 0; s < n; ++s) {
    const float *xs = x + (s * p.c + ch) * p.spatial;
    const float *dys = dy + (s * p.c + ch) * p.spatial;
    for (int64_t q = 0; q < p.spatial; ++q) {
      sumDy += dys[q];
      sumDyXhat += dys[q] * ((xs[q] - mean) * invStd);
    }
  }
}
} // namespace

void batchNormBackwardData(const BatchNormParams &p, int64_t n, const float *x,
                           const float *scale, const float *savedMean,
                           const float *savedInvStd, const float *dy, float *dx,
                           bool accumulate) {
  const double count = double(n * p.spatial);
  for (int64_t ch = 0; ch < p.c; ++ch) {
    double sumDy, sumDyXhat;
    bnSums(p, n, ch, x, savedMean, savedInvStd, dy, sumDy, sumDyXhat);
    // dx = scale * invStd * (dy - mean(dy) - xhat * mean(dy * xhat))
    double mean = savedMean[ch], invStd = savedInvStd[ch];
    double k = double(scale[ch]) * invStd;
    double meanDy = sumDy / count, meanDyXhat = sumDyXhat / count;
    for (int64_t s = 0; s < n; ++s) {
      const float *xs = x + (s * p.c + ch) * p.spatial;
      const float *dys = dy + (s * p.c + ch) * p.spatial;
      float *dxs = dx + (s * p.c + ch) * p.spatial;
      for (int64_t q = 0; q < p.spatial; ++q) {
        double xhat = (xs[q] - mean) * invStd;
        put(dxs[q], float(k * (dys[q] - meanDy - xhat * meanDyXhat)),
            accumulate);
      }
    }
  }
}

void batchNormBackwardWeight(const BatchNormParams &p, int64_t n,
                             const float *x, const float *savedMean,
                             const float *savedInvStd, const float *dy,
                             float *dscale, float *dbias, bool accumulate) {
  for (int64_t ch = 0; ch < p.c; ++ch) {
    double sumDy, sumDyXhat;
    bnSums(p, n, ch, x, savedMean, savedInvStd, dy, sumDy, sumDyXhat);
    put(dscale[ch], float(sumDyXhat), accumulate);
    put(dbias[ch], float(sumDy), accumulate);
  }
}

namespace {
/// d[c][q] = bias + alpha / size * (sum of x^2 over c's channel window) for
/// one sample.
void lrnDenominator(const LRNParams &p, const float *xs, double *d) {
  const int64_t before = (p.size - 1) / 2, after = p.size - 1 - before;
  std::vector<double> sq(p.spatial);
  for (int64_t ch = 0; ch < p.c; ++ch) {
    std::fill(sq.begin(), sq.end(), 0.0);
    int64_t lo = std::max<int64_t>(ch - before, 0);
    int64_t hi = std::min<int64_t>(ch + after, p.c - 1);
    for (int64_t j = lo; j <= hi; ++j) {
      const float *xj = xs + j * p.spatial;
      for (int64_t q = 0; q < p.spatial; ++q)
        sq[q] += double(xj[q]) * xj[q];
    }
    double k = double(p.alpha) / double(p.size);
    for (int64_t q = 0; q < p.spatial; ++q)
      d[ch * p.spatial + q] = double(p.bias) + k * sq[q];
  }
}
} // namespace

void lrnForward(const LRNParams &p, int64_t n, const float *x, float *y) {
  const int64_t per = p.c * p.spatial;
  std::vector<double> d(per);
  for (int64_t s = 0; s < n; ++s) {
    lrnDenominator(p, x + s * per, d.data());
    for (int64_t i = 0; i < per; ++i)
      y[s * per + i] = float(x[s * per + i] * std::pow(d[i], -double(p.beta)));
  }
}

// With d_c as above and y_c = x_c * d_c^-beta:
//   dx_i = dy_i * d_i^-beta
//          - 2 * alpha * beta / size * x_i * sum_{c : i in window(c)}
//                                              dy_c * y_c / d_c
// and i lies in window(c) exactly when c is in i - after .. i + before.
void lrnBackward(const LRNParams &p, int64_t n, const float *x, const float *y,
                 const float *dy, float *dx, bool accumulate) {
  const int64_t per = p.c * p.spatial;
  const int64_t before = (p.size - 1) / 2, after = p.size - 1 - before;
  const double k = 2.0 * double(p.alpha) * double(p.beta) / double(p.size);
  std::vector<double> d(per), t(per), acc(p.spatial);
  for (int64_t s = 0; s < n; ++s) {
    const float *xs = x + s * per, *ys = y + s * per, *dys = dy + s * per;
    float *dxs = dx + s * per;
    lrnDenominator(p, xs, d.data());
    for (int64_t i = 0; i < per; ++i)
      t[i] = double(dys[i]) * ys[i] / d[i];
    for (int64_t ch = 0; ch < p.c; ++ch) {
      std::fill(acc.begin(), acc.end(), 0.0);
      int64_t lo = std::max<int64_t>(ch - after, 0);
      int64_t hi = std::min<int64_t>(ch + before, p.c - 1);
      for (int64_t j = lo; j <= hi; ++j)
        for (int64_t q = 0; q < p.spatial; ++q)
          acc[q] += t[j * p.spatial + q];
      for (int64_t q = 0; q < p.spatial; ++q) {
        int64_t i = ch * p.spatial + q;
        double g =
            dys[i] * std::pow(d[i], -double(p.beta)) - k * xs[i] * acc[q];
        put(dxs[i], float(g), accumulate);
      }
    }
  }
}

} // namespace memfit::rt
