//===- Conv.cpp - Reference 2-D convolution ------------------------------===//
//
// Grouped, strided, dilated convolution (cross-correlation, as PyTorch and
// ONNX), weights [cout, cin/group, kh, kw]. Each sample and group goes
// through im2col and a plain matrix product: the column buffer holds the
// K = cin/group*kh*kw filter taps as rows and the hout*wout output positions
// as columns, and the products are OpenBLAS's sgemm (cuDNN's counterpart:
// a maintained GEMM, not hand-written loops). Weight gradients are summed
// over the samples in double so the result does not depend on the batch
// size's rounding.
//
//===----------------------------------------------------------------------===//
#include "runtime/Kernels.h"
#include "runtime/cpu/Common.h"

#include <cblas.h>

#include <cassert>
#include <vector>

namespace memfit::rt {
using cpu::clearUnlessAccumulating;
using cpu::put;

namespace {

struct ConvDims {
  int64_t cinG, coutG;
  int64_t taps;      // K: rows of the column buffer
  int64_t positions; // P: output positions per channel
  int64_t inPlane;   // hin * win
  bool pointwise;    // the column buffer would equal the input itself
};

ConvDims dimsOf(const ConvParams &p) {
  assert(p.group > 0 && p.cin % p.group == 0 && p.cout % p.group == 0);
  ConvDims d;
  d.cinG = p.cin / p.group;
  d.coutG = p.cout / p.group;
  d.taps = d.cinG * p.kh * p.kw;
  d.positions = p.hout * p.wout;
  d.inPlane = p.hin * p.win;
  d.pointwise = p.kh == 1 && p.kw == 1 && p.sh == 1 && p.sw == 1 &&
                p.padTop == 0 && p.padLeft == 0 && p.hin == p.hout &&
                p.win == p.wout;
  return d;
}

/// cols[tap][pos] = the input value tap `tap` of output position `pos`
/// reads (0 in the padding), for one group's cinG input channels.
void im2col(const ConvParams &p, const ConvDims &d, const float *x,
            float *cols) {
  for (int64_t c = 0; c < d.cinG; ++c)
    for (int64_t ki = 0; ki < p.kh; ++ki)
      for (int64_t kj = 0; kj < p.kw; ++kj) {
        float *row = cols + ((c * p.kh + ki) * p.kw + kj) * d.positions;
        for (int64_t oh = 0; oh < p.hout; ++oh) {
          float *dst = row + oh * p.wout;
          int64_t ih = oh * p.sh - p.padTop + ki * p.dh;
          if (ih < 0 || ih >= p.hin) {
            std::fill(dst, dst + p.wout, 0.0f);
            continue;
          }
          const float *src = x + c * d.inPlane + ih * p.win;
          for (int64_t ow = 0; ow < p.wout; ++ow) {
            int64_t iw = ow * p.sw - p.padLeft + kj * p.dw;
            dst[ow] = iw >= 0 && iw < p.win ? src[iw] : 0.0f;
          }
        }
      }
}

/// The transpose of im2col: adds every column entry into the input value it
/// was read from.
void col2imAdd(const ConvParams &p, const ConvDims &d, const float *cols,
               float *dx) {
  for (int64_t c = 0; c < d.cinG; ++c)
    for (int64_t ki = 0; ki < p.kh; ++ki)
      for (int64_t kj = 0; kj < p.kw; ++kj) {
        const float *row = cols + ((c * p.kh + ki) * p.kw + kj) * d.positions;
        for (int64_t oh = 0; oh < p.hout; ++oh) {
          int64_t ih = oh * p.sh - p.padTop + ki * p.dh;
          if (ih < 0 || ih >= p.hin)
            continue;
          const float *src = row + oh * p.wout;
          float *dst = dx + c * d.inPlane + ih * p.win;
          for (int64_t ow = 0; ow < p.wout; ++ow) {
            int64_t iw = ow * p.sw - p.padLeft + kj * p.dw;
            if (iw >= 0 && iw < p.win)
              dst[iw] += src[ow];
          }
        }
      }
}

} // namespace

void convForward(const ConvParams &p, int64_t n, const float *x, const float *w,
                 const float *bias, float *y) {
  ConvDims d = dimsOf(p);
  std::vector<float> buf(d.pointwise ? 0 : d.taps * d.positions);
  for (int64_t s = 0; s < n; ++s)
    for (int64_t g = 0; g < p.group; ++g) {
      const float *xg = x + (s * p.cin + g * d.cinG) * d.inPlane;
      const float *cols = xg;
      if (!d.pointwise) {
        im2col(p, d, xg, buf.data());
        cols = buf.data();
      }
      // y_g[coutG, P] = w_g[coutG, K] * cols[K, P]
      float *yg = y + (s * p.cout + g * d.coutG) * d.positions;
      // y may hold the emulation's NaN poison: cleared, then added to.
      std::fill(yg, yg + d.coutG * d.positions, 0.0f);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, d.coutG,
                  d.positions, d.taps, 1.0f, w + g * d.coutG * d.taps, d.taps,
                  cols, d.positions, 1.0f, yg, d.positions);
      if (bias)
        for (int64_t co = 0; co < d.coutG; ++co) {
          float b = bias[g * d.coutG + co];
          float *yrow = yg + co * d.positions;
          for (int64_t q = 0; q < d.positions; ++q)
            yrow[q] += b;
        }
    }
}

void convBackwardData(const ConvParams &p, int64_t n, const float *w,
                      const float *dy, float *dx, bool accumulate) {
  ConvDims d = dimsOf(p);
  clearUnlessAccumulating(dx, n * p.cin * d.inPlane, accumulate);
  std::vector<float> buf(d.pointwise ? 0 : d.taps * d.positions);
  for (int64_t s = 0; s < n; ++s)
    for (int64_t g = 0; g < p.group; ++g) {
      float *dxg = dx + (s * p.cin + g * d.cinG) * d.inPlane;
      // Pointwise: the column gradient is the input gradient itself.
      float *dcols = d.pointwise ? dxg : buf.data();
      // dcols[K, P] (+)= w_g^T[K, coutG] * dy_g[coutG, P]; dx was cleared
      // or holds what to accumulate onto.
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d.taps, d.positions,
                  d.coutG, 1.0f, w + g * d.coutG * d.taps, d.taps,
                  dy + (s * p.cout + g * d.coutG) * d.positions, d.positions,
                  d.pointwise ? 1.0f : 0.0f, dcols, d.positions);
      if (!d.pointwise)
        col2imAdd(p, d, buf.data(), dxg);
    }
}

void convBackwardFilter(const ConvParams &p, int64_t n, const float *x,
                        const float *dy, float *dw, float *dbias,
                        bool accumulate) {
  ConvDims d = dimsOf(p);
  std::vector<double> sumW(p.cout * d.taps, 0.0), sumB(p.cout, 0.0);
  std::vector<float> buf(d.pointwise ? 0 : d.taps * d.positions);
  std::vector<float> sample(d.coutG * d.taps);
  for (int64_t s = 0; s < n; ++s)
    for (int64_t g = 0; g < p.group; ++g) {
      const float *xg = x + (s * p.cin + g * d.cinG) * d.inPlane;
      const float *cols = xg;
      if (!d.pointwise) {
        im2col(p, d, xg, buf.data());
        cols = buf.data();
      }
      // This sample's dw_g[coutG, K] = dy_g[coutG, P] * cols^T[P, K], added
      // to the batch's sum in double.
      const float *dyg = dy + (s * p.cout + g * d.coutG) * d.positions;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, d.coutG, d.taps,
                  d.positions, 1.0f, dyg, d.positions, cols, d.positions, 0.0f,
                  sample.data(), d.taps);
      double *sg = sumW.data() + g * d.coutG * d.taps;
      for (int64_t i = 0; i < d.coutG * d.taps; ++i)
        sg[i] += sample[i];
      if (dbias)
        for (int64_t co = 0; co < d.coutG; ++co) {
          const float *dyrow = dyg + co * d.positions;
          for (int64_t q = 0; q < d.positions; ++q)
            sumB[g * d.coutG + co] += dyrow[q];
        }
    }
  for (int64_t i = 0; i < p.cout * d.taps; ++i)
    put(dw[i], float(sumW[i]), accumulate);
  if (dbias)
    for (int64_t oc = 0; oc < p.cout; ++oc)
      put(dbias[oc], float(sumB[oc]), accumulate);
}

} // namespace memfit::rt
