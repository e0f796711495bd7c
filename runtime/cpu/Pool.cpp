//===- Pool.cpp - Reference max, average and global average pooling -------===//
//
// Windows start at o * stride - padBegin and cover `kernel` positions.
// Max pooling takes the first maximum in row-major window order over the
// real input positions only (padding never wins; a NaN counts as larger
// than any number, as in PyTorch); its backward finds the same position
// again from x. Average pooling divides by the real positions, or with
// countIncludePad by the window clipped to the model's end pads (PyTorch's
// divisor, which differs from the full kernel only for ceil-mode windows).
//
//===----------------------------------------------------------------------===//
#include "runtime/Kernels.h"
#include "runtime/cpu/Common.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace memfit::rt {
using cpu::clearUnlessAccumulating;
using cpu::put;

namespace {

/// One pooling window: rows [h0, h1) and columns [w0, w1) of real input
/// positions, and the divisor an average uses.
struct Window {
  int64_t h0, h1, w0, w1;
  int64_t divisor;
};

Window windowAt(const PoolParams &p, int64_t oh, int64_t ow) {
  int64_t hs = oh * p.sh - p.padTop, ws = ow * p.sw - p.padLeft;
  int64_t he = std::min(hs + p.kh, p.hin + p.padBottom);
  int64_t we = std::min(ws + p.kw, p.win + p.padRight);
  Window win;
  win.h0 = std::max<int64_t>(hs, 0);
  win.w0 = std::max<int64_t>(ws, 0);
  win.h1 = std::min(he, p.hin);
  win.w1 = std::min(we, p.win);
  int64_t real = std::max<int64_t>(win.h1 - win.h0, 0) *
                 std::max<int64_t>(win.w1 - win.w0, 0);
  win.divisor = p.countIncludePad ? (he - hs) * (we - ws) : real;
  return win;
}

/// Index in the plane of the window's first maximum, or -1 when the window
/// holds no real position.
int64_t argmaxOf(const PoolParams &p, const Window &win, const float *plane) {
  int64_t best = -1;
  float bestValue = 0;
  for (int64_t ih = win.h0; ih < win.h1; ++ih)
    for (int64_t iw = win.w0; iw < win.w1; ++iw) {
      float v = plane[ih * p.win + iw];
      if (best < 0 || v > bestValue ||
          (std::isnan(v) && !std::isnan(bestValue))) {
        best = ih * p.win + iw;
        bestValue = v;
      }
    }
  return best;
}

} // namespace

void poolForward(const PoolParams &p, int64_t n, const float *x, float *y) {
  int64_t inPlane = p.hin * p.win, outPlane = p.hout * p.wout;
  for (int64_t pl = 0; pl < n * p.c; ++pl) {
    const float *xin = x + pl * inPlane;
    float *yout = y + pl * outPlane;
    for (int64_t oh = 0; oh < p.hout; ++oh)
      for (int64_t ow = 0; ow < p.wout; ++ow) {
        Window win = windowAt(p, oh, ow);
        float &out = yout[oh * p.wout + ow];
        if (p.kind == PoolKind::Max) {
          int64_t at = argmaxOf(p, win, xin);
          out = at < 0 ? -std::numeric_limits<float>::infinity() : xin[at];
          continue;
        }
        double sum = 0;
        for (int64_t ih = win.h0; ih < win.h1; ++ih)
          for (int64_t iw = win.w0; iw < win.w1; ++iw)
            sum += xin[ih * p.win + iw];
        // An empty window (only possible with degenerate pads) averages to 0.
        out = win.divisor > 0 ? float(sum / double(win.divisor)) : 0.0f;
      }
  }
}

void poolBackward(const PoolParams &p, int64_t n, const float *x,
                  const float *y, const float *dy, float *dx, bool accumulate) {
  int64_t inPlane = p.hin * p.win, outPlane = p.hout * p.wout;
  clearUnlessAccumulating(dx, n * p.c * inPlane, accumulate);
  for (int64_t pl = 0; pl < n * p.c; ++pl) {
    const float *xin = x + pl * inPlane;
    const float *dyout = dy + pl * outPlane;
    float *dxin = dx + pl * inPlane;
    for (int64_t oh = 0; oh < p.hout; ++oh)
      for (int64_t ow = 0; ow < p.wout; ++ow) {
        Window win = windowAt(p, oh, ow);
        float g = dyout[oh * p.wout + ow];
        if (p.kind == PoolKind::Max) {
          int64_t at = argmaxOf(p, win, xin);
          if (at >= 0)
            dxin[at] += g;
          continue;
        }
        if (win.divisor <= 0)
          continue;
        float share = g / float(win.divisor);
        for (int64_t ih = win.h0; ih < win.h1; ++ih)
          for (int64_t iw = win.w0; iw < win.w1; ++iw)
            dxin[ih * p.win + iw] += share;
      }
  }
}

void globalAvgPoolForward(int64_t n, int64_t c, int64_t spatial, const float *x,
                          float *y) {
  for (int64_t pl = 0; pl < n * c; ++pl) {
    double sum = 0;
    for (int64_t q = 0; q < spatial; ++q)
      sum += x[pl * spatial + q];
    y[pl] = float(sum / double(spatial));
  }
}

void globalAvgPoolBackward(int64_t n, int64_t c, int64_t spatial,
                           const float *dy, float *dx, bool accumulate) {
  for (int64_t pl = 0; pl < n * c; ++pl) {
    float share = dy[pl] / float(spatial);
    for (int64_t q = 0; q < spatial; ++q)
      put(dx[pl * spatial + q], share, accumulate);
  }
}

} // namespace memfit::rt
