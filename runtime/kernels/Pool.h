//===- Pool.h - Pooling kernels of both backends ----------------*- C++ -*-===//
//
// Max and average pooling, one output (forward) or one input gradient
// (backward, gathered from the outputs whose windows cover it) per call,
// compiled into the CPU emulation and the CUDA backend alike. Windows start
// at o * stride - padBegin and cover `kernel` positions. Max pooling takes
// the first maximum in row-major window order over the real input positions
// only (padding never wins; a NaN counts as larger than any number, as in
// PyTorch); its backward finds the same position again from x. Average
// pooling divides by the real positions, or with countIncludePad by the
// window clipped to the model's end pads (PyTorch's divisor, which differs
// from the full kernel only for ceil-mode windows). A gradient adds its
// contributions in row-major output order onto its start value, the same
// order on both backends.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_KERNELS_POOL_H
#define MEMFIT_RUNTIME_KERNELS_POOL_H

#include "runtime/kernels/Elementwise.h"

namespace memfit::rt::kernels {

/// One pooling window: rows [h0, h1) and columns [w0, w1) of real input
/// positions, and the divisor an average uses.
struct Window {
  int64_t h0, h1, w0, w1;
  int64_t divisor;
};

MEMFIT_HD int64_t minOf(int64_t a, int64_t b) { return a < b ? a : b; }
MEMFIT_HD int64_t maxOf(int64_t a, int64_t b) { return a > b ? a : b; }

MEMFIT_HD Window windowAt(const PoolParams &p, int64_t oh, int64_t ow) {
  int64_t hs = oh * p.sh - p.padTop, ws = ow * p.sw - p.padLeft;
  int64_t he = minOf(hs + p.kh, p.hin + p.padBottom);
  int64_t we = minOf(ws + p.kw, p.win + p.padRight);
  Window win;
  win.h0 = maxOf(hs, 0);
  win.w0 = maxOf(ws, 0);
  win.h1 = minOf(he, p.hin);
  win.w1 = minOf(we, p.win);
  int64_t real = maxOf(win.h1 - win.h0, 0) * maxOf(win.w1 - win.w0, 0);
  win.divisor = p.countIncludePad ? (he - hs) * (we - ws) : real;
  return win;
}

/// Index in the plane of the window's first maximum, or -1 when the window
/// holds no real position.
MEMFIT_HD int64_t argmaxOf(const PoolParams &p, const Window &win, auto plane) {
  int64_t best = -1;
  float bestValue = 0;
  for (int64_t ih = win.h0; ih < win.h1; ++ih)
    for (int64_t iw = win.w0; iw < win.w1; ++iw) {
      float v = plane[ih * p.win + iw];
      bool nan = v != v, bestNan = bestValue != bestValue;
      if (best < 0 || v > bestValue || (nan && !bestNan)) {
        best = ih * p.win + iw;
        bestValue = v;
      }
    }
  return best;
}

/// Output element t of n * c planes.
MEMFIT_HD float poolAt(const PoolParams &p, auto x, int64_t t) {
  const int64_t outPlane = p.hout * p.wout, inPlane = p.hin * p.win;
  int64_t pl = t / outPlane, q = t - pl * outPlane;
  int64_t oh = q / p.wout, ow = q - oh * p.wout;
  auto plane = x + pl * inPlane;
  Window win = windowAt(p, oh, ow);
  if (p.kind == PoolKind::Max) {
    int64_t at = argmaxOf(p, win, plane);
    return at < 0 ? -HUGE_VALF : plane[at];
  }
  double sum = 0;
  for (int64_t ih = win.h0; ih < win.h1; ++ih)
    for (int64_t iw = win.w0; iw < win.w1; ++iw)
      sum += plane[ih * p.win + iw];
  // An empty window (only possible with degenerate pads) averages to 0.
  return win.divisor > 0 ? float(sum / double(win.divisor)) : 0.0f;
}

MEMFIT_HD int64_t floorDiv(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
MEMFIT_HD int64_t ceilDiv(int64_t a, int64_t b) { return -floorDiv(-a, b); }

/// Input gradient element t, added onto `start` (the gradient there when
/// accumulating, else 0). x is read by max pooling only, so average
/// pooling may be called with x null.
MEMFIT_HD float poolGradAt(const PoolParams &p, auto x, auto dy, int64_t t,
                           float start) {
  const int64_t outPlane = p.hout * p.wout, inPlane = p.hin * p.win;
  int64_t pl = t / inPlane, q = t - pl * inPlane;
  int64_t ih = q / p.win, iw = q - ih * p.win;
  auto dyPlane = dy + pl * outPlane;
  // Outputs whose kernel extent covers (ih, iw); windowAt decides.
  int64_t ohLo = maxOf(ceilDiv(ih + p.padTop - p.kh + 1, p.sh), 0);
  int64_t ohHi = minOf(floorDiv(ih + p.padTop, p.sh), p.hout - 1);
  int64_t owLo = maxOf(ceilDiv(iw + p.padLeft - p.kw + 1, p.sw), 0);
  int64_t owHi = minOf(floorDiv(iw + p.padLeft, p.sw), p.wout - 1);
  float v = start;
  for (int64_t oh = ohLo; oh <= ohHi; ++oh)
    for (int64_t ow = owLo; ow <= owHi; ++ow) {
      Window win = windowAt(p, oh, ow);
      if (ih < win.h0 || ih >= win.h1 || iw < win.w0 || iw >= win.w1)
        continue;
      float g = dyPlane[oh * p.wout + ow];
      if (p.kind == PoolKind::Max) {
        if (argmaxOf(p, win, x + pl * inPlane) == q)
          v += g;
      } else if (win.divisor > 0) {
        v += g / float(win.divisor);
      }
    }
  return v;
}

/// Global average pooling's input gradient element t.
MEMFIT_HD float gapGradAt(int64_t spatial, auto dy, int64_t t) {
  return dy[t / spatial] / float(spatial);
}

} // namespace memfit::rt::kernels

#endif
